"""The work plan's pure arithmetic: shard sizes and boundaries, shuffle keys, per-record seeds.

Shard boundaries are a pure function of the entry count; the order of entries and of the
records within a shard, and every augmentation seed, are pure functions of ``--seed`` and the
data's identity, never of the worker, the executor or the order work is done in. Nothing here
touches files (``pipeline.planner`` streams the inputs, ``pipeline.plan_files`` stores the plan).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from shardkit.statistics.sketches import splitmix64_finish

TARGET_SHARD_BYTES = 128 * 1024 * 1024  # middle of the 100-200 MB that tf.data reads well
MAX_DEFAULT_RECORDS_PER_SHARD = 100_000
# Small splits are still cut into several shards, so a pool or a cluster has work for every
# core, but never into shards of fewer than MIN_DEFAULT_ENTRIES_PER_SHARD entries. Neither
# number depends on the machine: the same command gives the same shards everywhere.
MIN_DEFAULT_SHARDS = 16
MIN_DEFAULT_ENTRIES_PER_SHARD = 64
KEY_BYTES = 8  # 64-bit shuffle keys: ties are practically impossible, and broken by input position


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


def default_entries_per_shard(num_entries: int, bytes_per_entry: float, target_bytes: int = TARGET_SHARD_BYTES) -> int:
    """Entries per shard so shards are about ``target_bytes`` (at most 100,000 records), and a
    small split still has up to ``MIN_DEFAULT_SHARDS`` shards of at least 64 entries."""
    by_size = max(1, int(target_bytes // max(bytes_per_entry, 1.0)))
    by_size = min(by_size, MAX_DEFAULT_RECORDS_PER_SHARD)
    if num_entries == 0:
        return by_size
    shards = min(MIN_DEFAULT_SHARDS, math.ceil(num_entries / MIN_DEFAULT_ENTRIES_PER_SHARD))
    return min(by_size, max(1, math.ceil(num_entries / shards)))


class ShuffleKeys:
    """Where an entry goes in its split's shuffled order: a hash of the seed, the position of its
    index file among the split's inputs (two files may share a name) and its identity. One
    instance per input file: the hash of that common prefix is computed once, not per entry."""

    def __init__(self, seed: int, source: int) -> None:
        self._prefix = hashlib.blake2b(f"{seed}\0{source}\0".encode(), digest_size=KEY_BYTES, person=b"shuffle")

    def __call__(self, identity: str) -> bytes:
        digest = self._prefix.copy()
        digest.update(identity.encode())
        return digest.digest()


def identity_keys(seed: int, source: int, name: str, rows: np.ndarray) -> np.ndarray:
    """``ShuffleKeys`` of the rows numbered ``rows`` of the input file named ``name`` (identities
    ``NAME:ROW``), as unsigned integers: the keys a row-by-row plan gives them."""
    copy = ShuffleKeys(seed, source)._prefix.copy
    base = f"{name}:".encode()
    digests = bytearray()  # appended in place: no list of a million small bytes
    for n in rows.tolist():  # the loop a million rows pay for: nothing in it but the hash
        digest = copy()
        digest.update(b"%b%d" % (base, n))
        digests += digest.digest()
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def table_keys(seed: int, source: int, rows: np.ndarray) -> np.ndarray:
    """``ShuffleKeys`` for the rows of a table, numbered ``rows``, computed a column at a time:
    SplitMix64 of the row number offset by a hash of the seed and the source's position (a
    bijection, so no two rows of a source tie), as uniform as a hash of each row's identity."""
    prefix = hashlib.blake2b(f"{seed}\0{source}\0".encode(), digest_size=KEY_BYTES, person=b"table").digest()
    x = rows.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(int.from_bytes(prefix, "little"))
    return splitmix64_finish(x)


def record_key(seed: int, identity: str, copy: int) -> bytes:
    """Where one record of an entry (``copy`` -1: the original) goes among its shard's records."""
    return hashlib.blake2b(f"{seed}\0{identity}\0{copy}".encode(), digest_size=KEY_BYTES, person=b"records").digest()


def record_seed(global_seed: int, identity: str, copy: int) -> int:
    """Seed for one augmented record: from the data's identity, never from the worker or the order."""
    digest = hashlib.blake2b(f"{global_seed}\0{identity}\0{copy}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")
