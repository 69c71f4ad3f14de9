"""Planning a build: one streaming pass over each split's rows, then its plan file.

Every row is checked against the config (a bad line is reported with its file and line before
any work starts), keyed by a hash of ``--seed`` and its identity, and spooled to disk in
buckets (``pipeline.spool``); the class names and a small sample for the shard size are kept on
the way. Then the buckets are read back one at a time, sorted by key, and written as the split's
plan file with each shard's byte range. Memory is the buckets' buffer and one bucket, whatever
the number of entries; with ``shuffle=False`` the order is the inputs' own.

Large ``.txt`` and ``.jsonl`` index files are cut into pieces at line ends and planned by
``processes`` processes side by side, each into its own spool; the spools are then read back as
one. Sorting by key makes the plan the same however the work was cut.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import multiprocessing
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardkit.errors import EntryError
from shardkit.features.base import FeatureSpec
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.output import layout
from shardkit.output.build_state import SkippedEntry, SplitPlan
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.entries import Entry, checked_rows, to_entry
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.inputs.splits import SplitInput
from shardkit.pipeline.plan.arithmetic import ShuffleKeys, default_entries_per_shard
from shardkit.pipeline.plan.plan_file import encode_line, write_plan
from shardkit.pipeline.plan.spool import BUFFER_BYTES, Spool, merged
from shardkit.pipeline.plan.table_rows import TablesPlanned, plan_tables
from shardkit.storage import location
from shardkit.storage.boundary import Boundary

SAMPLE = 64  # entries whose files are sized to choose the default shard size
TICK = 1 << 16  # entries between progress reports

Progress = Callable[[int], None]  # called with how many more entries were planned
PARALLEL_BYTES = 8 * 1024 * 1024  # index files smaller than this are planned in this process
PIECE_BYTES = (4 * 1024 * 1024, 16 * 1024 * 1024)  # the smallest and largest piece


@dataclasses.dataclass
class Plan:
    """What the build state records of a plan: per split its entries, shard size and byte
    ranges, the entries skipped while checking, and the class lists collected."""

    splits: dict[str, SplitPlan]
    skipped: list[SkippedEntry]
    config: Config  # with the class lists filled


@dataclasses.dataclass
class _Spooled:
    """What a pass over a split's rows (or a piece of them) leaves: the spool, and what was seen."""

    spool: Spool
    sources: list[PlanSource]  # with csv headers filled in
    sample: list[tuple[int, tuple[int, int], int, Row]]  # the SAMPLE smallest keys: (-key, tiebreak, source, row)
    classes: dict[str, set[str]]
    errors: list[EntryError]
    fatal: EntryError | None = None  # with on_error "fail", the bad row that stopped a piece


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
    processes: int = 1,
    progress: Progress | None = None,
    stage_rows: bool = False,
) -> Plan:
    """Write every split's plan file into ``folder`` (which must exist); scratch space is under it.
    ``stage_rows``: a table whose rows carry files has its mapped columns staged beside its plan
    file for the shards to take rows from (``plan.staged_rows``)."""
    files = any(spec.kind.reads_file for spec in config.features)
    classes = config.open_classes()
    skipped: list[SkippedEntry] = []
    plans = {}
    for name, split_input in splits.items():  # one split at a time: memory is one split's spools
        scratch = os.path.join(folder, f"{name}.spool")
        size = sum(n or 0 for n in location.sizes_of([f.path for f in split_input.files]).values())  # a store's concurrently
        staged = (files and shuffle) or any(s.format.stages_rows for s in split_input.sources)
        stage = os.path.join(folder, layout.staged_rows(layout.plan_file(name))) if stage_rows and staged else None
        if processes > 1 and size > PARALLEL_BYTES:
            parts = _spool_pieces(split_input, config, scratch, seed, shuffle, on_error, buffer_bytes, processes, size, progress, stage)
        elif split_input.files and all(s.format.reads_tables for s in split_input.sources):
            spool = Spool(scratch, shuffle, buffer_bytes)
            pieces = [f.piece or Piece(f.path) for f in split_input.files]
            parts = [_fill_tables(pieces, list(split_input.sources), config, spool, seed, on_error, 0, progress, stage)]
        else:
            spool = Spool(scratch, shuffle, buffer_bytes)
            parts = [_fill(split_input.rows, list(split_input.sources), config, spool, seed, on_error, 0, progress)]
        sources = list(split_input.sources)
        for part in parts:
            for key, names in part.classes.items():
                classes[key] |= names
            skipped += [SkippedEntry(name, e.source, e.line, e.reason) for e in part.errors]
            sources = [s if s.names else p for s, p in zip(sources, part.sources, strict=True)]
        entries = sum(part.spool.lines for part in parts)
        sample = heapq.nlargest(SAMPLE, (s for part in parts for s in part.sample), key=lambda s: (s[0], s[1]))
        # Sizes need paths only: the class lists, still growing, are not needed yet.
        # Sized as the read rule allows without its flags: the plan is the same with them or without.
        rule = Boundary({s.path: s.root for s in sources})
        per_entry = _bytes_per_entry([to_entry(row, config, sources[source].folder) for _, _, source, row in sample], config, rule)
        per_shard = records_per_shard or default_entries_per_shard(entries, per_entry)
        file = layout.plan_file(name)
        shards = write_plan(os.path.join(folder, file), merged([part.spool for part in parts]), entries, per_shard, durable)
        shutil.rmtree(scratch, ignore_errors=True)
        plans[name] = SplitPlan(
            entries,
            per_shard,
            len(shards),
            round(per_entry, 1),
            file,
            tuple(s.to_dict() for s in sources),
            tuple((a, b, n) for a, b, n in shards),
        )
    config = config.with_classes(classes)
    return Plan(plans, skipped, config)


def _fill(
    rows: Iterable[Row | EntryError],
    sources: list[PlanSource],
    config: Config,
    spool: Spool,
    seed: int,
    on_error: str,
    part: int,
    progress: Progress | None = None,
    into: TablesPlanned | None = None,
    checked: set[str] | None = None,
) -> _Spooled:
    """Check, key and spool ``rows``; ``part`` tells this pass's sample apart from other pieces'.
    ``into``: what a table's pieces found so far, which these rows add to (``plan_tables``);
    ``checked``: the files whose first row was checked already (``checked_rows``)."""
    found = into if into is not None else TablesPlanned([], config.open_classes(), [], {})
    classes, errors, sample = found.classes, found.errors, found.sample
    position = {s.path: i for i, s in enumerate(sources)}
    keys = [ShuffleKeys(seed, i) for i in range(len(sources))]
    payloads = [s.format.plan_payload for s in sources]  # looked up once, not once a row
    trims = [spec for spec in config.features if spec.kind.trims_plan(spec)]
    unnamed = {i for i, s in enumerate(sources) if s.format.keeps_names and s.names is None}  # a csv header, still to record
    count = 0
    for row in checked_rows(rows, config, on_error, errors, classes, checked):
        if trims:
            row = _trimmed(row, trims, config.columns)
        source = position[row.source]
        key = keys[source](row.identity)
        spool.add(encode_line(key, source, row, payloads[source](row)), key[0])  # unsorted spools keep the order they are given
        count += 1
        if unnamed and source in unnamed:
            sources[source] = dataclasses.replace(sources[source], names=row.names)
            unnamed.discard(source)
        rank = -int.from_bytes(key, "big")
        if len(sample) < SAMPLE:
            heapq.heappush(sample, (rank, (part, spool.lines), source, row))
        elif rank > sample[0][0]:
            heapq.heapreplace(sample, (rank, (part, spool.lines), source, row))
        if progress is not None and not count % TICK:
            progress(TICK)
    if progress is not None:
        progress(count % TICK)
    return _Spooled(spool, sources, sample, classes, errors)


def _fill_tables(
    pieces: list[Piece],
    sources: list[PlanSource],
    config: Config,
    spool: Spool,
    seed: int,
    on_error: str,
    part: int,
    progress: Progress | None = None,
    stage: str | None = None,
) -> _Spooled:
    """``_fill`` for pieces of tables: a column batch at a time (``plan.table_rows``); a block
    read row by row is planned as ``_fill`` plans rows, into what the batches found."""

    def by_rows(rows: Iterable[Row | EntryError], found: TablesPlanned, checked: set[str]) -> None:
        _fill(rows, list(sources), config, spool, seed, on_error, part, progress, found, checked)

    found = plan_tables(pieces, sources, config, spool, seed, on_error, part, SAMPLE, progress, stage, by_rows)
    sources = [dataclasses.replace(s, names=found.names[i]) if i in found.names else s for i, s in enumerate(sources)]
    return _Spooled(spool, sources, found.sample, found.classes, found.errors)


def _trimmed(row: Row, trims: list[FeatureSpec], columns: tuple[str, ...] | None) -> Row:
    """``row`` with the values of ``trims`` as their kinds keep them in the plan (a boxes-only
    build's COCO rows without their polygons: 3.3 kB a row at train2017's density, never read)."""
    values = list(row.values)
    names = row.names or columns or ()
    for spec in trims:
        i = spec.column if isinstance(spec.column, int) else list(names).index(spec.column)
        values[i] = spec.kind.plan_value(spec, values[i])
    return dataclasses.replace(row, values=tuple(values))


def _spool_pieces(
    split_input: SplitInput,
    config: Config,
    scratch: str,
    seed: int,
    shuffle: bool,
    on_error: str,
    buffer_bytes: int,
    processes: int,
    size: int,
    progress: Progress | None,
    stage: str | None = None,
) -> list[_Spooled]:
    """Plan the split's index files in pieces on a pool; the first bad row (in file order) stops it."""
    smallest, largest = PIECE_BYTES
    piece_bytes = min(largest, max(smallest, size // (processes * 4)))
    pieces = [piece for f in split_input.files for piece in f.pieces(piece_bytes)]
    jobs = [
        (piece, list(split_input.sources), config, os.path.join(scratch, f"piece-{i:05d}"), seed, shuffle, on_error, buffer_bytes, i, stage)
        for i, piece in enumerate(pieces)
    ]
    pool = quiet_pool(multiprocessing.get_context(), min(processes, len(jobs)))
    parts: list[_Spooled] = []
    try:
        for part in pool.imap(_plan_job, jobs, chunksize=1):  # in piece order, as they finish
            parts.append(part)
            if progress is not None:
                progress(part.spool.lines)
    finally:
        stop_pool(pool)
    for part in parts:
        if part.fatal is not None:
            raise part.fatal
    return parts


def _plan_job(job: tuple[Any, ...]) -> _Spooled:
    return _plan_piece(*job)


def _plan_piece(
    piece: Piece,
    sources: list[PlanSource],
    config: Config,
    folder: str,
    seed: int,
    shuffle: bool,
    on_error: str,
    buffer_bytes: int,
    part: int,
    stage: str | None = None,
) -> _Spooled:
    """In a pool process: one piece into its own spool, spilled whole for the parent to read."""
    spool = Spool(folder, shuffle, buffer_bytes)
    source = next(s for s in sources if s.path == piece.path)  # the piece's file, read by its format
    try:
        if source.format.reads_tables:
            result = _fill_tables([piece], sources, config, spool, seed, on_error, part, stage=stage)
        else:
            result = _fill(source.format.read_rows(piece), sources, config, spool, seed, on_error, part)
    except EntryError as exc:  # reported by the parent only if no earlier piece has a bad row too
        return _Spooled(Spool(folder, shuffle), sources, [], {}, [], exc)  # not the lines spooled so far
    spool.spill()
    return result


def _bytes_per_entry(entries: list[Entry], config: Config, rule: Boundary) -> float:
    """Output bytes per entry, from the input file sizes of a uniform sample of the entries; a file
    the read rule refuses is not asked for its size (an HTTP URL's HEAD would reach its server)."""
    if not entries:
        return 1.0
    file_columns = [i for i, f in enumerate(config.features) if f.kind.reads_file]
    files: list[list[str | bytes]] = [
        [v for i in file_columns if isinstance(v := e.values[i], bytes) or rule.refusal(v, e.source) is None] for e in entries
    ]
    remote = location.sizes_of([v for found in files for v in found if isinstance(v, str) and location.is_url(v)])
    sizes = []
    for found in files:
        total = 0
        for value in found:
            if isinstance(value, bytes):  # a file's bytes held in the input (a table)
                total += len(value)
            elif value in remote:
                total += remote[value] or 0
            else:
                with contextlib.suppress(OSError):
                    total += os.path.getsize(value)
        sizes.append(total + 64)
    return (sum(sizes) / len(sizes)) * config.records_per_entry
