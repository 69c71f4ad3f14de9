"""What an executor runs: a build's shard task or a reshard's, each by the worker that writes it.

The executors take either kind of task and ask this module to write, run and weigh it, so one
pool, one Dask executor and one commit path serve both commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.reshard.copier import copy_shard
from shardkit.pipeline.reshard.task import ReshardTask
from shardkit.pipeline.shard.shard_files import WrittenShard
from shardkit.pipeline.shard.worker import write_shard

Job: TypeAlias = ShardTask | ReshardTask
Progress = Callable[[int], None]
Stop = Callable[[], None]


def write(
    task: Job, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None, sync: bool = True
) -> WrittenShard:
    """The task's shard whole in local temp files, and its record; nothing committed. Without
    ``sync`` the files are flushed to stable storage by the commit, not before it returns."""
    if isinstance(task, ReshardTask):
        return copy_shard(task, progress, tick_every, stop, sync)
    return write_shard(task, progress, tick_every, stop, sync)


def run_task(task: Job, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None) -> ShardResult:
    """Write the task's shard and commit it: renamed into place (or uploaded), then its record."""
    written = write(task, progress, tick_every, stop)
    written.commit()
    return written.result


def augments(task: Job) -> bool:
    """Whether the task runs augmentation (which needs native thread pools set up in the worker)."""
    return isinstance(task, ShardTask) and task.settings.config.augment is not None


def weight(task: Job) -> int:
    """How much work the task is, for a scheduler's priorities: entries or records."""
    return task.records if isinstance(task, ReshardTask) else task.entries.entries
