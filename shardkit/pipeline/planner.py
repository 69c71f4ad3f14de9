"""Planning a build: one streaming pass over each split's rows, then its plan file.

Every row is checked against the config (a bad line is reported with its file and line before
any work starts), keyed by a hash of ``--seed`` and its identity, and spooled to disk in
buckets (``pipeline.spool``); the class names and a small sample for the shard size are kept on
the way. Then the buckets are read back one at a time, sorted by key, and written as the split's
plan file with each shard's byte range. Memory is the buckets' buffer and one bucket, whatever
the number of entries; with ``shuffle=False`` the order is the inputs' own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import os
import shutil
from collections.abc import Mapping
from typing import Any

from shardkit.errors import EntryError
from shardkit.pipeline.config import Config
from shardkit.pipeline.entries import checked_rows, to_entry, with_classes
from shardkit.pipeline.index_files import Row
from shardkit.pipeline.inputs import SplitInput
from shardkit.pipeline.plan import KEY_BYTES, ShuffleKeys, default_entries_per_shard
from shardkit.pipeline.plan_files import PlanSource, encode_line, write_plan
from shardkit.pipeline.spool import BUFFER_BYTES, Spool

SAMPLE = 64  # entries whose files are sized to choose the default shard size


@dataclasses.dataclass
class Plan:
    """What the build state records of a plan: per split its entries, shard size and byte
    ranges, the entries skipped while checking, and the class lists collected."""

    splits: dict[str, dict[str, Any]]
    skipped: list[dict[str, Any]]
    config: Config  # with the class lists filled


def make_plan(
    splits: Mapping[str, SplitInput],
    config: Config,
    folder: str,
    *,
    seed: int,
    shuffle: bool,
    records_per_shard: int | None,
    on_error: str,
    durable: bool = True,
    buffer_bytes: int = BUFFER_BYTES,
) -> Plan:
    """Write every split's plan file into ``folder`` (which must exist); scratch space is under it."""
    classes: dict[str, set[str]] = {spec.key: set() for spec in config.features if spec.kind == "class_name" and spec.classes is None}
    skipped: list[dict[str, Any]] = []
    spooled = {}
    for name, split_input in splits.items():
        errors: list[EntryError] = []
        spool = Spool(os.path.join(folder, f"{name}.spool"), shuffle, buffer_bytes)
        spooled[name] = _spool_split(split_input, config, spool, seed, on_error, errors, classes)
        skipped += [{"split": name, "source": e.source, "line": e.line, "reason": e.reason} for e in errors]
    config = with_classes(config, classes)
    plans = {}
    for name, (spool, sources, sample) in spooled.items():
        per_entry = _bytes_per_entry(sample, config)
        per_shard = records_per_shard or default_entries_per_shard(spool.lines, per_entry)
        file = f"{name}.plan"
        shards = write_plan(os.path.join(folder, file), spool.buckets(), spool.lines, per_shard, durable)
        shutil.rmtree(spool.folder, ignore_errors=True)
        plans[name] = {
            "entries": spool.lines,
            "entries_per_shard": per_shard,
            "num_shards": len(shards),
            "bytes_per_entry": round(per_entry, 1),
            "file": file,
            "sources": [s.to_dict() for s in sources],
            "shards": shards,
        }
    return Plan(plans, skipped, config)


def _spool_split(
    split_input: SplitInput,
    config: Config,
    spool: Spool,
    seed: int,
    on_error: str,
    errors: list[EntryError],
    classes: dict[str, set[str]],
) -> tuple[Spool, list[PlanSource], list[tuple[int, tuple[Any, ...]]]]:
    sources = list(split_input.sources)
    position = {s.path: i for i, s in enumerate(sources)}
    sample: list[tuple[int, int, int, Row]] = []  # the SAMPLE smallest keys, as (-key, tiebreak, source, row)
    keys = [ShuffleKeys(seed, i) for i in range(len(sources))]
    for row in checked_rows(split_input.rows, config, on_error, errors, classes):
        source = position[row.source]
        key = keys[source](row.identity)
        if spool.sort:
            spool.add(encode_line(key, source, row), key[0])
        else:
            spool.add(encode_line(spool.lines.to_bytes(KEY_BYTES, "big"), source, row), 0)
        if row.names is not None and row.text is None and sources[source].names is None:
            sources[source] = dataclasses.replace(sources[source], names=row.names)  # a csv header
        rank = -int.from_bytes(key, "big")
        if len(sample) < SAMPLE:
            heapq.heappush(sample, (rank, spool.lines, source, row))
        elif rank > sample[0][0]:
            heapq.heapreplace(sample, (rank, spool.lines, source, row))
    return spool, sources, [(source, to_entry(row, config, sources[source].folder).values) for _, _, source, row in sample]


def _bytes_per_entry(sample: list[tuple[int, tuple[Any, ...]]], config: Config) -> float:
    """Output bytes per entry, from the input file sizes of a uniform sample of the entries."""
    if not sample:
        return 1.0
    file_columns = [i for i, f in enumerate(config.features) if f.kind in ("image", "mask", "bytes")]
    sizes = []
    for _, values in sample:
        total = 0
        for i in file_columns:
            with contextlib.suppress(OSError):
                total += os.path.getsize(values[i])
        sizes.append(total + 64)
    return (sum(sizes) / len(sizes)) * config.records_per_entry
