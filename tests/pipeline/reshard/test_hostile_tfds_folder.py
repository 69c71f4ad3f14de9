"""TFDS folders as a hand edit, a copy cut short or an attacker leaves them, given to ``shardkit
reshard`` in a child under a memory limit: one ``Error:`` line naming the file, exit 2, nothing
written into OUT, no input byte changed, and no file outside the folder read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shardkit.formats.containers import registry
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # the shardkit command in child processes, about a second a test


def _shard(path: Path, records: int) -> None:
    """A TFRecord file of ``records`` small records (shardkit's writer frames them as TensorFlow does)."""
    container = registry.configured(["tfrecord"], index=False)[0]
    writer = container.open_writer(str(path), str(path))
    for i in range(records):
        writer.write(b"record %d" % i)
    writer.close(sync=False)


def _folder(root: Path, splits: list[dict[str, Any]], **info: Any) -> Path:
    """A TFDS folder as ``download_and_prepare`` writes one: ``dataset_info.json`` (protobuf's JSON,
    indented, int64 as strings) beside the shards its splits name under the default template."""
    folder = root / "tiny" / "1.0.0"
    folder.mkdir(parents=True)
    for split in splits:
        n = len(split.get("shardLengths", []))
        for i, length in enumerate(split.get("shardLengths", [])):
            _shard(folder / f"tiny-{split['name']}.tfrecord-{i:05d}-of-{n:05d}", int(length))
    document = {"fileFormat": "tfrecord", "name": "tiny", "splits": splits, "version": "1.0.0", **info}
    (folder / "dataset_info.json").write_text(json.dumps(document, indent=2))
    return folder


def _refused(folder: Path, tmp_path: Path) -> str:
    before = digests(tmp_path)
    result = run_cli(["reshard", folder, "-o", tmp_path / "out", "--shards", "2", "--workers", "1"], tmp_path)
    line = one_line_error(result)
    assert result.returncode == 2 and not (tmp_path / "out").exists()
    assert digests(tmp_path) == before
    return line


def test_a_template_that_leaves_the_folder_is_refused_before_reading_there(tmp_path: Path) -> None:
    outside = tmp_path / "secrets"
    outside.mkdir()
    _shard(outside / "train-00000-of-00001", 3)  # a real TFRecord where the template points
    template = "../../../secrets/{SPLIT}-{SHARD_X_OF_Y}"
    folder = _folder(tmp_path / "data", [{"name": "train", "numBytes": "10", "shardLengths": ["3"], "filepathTemplate": template}])
    line = _refused(folder, tmp_path)
    assert line.startswith(f"Error: {folder / 'dataset_info.json'}: splits[0] (train): filepathTemplate") and "outside the folder" in line


def test_a_million_shards_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "data", [{"name": "train", "numBytes": "10", "shardLengths": ["1"]}])
    info = json.loads((folder / "dataset_info.json").read_text())
    info["splits"][0]["shardLengths"] = ["1"] * 1_000_000
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=2))
    line = _refused(folder, tmp_path)
    assert line.startswith(f"Error: {folder / 'dataset_info.json'}: more than 100,000 shard files")


def test_a_dataset_info_past_any_real_size_is_not_read(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "data", [{"name": "train", "numBytes": "10", "shardLengths": ["2"]}])
    with open(folder / "dataset_info.json", "r+b") as f:  # 100 MB, sparse
        f.truncate(100 << 20)
    line = _refused(folder, tmp_path)
    assert line.startswith(f"Error: {folder / 'dataset_info.json'}: 104,857,600 bytes, more than a TFDS metadata file holds")


def test_nesting_deeper_than_python_recurses_is_one_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "data", [{"name": "train", "numBytes": "10", "shardLengths": ["2"]}])
    (folder / "dataset_info.json").write_text('{"splits": ' + "[" * 200_000 + "]" * 200_000 + "}")
    line = _refused(folder, tmp_path)
    assert line == f"Error: {folder / 'dataset_info.json'}: not JSON (RecursionError)"
