"""Write one ShardTask's shard: read its plan lines -> records -> its files, whole in temp files (``shard_files`` commits them).

A worker never imports TensorFlow. It reports progress through a callback (ticks of records
written) and returns one ``ShardResult``; the parent owns the progress bar and the manifest.
When an entry gives several records (augmented copies) and the build shuffles, the records go
to a scratch file first and are written in an order drawn from the seed and their identities,
so one input's records do not sit side by side; memory stays one entry's records.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from shardkit.errors import EntryError, cut
from shardkit.formats import image_headers
from shardkit.output import layout
from shardkit.pipeline.inputs.entries import Entry
from shardkit.pipeline.plan.arithmetic import record_key
from shardkit.pipeline.plan.plan_file import read_entries
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.shard.batches import BatchMaker
from shardkit.pipeline.shard.batches import applies as batched
from shardkit.pipeline.shard.fingerprints import Fingerprints, dropped_inputs
from shardkit.pipeline.shard.records import RecordMaker
from shardkit.pipeline.shard.shard_files import ShardWriters, WrittenShard, shard_result
from shardkit.storage import atomic, location

Progress = Callable[[int], None]
Stop = Callable[[], None]  # called between records: raises to stop the shard (its temp files go)


def _covers(entries: list[tuple[str, int]]) -> tuple[tuple[str, int, int], ...]:
    runs: list[list[Any]] = []
    for source, line in entries:
        if runs and runs[-1][0] == source and (runs[-1][2] < line or line == runs[-1][2] == 0):  # 0: no line (a folder's image)
            runs[-1][2] = line
        else:
            runs.append([source, line, line])
    return tuple((s, a, b) for s, a, b in runs)


class _Spread:
    """Records of a shard, spread: kept in a scratch file with a key each, written out by key."""

    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.seed = seed
        self.keys: list[tuple[bytes, int, int]] = []
        self.offset = 0
        self.file = open(path, "w+b")  # noqa: SIM115 (closed by close(), after write_to)

    def add(self, entry: Entry, copies: list[int], records: list[bytes]) -> None:
        for copy, record in zip(copies, records, strict=True):
            self.file.write(record)
            self.keys.append((record_key(self.seed, entry.identity, copy), self.offset, len(record)))
            self.offset += len(record)

    def write_to(self, writer: ShardWriters) -> None:
        self.file.flush()
        self.keys.sort()
        fd = self.file.fileno()
        for _, offset, length in self.keys:
            writer.write(os.pread(fd, length, offset))

    def close(self) -> None:
        """Discard the scratch file. Closing flushes its buffer, which fails on a full disk: that
        loses nothing (the file is deleted) and must not hide the error that stopped the shard."""
        with contextlib.suppress(OSError):
            self.file.close()
        atomic.remove_quietly(self.path)


def write_shard(
    task: ShardTask, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None, sync: bool = True
) -> WrittenShard:
    """Encode one shard's records into a local temp file (flushed to disk when the build fsyncs, or
    by its commit where ``sync`` is False); commit nothing."""
    started = time.perf_counter()
    settings = task.settings
    final = location.join(settings.out_dir, task.name)
    tag = uuid.uuid4().hex[:8]
    rule = settings.read_rule(task.sources)
    dropped = dropped_inputs(task)  # --duplicates drop: left out record by record
    batched_here = batched(settings.config, task.sources) and settings.duplicates != "drop"
    batches = BatchMaker(settings.config, task.sources, settings.on_error, rule) if batched_here else None
    maker = RecordMaker(settings.config, settings.seed, rule) if batches is None else None
    if settings.duplicates == "report":
        (batches or maker).fingerprints = Fingerprints(settings.config)  # type: ignore[union-attr]
    tally = _Tally(progress, tick_every, keeps_inputs=not settings.shuffle, stop=stop)
    spread = None
    try:
        if location.is_url(settings.out_dir):  # a local staging folder, also on a Dask worker that never planned
            layout.make_work_dir(settings.out_dir)
        if settings.shuffle and maker is not None and len(maker.copies) > 1:
            with atomic.naming(final):
                spread = _Spread(layout.spread_temp_path(settings.out_dir, task.name, tag), settings.seed)
        writers = ShardWriters(task, tag)
        try:
            if batches is not None:
                for block in batches.blocks(settings.plan_dir, task.entries):
                    writers.write_batch(block.encoded)
                    tally.add(block.records, block.inputs, block.skipped)
            else:
                _write_records(task, maker, writers, spread, tally, dropped)  # type: ignore[arg-type]
            flush = settings.fsync and not location.is_url(settings.out_dir)  # a staged file is uploaded, not kept
            files = writers.close(sync=flush and sync)
        except BaseException:
            writers.abandon()
            raise
    finally:
        if spread is not None:
            spread.close()
    tally.flush()
    stats = batches.stats if batches is not None else maker.stats  # type: ignore[union-attr]
    result = shard_result(
        task,
        files,
        started,
        entries=task.entries.entries - len(tally.skipped) - tally.dropped,
        covers=_covers(tally.inputs),  # shuffled shards hold scattered lines: each record's source_id names its input
        skipped=tuple(tally.skipped),
        lengths=stats.lengths,
        sizes=stats.sizes,
        labels=stats.labels,
        statistics=stats.statistics.to_data(),
        duplicates=_fingerprints(settings.duplicates, batches or maker, tally.dropped),  # type: ignore[arg-type]
    )
    return WrittenShard(task, result, files, flushed=sync or not flush)


def _fingerprints(mode: str | None, maker: RecordMaker | BatchMaker, dropped: int) -> dict[str, Any] | None:
    """What the shard's record keeps for ``--duplicates``: its rows (report) or how many it left out (drop)."""
    if mode == "drop":
        return {"dropped": dropped}
    return None if maker.fingerprints is None else maker.fingerprints.to_data()


class _Tally:
    """What a shard's record keeps of the entries written so far, and the progress ticks."""

    def __init__(self, progress: Progress | None, tick_every: float, keeps_inputs: bool, stop: Stop | None = None) -> None:
        self.progress = progress
        self.stop = stop
        self.tick_every = tick_every
        self.keeps_inputs = keeps_inputs  # unshuffled: which input lines the shard covers
        self.inputs: list[tuple[str, int]] = []
        self.skipped: list[tuple[str, int, str]] = []
        self.dropped = 0  # inputs --duplicates drop left out
        self.pending = 0
        self.last_tick = time.monotonic()

    def add(self, records: int, inputs: list[tuple[str, int]], skipped: list[tuple[str, int, str]]) -> None:
        if self.stop is not None:
            self.stop()
        if self.keeps_inputs:
            self.inputs += inputs
        self.skipped += [(source, line, cut(reason)) for source, line, reason in skipped]  # the shard's record keeps them
        self.pending += records
        if self.progress is not None and time.monotonic() - self.last_tick >= self.tick_every:
            self.flush()

    def flush(self) -> None:
        if self.progress is not None and self.pending:
            self.progress(self.pending)
        self.pending, self.last_tick = 0, time.monotonic()


def _write_records(
    task: ShardTask, maker: RecordMaker, writer: ShardWriters, spread: _Spread | None, tally: _Tally, dropped: frozenset[str]
) -> None:
    """The shard's entries record by record (augmented copies among them), written or spread;
    those in ``dropped`` left out (``--duplicates drop``, which lists them)."""
    settings = task.settings
    final = location.join(settings.out_dir, task.name)
    for entry in maker.prefetching(read_entries(settings.plan_dir, task.entries, task.sources, settings.config)):
        if entry.identity in dropped:
            tally.dropped += 1
            tally.add(0, [(entry.source, entry.line)], [])
            continue
        try:
            records = maker.records_for(entry)
        except image_headers.ImageProblem as exc:
            error = EntryError.of_entry(entry.source, entry.line, entry.identity, str(exc))
            if settings.on_error != "skip":
                raise error from None
            tally.add(0, [(entry.source, entry.line)], [(entry.source, entry.line, error.reason)])
            continue
        if spread is not None:
            with atomic.naming(final):
                spread.add(entry, maker.copies, records)
        else:
            for record in records:
                writer.write(record)
        tally.add(len(records), [(entry.source, entry.line)], [])
    if spread is not None:
        with atomic.naming(final):
            spread.write_to(writer)
