"""A real ``shardkit reshard`` killed with ``kill -9`` mid-run, then run again: the same shard files,
byte for byte, as an uninterrupted reshard writes; while it runs, a second reshard into its OUT is
refused by the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import StateError
from tests.hostile import digests
from tests.pipeline.reshard.foreign import examples, same_multiset, sha256s, split_records, write_tfrecords
from tests.pipeline.test_crash_resume import _shard_records, _wait_for_lock_free

SHARDS = 200  # small shards, each committed with an fsync: a run long enough to stop in the middle
OPTIONS = ["--shards", str(SHARDS), "--seed", "7", "-w", "1", "-q"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reshard-resume") / "in"
    for number in range(3):
        write_tfrecords(folder / f"train-{number:05d}-of-00003.tfrecord", examples(range(number * 10_000, number * 10_000 + 2000)))
    return folder


def _reshard(inputs: Path, out: Path, fsync: bool = True) -> shardkit.ReshardResult:
    return shardkit.reshard([inputs], out, shards=SHARDS, seed=7, workers=1, progress=False, fsync=fsync)


@pytest.mark.slow
def test_kill_9_mid_reshard_then_rerun_gives_the_uninterrupted_shards_and_the_lock_refuses_a_second(inputs: Path, tmp_path: Path) -> None:
    before = digests(inputs)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "shardkit.cli", "reshard", str(inputs), "-o", str(out), *OPTIONS]
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _shard_records(out) < 5:
        assert proc.poll() is None, f"the reshard ended before the kill point: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "kill point never reached"
        time.sleep(0.005)
    with pytest.raises(StateError, match="another build is writing here"):
        _reshard(inputs, out)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the reshard ended before it was killed: kill earlier"
    _wait_for_lock_free(out)
    assert not (out / "manifest.json").exists()
    committed = _shard_records(out)
    assert 5 <= committed < SHARDS

    resumed = _reshard(inputs, out)
    assert resumed.shards_reused >= committed - 1  # a shard renamed but not yet recorded is written again
    assert resumed.shards_written + resumed.shards_reused == SHARDS
    reference = tmp_path / "reference"
    whole = _reshard(inputs, reference, fsync=False)  # fsync changes no byte
    assert whole.shards_written == SHARDS
    assert sha256s(out) == sha256s(reference)  # every shard and .idx, byte for byte
    assert same_multiset(split_records(out, "train"), [r for n in range(3) for r in examples(range(n * 10_000, n * 10_000 + 2000))])
    assert shardkit.verify([str(out)]).ok
    assert not list(out.glob(".*incomplete*")) and not list((out / ".shardkit").rglob("input-*"))
    assert digests(inputs) == before
