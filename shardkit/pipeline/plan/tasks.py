"""The values that cross process boundaries: a shard task, the settings its build shares, and its result.

All are small frozen dataclasses that pickle to any worker (a local pool, a Dask cluster, another
node): a task carries paths, typed values, the frozen config and a seed, never an open file or a
built augmentation pipeline. A ``ShardResult`` is also what the per-shard record on disk holds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan.plan_file import PlanSlice
from shardkit.storage import location
from shardkit.storage.layout import shard_name, state_dir


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    """What every task of one build shares."""

    out_dir: str
    config: Config
    seed: int
    compression: str | None  # None or "gzip"
    on_error: str  # "fail" or "skip"
    fingerprint: str
    fsync: bool = True  # flush each shard to stable storage before its rename; off only for scratch disks
    index: bool = True  # write NAME.idx (offset and length per record) beside uncompressed shards
    shuffle: bool = True  # records of one entry spread over its shard (the plan already shuffled entries)
    plan: str = ""  # the plan's folder, under OUT/.shardkit

    @property
    def plan_dir(self) -> str:
        return location.join(state_dir(self.out_dir), self.plan)


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
        return shard_name(self.split, self.index, self.num_shards, self.settings.compression)


@dataclasses.dataclass(frozen=True)
class ShardResult:
    """What one finished shard holds: the per-shard record, also saved beside the build state."""

    name: str
    split: str
    index: int
    num_shards: int
    records: int
    bytes: int
    crc32c: str
    entries: int
    covers: tuple[tuple[str, int, int], ...]  # (index file, first line, last line) runs
    skipped: tuple[tuple[str, int, str], ...]  # (index file, line, reason)
    lengths: dict[str, tuple[int, int]]  # feature key -> (min, max) list length seen
    sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]]  # image key -> (min h, max h, min w, max w, channels)
    fingerprint: str
    seconds: float
    index_file: str | None = None  # NAME.idx beside the shard, when written
    labels: dict[str, dict[str, int] | None] = dataclasses.field(default_factory=dict)  # label key -> value -> records

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ShardResult:
        fields = dict(raw)
        fields["covers"] = tuple(tuple(c) for c in fields["covers"])
        fields["skipped"] = tuple(tuple(s) for s in fields["skipped"])
        fields["lengths"] = {k: tuple(v) for k, v in fields["lengths"].items()}
        fields["sizes"] = {k: (v[0], v[1], v[2], v[3], tuple(v[4])) for k, v in fields["sizes"].items()}
        fields.setdefault("labels", {})
        return cls(**fields)


def tasks_from_plan(splits: dict[str, Any], settings: BuildSettings) -> list[ShardTask]:
    """Every shard task of a plan (the build state's ``splits``), split by split, in shard order."""
    tasks = []
    for name, plan in splits.items():
        sources = tuple(PlanSource.from_dict(s) for s in plan["sources"])
        for i, (start, stop, entries) in enumerate(plan["shards"]):
            tasks.append(ShardTask(name, i, plan["num_shards"], PlanSlice(plan["file"], start, stop, entries), sources, settings))
    return tasks
