"""The one line for a pool worker that died without a word: how it ended (a crash in native code,
the kernel's OOM killer), the shard it was building and which entries of which inputs that shard
holds, and what to do about it. Read on the error path only: the shard's plan lines, not its files."""

from __future__ import annotations

import signal
from typing import Any

from shardkit.pipeline.plan.plan_file import shard_lines
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.reshard.task import ReshardTask
from shardkit.storage import location

_CRASHES = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL}
_NAMED = 3  # inputs a message names; the rest are counted


def message(pid: int, process: Any, task: ShardTask | ReshardTask | None) -> str:
    """``process`` (a pool's ``Process``, dead) ran ``task``, where it is known."""
    process.join(1)  # the pool's own thread may have reaped it: the status is kept either way
    where = "" if task is None else f" while building shard {task.name} ({_entries(task)})"
    return (
        f"a build worker process (pid {pid}) {_how(process.exitcode)}{where}. Finished shards are kept: "
        "where an entry crashed a native library (a decoder, pycocotools), fix or remove it (--on-error skip "
        "cannot: the process is gone); where memory ran out, use fewer --workers; then rerun the same command to resume."
    )


def _how(code: int | None) -> str:
    if code is None or code >= 0:
        return "died without reporting an error" + ("" if code is None else f" (exit status {code})")
    try:
        name = signal.Signals(-code)
    except ValueError:
        return f"died of signal {-code} without reporting an error"
    if name == signal.SIGKILL:
        return "was killed (SIGKILL), most often by the kernel for using too much memory (see `dmesg`),"
    if name in _CRASHES:
        return f"died of {name.name}, a crash in native code,"
    return f"died of {name.name} without reporting an error"


def _entries(task: ShardTask | ReshardTask) -> str:
    """``12 entries: a.json lines 3 to 90`` for the shard's plan lines, by input."""
    if isinstance(task, ReshardTask):
        return f"{task.records} records of {len(task.sources)} input files"
    lines: dict[int, list[int]] = {}
    try:
        for block in shard_lines(location.join(task.settings.plan_dir, task.entries.file), task.entries):
            for line in block:
                _, source, number, _ = line.split(b"\t", 3)
                lines.setdefault(int(source), []).append(int(number))
    except (OSError, ValueError, IndexError):  # the plan itself gone or odd: its count will do
        return f"{task.entries.entries} entries"
    named = sorted(lines.items())[:_NAMED]
    parts = [f"{_source(task, s)} lines {min(n)} to {max(n)}" if len(n) > 1 else f"{_source(task, s)} line {n[0]}" for s, n in named]
    if len(lines) > _NAMED:
        parts.append(f"{len(lines) - _NAMED} more inputs")
    return f"{task.entries.entries} entries: " + "; ".join(parts)


def _source(task: ShardTask, position: int) -> str:
    return task.sources[position].path if 0 <= position < len(task.sources) else f"input {position}"
