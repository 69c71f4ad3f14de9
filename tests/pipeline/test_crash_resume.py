"""kill -9 at any moment, then resume: exactly the records of an uninterrupted build."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shardkit
from tests.arread import assert_twins, case, shard_bytes
from tests.leftovers import temp_names
from tests.tfread import raw_records


def _shard_records(out: Path) -> int:
    folder = out / ".shardkit" / "shards"
    return len(list(folder.glob("*.json"))) if folder.exists() else 0


def _temp_files(out: Path) -> int:
    return len(list(out.glob(".*incomplete*"))) if out.exists() else 0


def _wait_for_lock_free(out: Path, timeout: float = 30) -> None:
    """Pool workers share the lock's open file: it frees when the last killed process is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(out / ".shardkit" / "lock", "rb") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.01)
    raise AssertionError("the killed build's processes still hold the lock")


# Two of the three moments build both containers (an ArrayRecord file and its TFRecord twin per
# shard): a kill then may fall between the two files of one shard being published.
@pytest.mark.slow
@pytest.mark.parametrize(
    "moment, formats",
    [case("first-write", "tfrecord"), case("some-shards", "tfrecord,arrayrecord"), case("most-shards", "tfrecord,arrayrecord")],
)
def test_kill_9_then_resume_gives_identical_records(
    augmented: Path, tmp_path: Path, moment: str, formats: str, request: pytest.FixtureRequest
) -> None:
    both = "arrayrecord" in formats
    augmented_reference: Path = request.getfixturevalue("augmented_reference_both" if both else "augmented_reference")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "shardkit.cli", "build", str(augmented), "-o", str(out), "-c", str(augmented / "config.yaml"),
               "--records-per-shard", "8", "-w", "2", "--seed", "11", "--format", formats, "-q"]  # fmt: skip
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = {
        "first-write": lambda: _temp_files(out) > 0,
        "some-shards": lambda: _shard_records(out) >= 3,
        "most-shards": lambda: _shard_records(out) >= 18,
    }[moment]
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, f"the build ended before the kill point: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "kill point never reached"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI process and its pool workers, mid-write
    proc.wait(timeout=30)
    _wait_for_lock_free(out)
    assert not (out / "manifest.json").exists()
    committed = _shard_records(out)
    plant_temps(out)

    config = str(augmented / "config.yaml")
    result = shardkit.build([augmented], out, config=config, records_per_shard=8, workers=2, seed=11, progress=False, format=formats)
    assert result.shards_reused >= committed - 1  # a shard renamed but not yet recorded is rebuilt
    assert result.shards_built + result.shards_reused == 25
    for split in ("train", "val"):
        assert raw_records(str(out), split) == raw_records(str(augmented_reference), split)
    reference = shardkit.build(
        [augmented], augmented_reference, config=config, records_per_shard=8, workers=2, seed=11, progress=False, format=formats
    )
    assert result.manifest is not None and reference.manifest is not None and result.manifest.splits == reference.manifest.splits
    assert temp_names(out) == NOT_OURS  # every temp name a build writes is gone, wherever it was; nothing else
    assert shard_bytes(str(out)) == shard_bytes(str(augmented_reference))  # every file of every shard, byte for byte
    if both:
        assert_twins(str(out))  # array_record's reader: the TFRecord records, in their order


# What a kill -9 leaves where each atomic write of a build was cut short (storage.atomic's temp
# names): planted after the kill, so that every kind is there whichever moment the kill met.
KILLED_MID_WRITE = [
    ".train-00003-of-00020.tfrecord.incomplete-0badc0de",
    ".train-00003-of-00020.tfrecord.idx.incomplete-0badc0de",
    ".train-00003-of-00020.tfrecord.records.incomplete-0badc0de",
    ".train-00003-of-00020.array_record.incomplete-0badc0de",
    ".manifest.json.incomplete-0badc0de",
    ".errors.jsonl.incomplete-0badc0de",
    ".dataset_info.json.incomplete-0badc0de",
    ".mask.labels.txt.incomplete-0badc0de",
    ".shardkit/.build.json.incomplete-0badc0de",
    ".shardkit/shards/.test-00001-of-00003.tfrecord.json.incomplete-0badc0de",
    ".shardkit/shards/.train-00003-of-00020.tfrecord.json.incomplete-0badc0de",
]
# Names a build does not write, however alike: a resume must leave them alone.
NOT_OURS = [".notes.txt.incomplete-0badc0de", ".shardkit/shards/.train-00003-of-00020.tfrecord.json.incomplete-mine"]


def plant_temps(out: Path) -> None:
    for name in KILLED_MID_WRITE + NOT_OURS:
        (out / name).parent.mkdir(exist_ok=True)  # before the first shard, no record folder yet
        (out / name).write_bytes(b"half")
