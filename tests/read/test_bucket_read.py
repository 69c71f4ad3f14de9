"""The read side on buckets: inspect, verify, index, ShardReader and tf.data's manifest side on
gs:// and s3:// outputs, against real local servers (moto's S3 server, fake-gcs-server).

Each test uploads a local build to a fresh bucket and checks that the bucket gives what the local
folder gives: the same counts, the same record bytes (TensorFlow parses them to the same values),
and one clear line for what is damaged or missing.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import shardkit
from shardkit.check.inspection import inspect
from shardkit.check.verify import verify
from shardkit.errors import ShardkitError
from shardkit.formats.containers.idx_sidecar import write_idx_files
from shardkit.output.manifest import Manifest
from shardkit.read import tf_datasets as tfdata
from shardkit.reader import ShardReader
from tests import object_stores
from tests.object_stores import Store
from tests.tfread import read_split, spec_from_manifest

CLI_SECONDS = 120


@pytest.fixture(scope="module")
def local_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local build: 24 train records in 3 shards and 8 val records in 1, with .idx files."""
    from shardkit import demo

    data = demo.make_segmentation(tmp_path_factory.mktemp("bucket-data"), train=24, val=8, width=64, height=48)
    out = tmp_path_factory.mktemp("bucket-local") / "out"
    shardkit.build([data], out, workers=1, records_per_shard=8, progress=False)
    return out


@pytest.fixture()
def remote(store: Store, bucket: str, local_out: Path) -> str:
    return _upload(store, bucket, local_out)


def _upload(store: Store, bucket: str, local_out: Path) -> str:
    """``local_out`` uploaded to ``bucket/out`` (its files; the hidden .shardkit/ is not needed to read)."""
    url = f"{bucket}/out"
    fs = store.fs()
    for item in sorted(local_out.iterdir()):
        if item.is_file():
            fs.put_file(str(item), _key(f"{url}/{item.name}"))
    return url


def _key(url: str) -> str:
    return url.split("://", 1)[1]


def _shards(out: Path, split: str) -> list[str]:
    return sorted(p.name for p in out.glob(f"{split}-*.tfrecord"))


def _cli(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **store.env}
    return subprocess.run([sys.executable, "-m", "shardkit.cli", *args], capture_output=True, text=True, env=env, timeout=CLI_SECONDS)


def test_verify_passes_on_a_bucket_output_as_on_disk(store: Store, remote: str, local_out: Path) -> None:
    report = verify([remote], workers=2)
    local = verify([str(local_out)])
    assert report.ok and local.ok, report.to_dict()
    assert [(os.path.basename(f.path), f.records, f.bytes) for f in report.files] == [
        (os.path.basename(f.path), f.records, f.bytes) for f in local.files
    ]
    assert all(f.path.startswith(remote + "/") for f in report.files)
    assert verify([remote], deep=True).ok

    done = _cli(store, "verify", remote)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"OK      {remote}/train-00000-of-00003.tfrecord (8 records, {_size(local_out, 'train-00000-of-00003.tfrecord')})" in lines
    assert lines[-1].startswith("4 files, 32 records") and lines[-1].endswith("all whole")


def _size(out: Path, name: str) -> str:
    from shardkit.units import size

    return size((out / name).stat().st_size)


def test_verify_fails_on_a_corrupted_object_and_on_a_missing_one(store: Store, remote: str) -> None:
    fs = store.fs()
    shard = f"{remote}/train-00001-of-00003.tfrecord"
    data = bytearray(fs.cat_file(_key(shard)))
    (length,) = struct.unpack("<Q", data[:8])
    data[12 + length + 4 + 12 + 5] ^= 0xFF  # a payload byte of record 1
    fs.pipe_file(_key(shard), bytes(data))
    done = _cli(store, "verify", remote)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert f"FAILED  {shard}: record 1 at byte {12 + length + 4}: data CRC mismatch" in lines
    assert lines[-1].endswith("1 FAILED")

    fs.rm_file(_key(shard))
    done = _cli(store, "verify", remote)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("FAILED")] == [
        f"FAILED  {shard}: listed in the manifest but missing"
    ]
    # A stray TFRecord object and an interrupted build's temporary object are named too.
    fs.pipe_file(_key(f"{remote}/stray-00000-of-00001.tfrecord"), b"")
    fs.pipe_file(_key(f"{remote}/.val-00000-of-00001.tfrecord.incomplete-1234abcd"), b"x")
    problems = verify([remote]).problems
    assert f"{remote}/stray-00000-of-00001.tfrecord: a TFRecord object the manifest does not list" in problems
    assert any(p.startswith(f"{remote}/.val-00000-of-00001.tfrecord.incomplete-1234abcd: temporary object") for p in problems)


def test_a_plain_object_is_checked_against_its_idx(store: Store, remote: str) -> None:
    fs = store.fs()
    shard = f"{remote}/val-00000-of-00001.tfrecord"
    assert verify([shard]).ok  # a plain object, checked with the .idx beside it
    fs.pipe_file(_key(shard + ".idx"), b"0 1\n")
    report = verify([shard])
    assert not report.ok and "does not list the file's records" in (report.files[0].problem or "")


def test_inspect_on_a_bucket_shows_what_local_shows(store: Store, remote: str, local_out: Path) -> None:
    found, local = inspect([remote]), inspect([str(local_out)])
    assert found["outputs"][0]["path"] == remote
    assert {**found["outputs"][0], "path": ""} == {**local["outputs"][0], "path": ""}
    done = _cli(store, "inspect", remote)
    assert done.returncode == 0, done.stderr
    assert "  train       3       24" in done.stdout and "  val         1        8" in done.stdout

    counts = shardkit.count_records([remote])
    assert [(os.path.basename(c["path"]), c["records"], c["bytes"]) for c in counts] == [
        (os.path.basename(c["path"]), c["records"], c["bytes"]) for c in shardkit.count_records([str(local_out)])
    ]
    done = _cli(store, "inspect", "--count", remote)
    assert done.stdout.splitlines()[-1].split() == ["32", "records", "in", "4", "files"]


def test_a_glob_url_names_objects(store: Store, remote: str, local_out: Path) -> None:
    pattern = f"{remote}/train-*.tfrecord"
    report = verify([pattern])
    assert report.ok and [f.path for f in report.files] == [f"{remote}/{n}" for n in _shards(local_out, "train")]
    assert sum(f.records for f in report.files) == 24
    sampled = inspect([pattern], records=None)["files"]
    assert sampled["records_scanned"] == 24 and sampled["kinds"] == {"example": 24}
    assert sampled["features"]["image"]["looks_like"] == ["jpeg"]
    # A prefix without a manifest contributes the TFRecord objects under it.
    fs = store.fs()
    for name in _shards(local_out, "val"):
        fs.copy(_key(f"{remote}/{name}"), _key(f"{remote}-plain/{name}"))
    assert [f.records for f in verify([f"{remote}-plain"]).files] == [8]
    done = _cli(store, "verify", f"{remote}/nothing-*.tfrecord")
    assert done.returncode == 1 and f"FAILED  {remote}/nothing-*.tfrecord: no object matches this pattern" in done.stdout


def test_a_missing_bucket_or_prefix_is_one_line(store: Store, remote: str) -> None:
    missing_bucket = f"{store.scheme}://no-such-bucket-3f2a/out"
    for url, why in ((f"{remote}-nope", ""), (missing_bucket, " (the bucket does not exist, or these credentials cannot see it)")):
        done = _cli(store, "inspect", url)
        assert (done.returncode, done.stderr) == (1, f"Error: {url}: no such object or prefix{why}\n")
        assert verify([url]).problems == [f"{url}: no such object or prefix{why}"]
        assert verify([f"{url}/*.tfrecord"]).problems == [f"{url}/*.tfrecord: no object matches this pattern{why}"]
        with pytest.raises(ShardkitError, match="^" + re.escape(f"{url}/manifest.json: cannot read the manifest: no such object")):
            ShardReader(url)


def test_shard_reader_on_a_bucket_returns_the_local_records(store: Store, remote: str, local_out: Path) -> None:
    import tensorflow as tf

    for split in ("train", "val"):
        local, far = ShardReader(str(local_out), split), ShardReader(remote, split)
        assert len(far) == len(local)
        raw = [far.raw(i) for i in range(len(far))]
        assert raw == [local.raw(i) for i in range(len(local))]
        # TensorFlow is the oracle: the bucket's record bytes parse to what tf.data reads from disk.
        parsed = tf.io.parse_example(tf.constant(raw), spec_from_manifest(str(local_out)))
        expected = read_split(str(local_out), split)
        for i, want in enumerate(expected):
            for key, value in want.items():
                assert np.array_equal(parsed[key][i].numpy(), value), (split, i, key)
        record = far[3]
        assert record["image"] == local[3]["image"] and (record["image/height"], record["image/width"]) == (48, 64)
    decoded = ShardReader(remote, "train", decode_images=True)[-1]
    assert decoded["image"].shape == (48, 64, 3) and decoded["mask"].shape == (48, 64)


def test_shard_reader_on_a_bucket_names_a_missing_index_and_a_stale_one(store: Store, remote: str) -> None:
    fs = store.fs()
    index = f"{remote}/val-00000-of-00001.tfrecord.idx"
    lines = fs.cat_file(_key(index)).decode().splitlines()
    offset, length = lines[-1].split()
    lines[-1] = f"{int(offset) + 10_000} {length}"  # past the object's end
    fs.pipe_file(_key(index), ("\n".join(lines) + "\n").encode())
    reader = ShardReader(remote, "val")
    assert reader.raw(0)
    with pytest.raises(ShardkitError, match="record runs past the end of the file"):
        reader.raw(7)
    fs.rm_file(_key(index))
    missing = f"{remote}/val-00000-of-00001.tfrecord: no index object (run: shardkit index {remote})"
    with pytest.raises(ShardkitError, match=f"^{re.escape(missing)}$"):
        ShardReader(remote, "val")


def test_index_writes_idx_objects_in_a_bucket(store: Store, remote: str, local_out: Path) -> None:
    fs = store.fs()
    names = _shards(local_out, "train") + _shards(local_out, "val")
    for name in names:
        fs.rm_file(_key(f"{remote}/{name}.idx"))
    reports = shardkit.write_idx_files([remote], workers=2)
    assert [(r.index, r.records, r.problem) for r in reports] == [
        (f"{remote}/{n}.idx", 8, None) for n in [*_shards(local_out, "train"), *_shards(local_out, "val")]
    ]
    for name in names:
        assert fs.cat_file(_key(f"{remote}/{name}.idx")) == (local_out / f"{name}.idx").read_bytes()
    assert len(ShardReader(remote, "train")) == 24
    # The CLI's index command, on a glob of objects.
    done = _cli(store, "index", f"{remote}/val-*.tfrecord")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"OK      {remote}/val-00000-of-00001.tfrecord.idx (8 records)"]
    bad = write_idx_files([f"{remote}/missing.tfrecord"])
    assert bad[0].index is None and bad[0].problem == "cannot open: no such object"


def test_tfdata_manifest_side_on_a_bucket(store: Store, remote: str, local_out: Path) -> None:
    manifest = tfdata.read_manifest(remote)
    assert manifest.to_dict() == json.loads((local_out / "manifest.json").read_text())
    assert tfdata.shard_files(remote, manifest, "val") == [f"{remote}/val-00000-of-00001.tfrecord"]
    assert tfdata.feature_spec(manifest).keys() == spec_from_manifest(str(local_out)).keys()
    if store.scheme == "s3":
        with pytest.raises(ShardkitError, match=r"^s3://.*: TensorFlow's tf.data has no s3:// filesystem .*tensorflow-io") as caught:
            tfdata.load(remote)
        assert "\n" not in str(caught.value) and "ShardReader" in str(caught.value)
    else:
        # TensorFlow's gs:// has its endpoint compiled in: the dataset is built from the URLs
        # unchanged (nothing is read until it is iterated, which would go to the real GCS).
        ds = tfdata.load(remote, "val", decode_images=False, batch_size=4)
        assert set(ds.element_spec) == set(manifest_keys(manifest))


def test_snapshot_of_an_s3_source_is_one_line(s3_store: Store, local_out: Path, tmp_path: Path) -> None:
    preprocess = tmp_path / "pre.py"
    preprocess.write_text("def identity(x):\n    return x\n")
    with object_stores.environment(s3_store.env):
        src = _upload(s3_store, s3_store.new_bucket(), local_out)
        with pytest.raises(ShardkitError, match=r"^s3://.*: TensorFlow's tf.data has no s3:// filesystem") as caught:
            shardkit.materialize_snapshot(src, tmp_path / "snap", f"{preprocess}:identity", progress=False)
    assert "\n" not in str(caught.value) and not (tmp_path / "snap").exists()


def manifest_keys(manifest: Manifest) -> list[str]:
    return [f["key"] for f in manifest.schema]


def test_unreadable_urls_for_tensorflow_are_named() -> None:
    assert tfdata.unreadable_url("/data/out", ["", "file", "gs"]) is None
    assert tfdata.unreadable_url("gs://b/out", ["", "file", "gs"]) is None
    assert "tensorflow-io" in (tfdata.unreadable_url("s3://b/out", ["", "file", "gs"]) or "")
    assert tfdata.unreadable_url("az://b/out", ["", "file", "gs"]) == (
        "az://b/out: TensorFlow's tf.data reads local paths and gs://, not az://: "
        "read it with shardkit.reader.ShardReader('az://b/out'), or copy the folder to a local disk"
    )


BLOCK_S3FS = "import sys; sys.modules['s3fs'] = None; from shardkit.cli import run; sys.argv[0] = 'shardkit'; run()"


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_a_filesystem_that_is_not_installed_is_one_line_naming_the_package(command: str) -> None:
    done = subprocess.run([sys.executable, "-c", BLOCK_S3FS, command, "s3://b/out"], capture_output=True, text=True, timeout=CLI_SECONDS)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = "s3:// paths need s3fs: pip install 'shardkit[s3]'"
    if command == "inspect":
        assert done.stderr == f"Error: {line}\n"
    else:
        assert done.stdout.splitlines()[0] == f"FAILED  {line}"
    unknown = subprocess.run([sys.executable, "-m", "shardkit.cli", "inspect", "nosuchfs://x/out"], capture_output=True, text=True,
                             timeout=CLI_SECONDS)  # fmt: skip
    assert unknown.returncode == 1 and unknown.stderr.startswith("Error: nosuchfs://") and unknown.stderr.count("\n") == 1
