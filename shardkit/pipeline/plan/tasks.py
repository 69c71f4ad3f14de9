"""The values that cross process boundaries: a shard task and the settings its build shares.

Both are small frozen dataclasses that pickle to any worker (a local pool, a Dask cluster, another
node): a task carries paths, typed values, the frozen config and a seed, never an open file or a
built augmentation pipeline. What a task returns is the per-shard record, ``output.shard_record``'s
``ShardResult``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from shardkit.formats.containers.adapter import ShardContainer
from shardkit.output.build_state import SplitPlan
from shardkit.output.layout import state_dir
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan.plan_file import PlanSlice
from shardkit.storage import location
from shardkit.storage.boundary import Boundary


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    """What every task of one build shares."""

    out_dir: str
    config: Config
    seed: int
    containers: tuple[ShardContainer, ...]  # what each shard is written as: the primary first
    on_error: str  # "fail" or "skip"
    fingerprint: str
    fsync: bool = True  # flush each shard to stable storage before its rename; off only for scratch disks
    shuffle: bool = True  # records of one entry spread over its shard (the plan already shuffled entries)
    plan: str = ""  # the plan's folder, under OUT/.shardkit
    # The read rule's allowances (``storage.boundary``): this run's, not the plan's, so a rerun with
    # them resumes the build they were missing from (a refused entry is never in a committed shard).
    allow_outside_root: bool = False
    allow_schemes: tuple[str, ...] = ()
    duplicates: str | None = None  # --duplicates report|drop: each shard keeps a hash and digest of each input

    @property
    def plan_dir(self) -> str:
        return location.join(state_dir(self.out_dir), self.plan)

    def read_rule(self, sources: Sequence[PlanSource]) -> Boundary:
        """What a task of this build may read of what ``sources`` name."""
        return Boundary({s.path: s.root for s in sources}, self.allow_schemes, self.allow_outside_root)


@dataclasses.dataclass(frozen=True)
class ShardTask:
    split: str
    index: int
    num_shards: int
    entries: PlanSlice  # this shard's lines of the plan file
    sources: tuple[PlanSource, ...]  # the split's inputs, which the plan lines refer to by position
    settings: BuildSettings

    @property
    def name(self) -> str:
        """The shard's file name in its primary container."""
        return self.settings.containers[0].shard_name(self.split, self.index, self.num_shards)

    def file_names(self) -> list[str]:
        """Every file in OUT this shard is: in each container, the shard and its sidecar."""
        return files_of(self.settings.containers, self.split, self.index, self.num_shards)


def files_of(containers: Sequence[ShardContainer], split: str, index: int, num_shards: int) -> list[str]:
    """The files shard ``index`` of ``split`` is in OUT, in each of ``containers``: shard, then sidecar."""
    names = []
    for container in containers:
        name = container.shard_name(split, index, num_shards)
        sidecar = container.sidecar_name(name)
        names += [name] if sidecar is None else [name, sidecar]
    return names


def tasks_from_plan(splits: Mapping[str, SplitPlan], settings: BuildSettings) -> list[ShardTask]:
    """Every shard task of a plan (the build state's ``splits``), split by split, in shard order."""
    tasks = []
    for name, plan in splits.items():
        sources = tuple(PlanSource.from_dict(s) for s in plan.sources)
        for i, (start, stop, entries) in enumerate(plan.shards):
            tasks.append(ShardTask(name, i, plan.num_shards, PlanSlice(plan.file, start, stop, entries), sources, settings))
    return tasks
