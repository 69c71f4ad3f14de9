"""What a build returns: ``BuildResult``, its counts and what its features' kinds and the
duplicate search say of the finished output."""

from __future__ import annotations

import dataclasses

from shardkit.features.registry import kind_named
from shardkit.output.manifest import Manifest


@dataclasses.dataclass(frozen=True)
class BuildResult:
    out_dir: str
    manifest: Manifest | None  # None while other nodes' shards are still missing
    shards_built: int
    shards_reused: int
    records: int  # in the whole output (in the finished shards, while incomplete)
    records_built: int  # by this run
    skipped: int
    seconds: float
    shards_missing: int = 0  # other nodes' shards not committed yet

    @property
    def notes(self) -> list[str]:
        """What the features' kinds say of the finished build beyond its counts (objects dropped)."""
        if self.manifest is None:
            return []
        found = [
            note
            for key, entry in self.manifest.config.get("features", {}).items()
            for note in kind_named(entry["kind"]).notes(key, self.manifest)
        ]
        return found + ([self.manifest.duplicates["line"]] if self.manifest.duplicates else [])

    @property
    def records_per_second(self) -> float:
        """Records this run wrote per second of its wall time."""
        return self.records_built / self.seconds if self.seconds else 0.0
