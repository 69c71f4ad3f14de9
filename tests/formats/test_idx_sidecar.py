"""NAME.idx files: identical to the tfrecord package's tfrecord2idx, used by its reader, checked by verify."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import shardkit
from shardkit.check.verify import verify
from shardkit.cli import main
from tests.tfread import shard_files

# Only look for the package: importing it here would break TensorFlow in this process.
if importlib.util.find_spec("tfrecord") is None:
    pytest.skip("the tfrecord package is in the test extra", allow_module_level=True)


def run_tfrecord_package(code: str) -> str:
    """The tfrecord package cannot be imported beside TensorFlow (duplicate proto symbols): a subprocess."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture()
def built(seg_data: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shardkit.build([seg_data], out, workers=1, records_per_shard=5, progress=False)
    return out


def test_build_writes_the_same_index_as_tfrecord2idx_and_its_reader_uses_it(built: Path, tmp_path: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    for path in shard_files(str(built), "train") + shard_files(str(built), "val"):
        reference = tmp_path / (Path(path).name + ".ref")
        run_tfrecord_package(f"from tfrecord.tools.tfrecord2idx import create_index; create_index({path!r}, {str(reference)!r})")
        assert Path(path + ".idx").read_bytes() == reference.read_bytes()
    shard = manifest["splits"]["train"]["shards"][0]
    assert shard["index"] == shard["name"] + ".idx"
    path = str(built / shard["name"])
    description = {"image/height": "int", "mask": "byte"}
    counts = run_tfrecord_package(
        "from tfrecord.reader import tfrecord_loader\n"
        f"parts = [list(tfrecord_loader({path!r}, {path + '.idx'!r}, {description!r}, shard=(i, 2))) for i in range(2)]\n"
        "heights = [int(r['image/height'][0]) for p in parts for r in p]\n"
        "print(len(parts[0]), len(parts[1]), heights == [48] * len(heights))\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('torch'):\n"
        "    import torch\n"
        "    from tfrecord.torch.dataset import TFRecordDataset\n"
        f"    ds = TFRecordDataset({path!r}, {path + '.idx'!r}, {description!r})\n"
        "    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2)\n"
        "    print(sum(len(b['image/height']) for b in loader))\n"
        "else:\n"
        "    print(len(parts[0]) + len(parts[1]))\n"
    )
    first, second, heights_ok, via_torch = counts.split()
    assert int(first) + int(second) == shard["records"] and int(first) > 0 and int(second) > 0 and heights_ok == "True"
    assert int(via_torch) == shard["records"]  # its torch TFRecordDataset splits the shard over 2 workers by the index


def test_verify_checks_index_files_and_resume_rebuilds_a_lost_one(built: Path, seg_data: Path) -> None:
    assert verify([str(built)]).ok
    idx = built / "train-00001-of-00005.tfrecord.idx"
    lines = idx.read_text().splitlines()
    idx.write_text("\n".join(lines[:-1]) + "\n")
    (report,) = [f for f in verify([str(built)]).files if f.path.endswith("train-00001-of-00005.tfrecord")]
    assert report.problem == "its index train-00001-of-00005.tfrecord.idx does not list the file's records (shardkit index rewrites it)"
    idx.unlink()
    assert not verify([str(built)]).ok
    again = shardkit.build([seg_data], built, workers=1, records_per_shard=5, progress=False)
    assert again.shards_built == 1 and idx.read_text().splitlines() == lines and verify([str(built)]).ok


def test_index_command_on_foreign_files(tmp_path: Path) -> None:
    import gzip

    from shardkit.formats.containers.tfrecord_io import frame

    plain = tmp_path / "a.tfrecord"
    plain.write_bytes(b"".join(frame(bytes(range(n % 200))) for n in range(50)))
    (tmp_path / "b.tfrecord.gz").write_bytes(gzip.compress(plain.read_bytes()))
    result = CliRunner().invoke(main, ["index", str(plain), str(tmp_path / "b.tfrecord.gz"), "-w", "1"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"OK      {plain}.idx (50 records)",
        f"FAILED  {tmp_path / 'b.tfrecord.gz'}: gzip-compressed: index files need uncompressed TFRecords",
    ]
    reference = tmp_path / "ref.idx"
    run_tfrecord_package(f"from tfrecord.tools.tfrecord2idx import create_index; create_index({str(plain)!r}, {str(reference)!r})")
    assert Path(f"{plain}.idx").read_bytes() == reference.read_bytes()
    assert verify([str(plain)]).ok  # the index beside a plain file is checked too
    os.truncate(f"{plain}.idx", 10)
    assert not verify([str(plain)]).ok


def test_no_index_and_gzip_builds_write_none(seg_data: Path, tmp_path: Path) -> None:
    plain = shardkit.build([seg_data / "val.txt"], tmp_path / "a", workers=1, index=False, progress=False)
    gz = shardkit.build([seg_data / "val.txt"], tmp_path / "b", workers=1, compression="gzip", progress=False)
    assert not list((tmp_path / "a").glob("*.idx")) and not list((tmp_path / "b").glob("*.idx"))
    assert plain.manifest is not None and gz.manifest is not None
    assert {s.index for m in (plain.manifest, gz.manifest) for s in m.splits["val"].shards} == {None}
