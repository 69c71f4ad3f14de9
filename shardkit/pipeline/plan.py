"""The work plan: entries -> ``ShardTask``s, shard sizes, per-record seeds, all pure functions.

Shard boundaries are a pure function of the entry count, and seeds of the data's identity.
Nothing here touches files; the tasks (``pipeline.tasks``) are plain values any executor runs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from shardkit.pipeline.entries import Entry
from shardkit.pipeline.tasks import BuildSettings, ShardTask

TARGET_SHARD_BYTES = 128 * 1024 * 1024  # middle of the 100-200 MB that tf.data reads well
MAX_DEFAULT_RECORDS_PER_SHARD = 100_000


def shard_bounds(num_entries: int, records_per_shard: int) -> list[tuple[int, int]]:
    """Cut ``num_entries`` into ceil(n / per_shard) ranges whose sizes differ by at most one."""
    if records_per_shard < 1:
        raise ValueError("records_per_shard must be at least 1")
    if num_entries == 0:
        return []
    count = math.ceil(num_entries / records_per_shard)
    base, extra = divmod(num_entries, count)
    bounds = []
    start = 0
    for i in range(count):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def default_entries_per_shard(num_entries: int, bytes_per_entry: float, workers: int, target_bytes: int = TARGET_SHARD_BYTES) -> int:
    """Entries per shard so shards are about ``target_bytes``, and a split has at least as many
    shards as workers (so no core idles) unless it has fewer entries than that."""
    by_size = max(1, int(target_bytes // max(bytes_per_entry, 1.0)))
    by_size = min(by_size, MAX_DEFAULT_RECORDS_PER_SHARD)
    if num_entries == 0:
        return by_size
    by_workers = max(1, math.ceil(num_entries / max(workers, 1)))
    return min(by_size, by_workers)


def plan_split(split: str, entries: Sequence[Entry], entries_per_shard: int, settings: BuildSettings) -> list[ShardTask]:
    bounds = shard_bounds(len(entries), entries_per_shard)
    return [
        ShardTask(split=split, index=i, num_shards=len(bounds), entries=tuple(entries[a:b]), settings=settings)
        for i, (a, b) in enumerate(bounds)
    ]


def record_seed(global_seed: int, identity: str, copy: int) -> int:
    """Seed for one augmented record: from the data's identity, never from the worker or the order."""
    digest = hashlib.blake2b(f"{global_seed}\0{identity}\0{copy}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")
