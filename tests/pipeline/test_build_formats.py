"""``--format``: ArrayRecord shards, alone or beside TFRecord from one plan, read back by outside readers.

TensorFlow, array_record's own ``ArrayRecordDataSource`` and TFDS' ``as_data_source`` are the
oracles: the ArrayRecord shards hold the very records the TFRecord shards hold, in the same order.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import shardkit
import shardkit.tfdata
from shardkit.cli import main
from shardkit.errors import ShardkitError
from tests.hostile import digests
from tests.tfread import raw_records, spec_from_manifest

pytest.importorskip("array_record")

CONFIG = "configs/camvid-segmentation.yaml"
NOT_GZIPPED = "--compression gzip is TFRecord's: ArrayRecord files are read at any record, so they are not gzipped; drop --compression"


def _array_records(out: Path, split: str) -> list[bytes]:
    """Every record of a split's ArrayRecord shards, in shard order, as array_record reads them."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    files = sorted(str(p) for p in out.glob(f"{split}-*-of-*.array_record"))
    assert files, f"no ArrayRecord shards for {split} in {out}"
    source = ArrayRecordDataSource(files)
    return [source[i] for i in range(len(source))]


def _parsed(records: list[bytes], spec: dict[str, Any]) -> list[dict[str, Any]]:
    import tensorflow as tf

    parsed = tf.io.parse_example(tf.constant(records), spec)
    dense = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()}
    return [{k: v[i] for k, v in dense.items()} for i in range(len(records))]


@pytest.fixture(scope="module")
def both(seg_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("both") / "out"
    shardkit.build([seg_data], out, config=CONFIG, format="tfrecord,arrayrecord", records_per_shard=7, workers=2, progress=False)
    return out


def test_both_containers_hold_the_same_records_and_tensorflow_parses_equal_values(both: Path) -> None:
    spec = spec_from_manifest(str(both))
    counts = {name: split["records"] for name, split in json.loads((both / "manifest.json").read_text())["splits"].items()}
    for split in ("train", "val"):
        tfrecords, arrayrecords = raw_records(str(both), split), _array_records(both, split)
        assert arrayrecords == tfrecords and len(tfrecords) == counts[split] > 0
        for ours, theirs in zip(_parsed(arrayrecords, spec), _parsed(tfrecords, spec), strict=True):
            assert ours.keys() == theirs.keys()
            for key in ours:
                np.testing.assert_array_equal(ours[key], theirs[key])


def test_the_manifest_names_each_split_s_containers_and_every_file_s_size_and_checksum(both: Path) -> None:
    import crc32c

    manifest = json.loads((both / "manifest.json").read_text())
    assert manifest["version"] == 2 and manifest["parameters"]["formats"] == ["tfrecord", "arrayrecord"]
    for split in manifest["splits"].values():
        assert split["formats"] == ["tfrecord", "arrayrecord"]
        assert split["writer_options"]["arrayrecord"].startswith("group_size:1")
        for shard in split["shards"]:
            (twin,) = shard["twins"]
            assert twin["format"] == "arrayrecord" and twin["name"] == shard["name"].replace(".tfrecord", ".array_record")
            data = (both / twin["name"]).read_bytes()
            assert twin["bytes"] == len(data) and twin["crc32c"] == f"{crc32c.crc32c(data):08x}" and twin["index"] is None
    code, output = _cli("verify", str(both))
    assert code == 0 and output.count("OK      ") == 2 * manifest["totals"]["shards"], output


def test_an_arrayrecord_build_writes_the_same_files_as_a_build_of_both(both: Path, seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "ar"
    shardkit.build([seg_data], out, config=CONFIG, format="arrayrecord", records_per_shard=7, workers=1, progress=False)
    ours = {p.name: p.read_bytes() for p in out.glob("*.array_record")}
    assert ours and ours == {p.name: p.read_bytes() for p in both.glob("*.array_record")}
    assert not list(out.glob("*.tfrecord*"))
    shardkit.preview([out], tmp_path / "sheet.png", count=4)  # records read from the ArrayRecord shards
    assert (tmp_path / "sheet.png").stat().st_size
    with pytest.raises(
        ShardkitError, match=r"holds arrayrecord shards, which tf\.data cannot read: rebuild with --format tfrecord,arrayrecord"
    ):
        shardkit.tfdata.load(str(out), "train")
    info = json.loads((out / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record" and "alternativeFileFormats" not in info
    assert json.loads((both / "dataset_info.json").read_text())["alternativeFileFormats"] == ["array_record"]


def test_tfds_reads_an_arrayrecord_build_with_random_access(both: Path, tmp_path: Path) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    copy = tmp_path / "ar"
    shutil.copytree(both, copy, ignore=shutil.ignore_patterns("*.tfrecord*"))
    info = json.loads((copy / "dataset_info.json").read_text())
    (copy / "dataset_info.json").write_text(json.dumps({**info, "fileFormat": "array_record", "alternativeFileFormats": []}))
    source = tfds.builder_from_directory(str(copy)).as_data_source("train")
    tf_read = _parsed(raw_records(str(both), "train"), spec_from_manifest(str(both)))
    assert len(source) == len(tf_read) == json.loads((both / "manifest.json").read_text())["splits"]["train"]["records"]
    for i in (0, len(tf_read) - 1, len(tf_read) // 2):
        record = source[i]
        np.testing.assert_array_equal(record["image"], _decoded(tf_read[i]["image"]))
        assert record["source_id"] in (tf_read[i]["source_id"], tf_read[i]["source_id"].decode())


def _decoded(data: bytes) -> np.ndarray:
    from tests.tfread import decode

    return decode(data, channels=3)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--format", "riegeli"], "unknown --format 'riegeli' (known: tfrecord, arrayrecord; several with a comma: tfrecord,arrayrecord)"),
        (
            ["--format", "arrayrecord", "--compression", "gzip"],
            "--compression gzip is TFRecord's: ArrayRecord files are read at any record, so they are not gzipped; drop --compression",
        ),
        (
            ["--format", "tfrecord,arrayrecord", "--compression", "gzip"],
            "--compression gzip is TFRecord's: ArrayRecord files are read at any record, so they are not gzipped; drop --compression",
        ),
    ],
)
def test_a_format_option_that_cannot_be_is_one_line_before_any_work(seg_data: Path, tmp_path: Path, args: list[str], said: str) -> None:
    out = tmp_path / "out"
    code, output = _cli("build", str(seg_data), "-o", str(out), "-c", CONFIG, "-q", *args)
    assert code != 0 and said in output and len(output.strip().splitlines()) == 1, output
    assert not out.exists()


def test_resuming_into_an_out_of_another_format_is_refused_and_changes_nothing(both: Path, seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(both, out)
    before = _without_lock(digests(out))
    code, output = _cli("build", str(seg_data), "-o", str(out), "-c", CONFIG, "-q", "--records-per-shard", "7", "--format", "arrayrecord")
    assert code == 1 and output.strip().splitlines() == [
        f"Error: {out}: already holds a different build (tfrecord,arrayrecord shards, not arrayrecord (--format)); "
        "use --overwrite to replace it, or use another output folder"
    ]
    assert _without_lock(digests(out)) == before


def _without_lock(found: dict[str, str]) -> dict[str, str]:
    """Every file's digest but the lock's, which says who holds it (the refused build did, briefly)."""
    return {path: digest for path, digest in found.items() if not path.endswith("/.shardkit/lock")}


def test_verify_names_a_flipped_bit_and_a_truncated_arrayrecord_shard(both: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(both, out)
    flipped, cut = out / "train-00000-of-00004.array_record", out / "train-00001-of-00004.array_record"
    data = bytearray(flipped.read_bytes())
    data[len(data) // 3] ^= 0x10
    flipped.write_bytes(bytes(data))
    cut.write_bytes(cut.read_bytes()[:70_000])
    code, output = _cli("verify", str(out))
    lines = output.splitlines()
    assert code == 1 and lines[-1].endswith("2 FAILED"), output
    assert any(line.startswith(f"FAILED  {flipped}: ") for line in lines)
    assert (
        f"FAILED  {cut}: truncated file: no ArrayRecord footer (70000 bytes, under the 128 KiB of the smallest ArrayRecord file)" in lines
    )


def test_inspect_samples_a_foreign_arrayrecord_file_and_index_skips_it(both: Path, tmp_path: Path) -> None:
    from array_record.python import array_record_module

    foreign = tmp_path / "theirs.array_record"
    writer = array_record_module.ArrayRecordWriter(str(foreign), "group_size:1")
    records = raw_records(str(both), "val")
    for record in records:
        writer.write(record)
    writer.close()
    found = shardkit.inspect([str(foreign)])["files"]
    assert found["records_scanned"] == len(records) and {"image", "mask", "source_id"} <= set(found["features"])
    assert [c["records"] for c in shardkit.count_records([str(foreign)])] == [len(records)]
    code, output = _cli("index", str(foreign))
    assert code == 0 and output == f"SKIPPED {foreign}: an ArrayRecord file carries its own index\n"
    assert not list(tmp_path.glob("*.idx"))


def test_without_the_extra_arrayrecord_is_one_line_naming_it(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "array_record" or m.startswith("array_record.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "array_record", None)  # what an environment without shardkit[arrayrecord] imports
    code, output = _cli("build", str(seg_data), "-o", str(tmp_path / "out"), "-c", CONFIG, "-q", "--format", "arrayrecord")
    assert (
        code == 1 and output == "Error: ArrayRecord needs the array-record package: pip install 'shardkit[arrayrecord]' (Python >= 3.11)\n"
    )
    assert not (tmp_path / "out").exists()


def test_verify_deep_parses_every_arrayrecord_record_against_the_schema(both: Path) -> None:
    report = shardkit.verify([str(both)], deep=True)
    in_arrayrecord = sum(f.records for f in report.files if f.path.endswith(".array_record"))
    assert report.ok and in_arrayrecord * 2 == sum(f.records for f in report.files) > 0


def test_shard_reader_reads_the_arrayrecord_twins_where_the_tfrecord_shards_have_no_index(both: Path, tmp_path: Path) -> None:
    from shardkit.reader import ShardReader

    out = tmp_path / "out"
    shutil.copytree(both, out)
    for index in out.glob("*.idx"):
        index.unlink()
    reader, expected = ShardReader(str(out), "train"), raw_records(str(both), "train")
    assert len(reader) == len(expected)
    for i in (0, len(expected) // 2, len(expected) - 1):
        assert reader.raw(i) == expected[i]
