"""A pool worker that dies without a word (a crash in native code, the OOM killer's SIGKILL) is
one line naming how it ended, the shard it was building and that shard's entries by input."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import WorkerError
from shardkit.executors import PoolExecutor
from shardkit.pipeline.executors import local_executors


def _segfault(*args: Any, **kwargs: Any) -> Any:
    ctypes.string_at(0)  # a real SIGSEGV, as a native library's bad read gives


def _killed(*args: Any, **kwargs: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize(
    ("death", "how"),
    [
        (_segfault, "died of SIGSEGV, a crash in native code, while building shard "),
        (_killed, "was killed (SIGKILL), most often by the kernel"),
    ],
)
def test_a_worker_that_dies_is_named_with_its_shard_and_entries(
    death: Any, how: str, seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for route in ("run_task", "write"):  # a pool worker's two routes (committing at once, or while writing the next)
        monkeypatch.setattr(local_executors, route, death)  # inherited by forked workers
    with pytest.raises(WorkerError) as caught:
        shardkit.build([seg_data / "val.txt"], tmp_path / "out", executor=PoolExecutor(2, "fork"), workers=2,
                       records_per_shard=4, progress=False)  # fmt: skip
    message = str(caught.value)
    assert how in message, message
    assert "shard val-0000" in message and f"4 entries: {seg_data / 'val.txt'} lines " in message, message
    assert message.endswith("then rerun the same command to resume.")
