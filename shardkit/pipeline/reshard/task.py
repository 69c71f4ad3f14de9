"""A reshard's shard task and the settings its run shares: small frozen values that pickle to any worker.

A task names its split, its place among the split's shards and its run of rows of the split's
plan file; its inputs are the split's input files, which the plan rows name by position.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from shardkit.formats.containers.adapter import ShardContainer
from shardkit.output.build_state import SplitPlan
from shardkit.output.layout import state_dir
from shardkit.pipeline.plan.tasks import files_of
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class ReshardSettings:
    """What every task of one reshard shares."""

    out_dir: str
    containers: tuple[ShardContainer, ...]  # what each shard is written as: the primary first
    fingerprint: str
    plan: str  # the plan's folder, under OUT/.shardkit
    fsync: bool = True
    # The label features an input shardkit OUT counted, with their class names (None: values counted as themselves).
    labels: tuple[tuple[str, tuple[str, ...] | None], ...] = ()

    @property
    def plan_dir(self) -> str:
        return location.join(state_dir(self.out_dir), self.plan)


@dataclasses.dataclass(frozen=True)
class ReshardTask:
    split: str
    index: int
    num_shards: int
    rows: tuple[int, int]  # (first, end) rows of the split's plan file
    plan_file: str  # in the plan folder
    sources: tuple[Mapping[str, Any], ...]  # the split's inputs (``sources.InputFile`` and where it was staged), by position
    settings: ReshardSettings

    @property
    def name(self) -> str:
        """The shard's file name in its primary container."""
        return self.settings.containers[0].shard_name(self.split, self.index, self.num_shards)

    @property
    def records(self) -> int:
        return self.rows[1] - self.rows[0]

    def file_names(self) -> list[str]:
        """Every file in OUT this shard is: in each container, the shard and its sidecar."""
        return files_of(self.settings.containers, self.split, self.index, self.num_shards)


def reshard_tasks(splits: Mapping[str, SplitPlan], settings: ReshardSettings) -> list[ReshardTask]:
    """Every shard task of a reshard's plan, split by split, in shard order."""
    return [
        ReshardTask(name, i, plan.num_shards, (start, end), plan.file, plan.sources, settings)
        for name, plan in splits.items()
        for i, (start, end, _) in enumerate(plan.shards)
    ]
