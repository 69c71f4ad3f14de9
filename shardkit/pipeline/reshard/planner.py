"""A reshard's plan: every input's records found, each split's shards sized and its order drawn.

Every input file is indexed once (``record_index``), files in parallel. Per split the records are
numbered in input order, put in a uniform permutation drawn from the seed and the split's name
(every shard a uniform sample of the whole split, across all inputs; ``shuffle=False`` keeps the
inputs' order), and cut into balanced runs. The plan file of a split, ``SPLIT.plan``, is one NumPy
table of (input, locator, length) in output order, 20 bytes a record; a shard task reads its run
of rows from it. A damaged record stops the plan with its file and byte offset, before anything
is written, or with ``skip`` is left out and listed.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from shardkit.errors import ShardkitError, UsageError
from shardkit.formats.containers import registry
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.output import layout
from shardkit.output.build_state import SkippedEntry, SplitPlan
from shardkit.pipeline.reshard import sizing
from shardkit.pipeline.reshard.options import ReshardOptions
from shardkit.pipeline.reshard.record_index import FileIndex, index_file
from shardkit.pipeline.reshard.sources import InputFile
from shardkit.units import plural

ROW = np.dtype([("input", "<i4"), ("locator", "<i8"), ("length", "<i8")])


def make_plan(
    files: Sequence[InputFile], options: ReshardOptions, plan_dir: str, workers: int, progress: Callable[[int], None]
) -> tuple[dict[str, SplitPlan], list[SkippedEntry]]:
    """Index ``files`` into ``plan_dir`` and write each split's plan file there; (splits, skipped records)."""
    skip = options.on_error == "skip"
    indexes = _index_all(files, plan_dir, skip, workers, progress)
    skipped = [entry for source, index in zip(files, indexes, strict=True) for entry in _left_out(source, index, skip)]
    by_split: dict[str, list[int]] = {}
    for number, source in enumerate(files):
        by_split.setdefault(source.split, []).append(number)
    splits = {}
    for split, numbers in by_split.items():
        plan = _plan_split(split, [files[n] for n in numbers], [indexes[n] for n in numbers], options, plan_dir)
        if plan is not None:
            splits[split] = plan
    if not splits:
        raise UsageError(f"{plural(len(files), 'input file')}, no records in any: nothing to reshard")
    return splits, skipped


def _index_all(files: Sequence[InputFile], plan_dir: str, skip: bool, workers: int, progress: Callable[[int], None]) -> list[FileIndex]:
    jobs = [(number, source, plan_dir, skip) for number, source in enumerate(files)]
    if workers == 1 or len(files) == 1:
        found = []
        for job in jobs:
            found.append(index_file(*job))
            progress(job[1].bytes)
        return found
    pool = quiet_pool(mp.get_context(), min(workers, len(files)))
    try:
        results = [pool.apply_async(index_file, job) for job in jobs]
        found = []
        for job, result in zip(jobs, results, strict=True):
            found.append(result.get())
            progress(job[1].bytes)
        return found
    finally:
        stop_pool(pool)


def _left_out(source: InputFile, index: FileIndex, skip: bool) -> list[SkippedEntry]:
    """The records of ``source`` the plan leaves out (``skip``), or the error that stops it."""
    by_offset = registry.named(source.container).locates_by_offset
    problems = [*index.damaged, *([index.stopped] if index.stopped else [])]
    if not problems:
        return []
    if not skip:
        where, reason = problems[0]
        inflated = " of the inflated stream" if source.compression != "none" else ""
        raise ShardkitError(
            f"{source.path}: {_where(by_offset, where)}{inflated}: {reason}; nothing was written "
            f"(--on-error skip leaves damaged records out and lists them in {layout.ERRORS})"
        )
    left = [SkippedEntry(source.split, source.path, 0, reason, where) for where, reason in index.damaged]
    if index.stopped is not None:
        where, reason = index.stopped
        left.append(SkippedEntry(source.split, source.path, 0, f"{reason}; the rest of the file cannot be read", where))
    return left


def _where(by_offset: bool, where: int) -> str:
    return f"record at byte {where}" if by_offset else f"record {where}"


def _plan_split(split: str, files: list[InputFile], indexes: list[FileIndex], options: ReshardOptions, plan_dir: str) -> SplitPlan | None:
    counts = [len(index.locators) for index in indexes]
    records = sum(counts)
    if records == 0:
        return None
    rows = np.empty(records, ROW)
    rows["input"] = np.repeat(np.arange(len(files), dtype=np.int32), counts)
    rows["locator"] = np.concatenate([index.locators for index in indexes])
    rows["length"] = np.concatenate([index.lengths for index in indexes])
    if options.shuffle:
        rows = rows[np.random.default_rng([options.seed, zlib.crc32(split.encode())]).permutation(records)]
    payload = int(rows["length"].sum())
    count = sizing.shard_count(
        records, payload, shards=options.shards, records_per_shard=options.records_per_shard,
        shard_size=options.shard_size, multiple_of=options.multiple_of,  # type: ignore[arg-type]
    )  # fmt: skip
    name = layout.plan_file(split)
    with open(os.path.join(plan_dir, name), "wb") as f:
        np.save(f, rows, allow_pickle=False)
    sources = tuple({**source.to_dict(), "staged": index.staged} for source, index in zip(files, indexes, strict=True))
    bounds = sizing.balanced(records, count)
    return SplitPlan(
        entries=records,
        entries_per_shard=math.ceil(records / count),
        num_shards=count,
        bytes_per_entry=payload / records,
        file=name,
        sources=sources,
        shards=tuple((start, end, end - start) for start, end in bounds),
    )
