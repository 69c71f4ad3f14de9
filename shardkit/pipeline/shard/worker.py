"""Run one ShardTask: read its plan lines -> records -> write one shard, then commit it atomically.

A worker never imports TensorFlow. It reports progress through a callback (ticks of records
written) and returns one ``ShardResult``; the parent owns the progress bar and the manifest.
When an entry gives several records (augmented copies) and the build shuffles, the records go
to a scratch file first and are written in an order drawn from the seed and their identities,
so one input's records do not sit side by side; memory stays one entry's records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from shardkit.errors import EntryError, StateError, WriteError, cut
from shardkit.formats import image_headers
from shardkit.formats.containers.idx_sidecar import flat_index_text
from shardkit.formats.containers.tfrecord_io import RecordWriter, file_crc32c
from shardkit.output import layout
from shardkit.output.build_state import current_fingerprint
from shardkit.output.shard_record import ShardResult, write_shard_record
from shardkit.pipeline.inputs.entries import Entry
from shardkit.pipeline.plan.arithmetic import record_key
from shardkit.pipeline.plan.plan_file import read_entries
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.shard.batches import BatchMaker
from shardkit.pipeline.shard.batches import applies as batched
from shardkit.pipeline.shard.records import RecordMaker
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

    def write_to(self, writer: RecordWriter) -> None:
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


def run_task(task: ShardTask, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None) -> ShardResult:
    """Write one shard to a temporary name, fsync it, rename it into place (or upload it), save its record."""
    written = write_shard(task, progress, tick_every, stop)
    written.commit()
    return written.result


@dataclasses.dataclass(frozen=True)
class WrittenShard:
    """A shard whole in its local temp file, and its record: what ``commit`` makes finished."""

    task: ShardTask
    result: ShardResult
    temp: str
    index: bytes | None  # the .idx file's content, when the build writes one

    def commit(self) -> None:
        """Shard, then its .idx, then its record (the commit point): renamed or uploaded, each whole."""
        settings = self.task.settings
        try:
            _check_still_ours(self.task)
            atomic.publish(self.temp, location.join(settings.out_dir, self.task.name))
            if self.index is not None and self.result.index_file:
                # Beside the shard, before its record: the record is the commit point for both.
                atomic.write_atomic(location.join(settings.out_dir, self.result.index_file), self.index, settings.fsync)
        except BaseException:
            atomic.remove_quietly(self.temp)
            raise
        write_shard_record(settings.out_dir, self.result, settings.fsync)

    def discard(self) -> None:
        atomic.remove_quietly(self.temp)


def write_shard(task: ShardTask, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None) -> WrittenShard:
    """Encode one shard's records into a local temp file (flushed to disk when the build fsyncs); commit nothing."""
    started = time.perf_counter()
    settings = task.settings
    final = location.join(settings.out_dir, task.name)
    tag = uuid.uuid4().hex[:8]
    temp = layout.temp_path(settings.out_dir, task.name, tag)
    rule = settings.read_rule(task.sources)
    batches = BatchMaker(settings.config, task.sources, settings.on_error, rule) if batched(settings.config, task.sources) else None
    maker = RecordMaker(settings.config, settings.seed, rule) if batches is None else None
    tally = _Tally(progress, tick_every, keeps_inputs=not settings.shuffle, stop=stop)
    spread = None
    try:
        if location.is_url(settings.out_dir):  # a local staging folder, also on a Dask worker that never planned
            layout.make_work_dir(settings.out_dir)
        if settings.shuffle and maker is not None and len(maker.copies) > 1:
            with atomic.naming(final):
                spread = _Spread(layout.spread_temp_path(settings.out_dir, task.name, tag), settings.seed)
        with _ShardFile(temp, final) as raw:
            sink: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if settings.compression == "gzip" else raw
            writer = RecordWriter(sink)
            if batches is not None:
                for block in batches.blocks(settings.plan_dir, task.entries):
                    writer.write_framed(block.framed, block.lengths)
                    tally.add(block.records, block.inputs, block.skipped)
            else:
                _write_records(task, maker, writer, spread, tally)  # type: ignore[arg-type]
            if sink is not raw:
                sink.close()
            raw.flush()
            if settings.fsync and not location.is_url(settings.out_dir):  # a staged file is uploaded, not kept
                raw.sync()
        if settings.compression == "gzip":
            size, crc = os.path.getsize(temp), file_crc32c(temp)
        else:
            size, crc = writer.bytes_written, writer.crc32c
        index_name = index = None
        if settings.index and settings.compression is None:
            index_name, index = layout.index_name(task.name), flat_index_text(writer.flat_offsets)
    except BaseException:
        atomic.remove_quietly(temp)
        raise
    finally:
        if spread is not None:
            spread.close()
    tally.flush()
    stats = batches.stats if batches is not None else maker.stats  # type: ignore[union-attr]
    result = ShardResult(
        name=task.name,
        split=task.split,
        index=task.index,
        num_shards=task.num_shards,
        records=writer.records,
        bytes=size,
        crc32c=f"{crc:08x}",
        entries=task.entries.entries - len(tally.skipped),
        covers=_covers(tally.inputs),  # shuffled shards hold scattered lines: each record's source_id names its input
        skipped=tuple(tally.skipped),
        lengths=stats.lengths,
        sizes=stats.sizes,
        fingerprint=settings.fingerprint,
        seconds=round(time.perf_counter() - started, 3),
        index_file=index_name,
        labels=stats.labels,
    )
    return WrittenShard(task, result, temp, index)


class _Tally:
    """What a shard's record keeps of the entries written so far, and the progress ticks."""

    def __init__(self, progress: Progress | None, tick_every: float, keeps_inputs: bool, stop: Stop | None = None) -> None:
        self.progress = progress
        self.stop = stop
        self.tick_every = tick_every
        self.keeps_inputs = keeps_inputs  # unshuffled: which input lines the shard covers
        self.inputs: list[tuple[str, int]] = []
        self.skipped: list[tuple[str, int, str]] = []
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


def _write_records(task: ShardTask, maker: RecordMaker, writer: RecordWriter, spread: _Spread | None, tally: _Tally) -> None:
    """The shard's entries record by record (augmented copies among them), written or spread."""
    settings = task.settings
    final = location.join(settings.out_dir, task.name)
    for entry in maker.prefetching(read_entries(settings.plan_dir, task.entries, task.sources, settings.config)):
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


class _ShardFile:
    """A shard's temp file, as the record writer (and gzip) see it: every OS error writing it (a
    full disk, a quota) is a ``WriteError`` naming the shard, while input errors stay entry errors."""

    def __init__(self, temp: str, final: str) -> None:
        self._final = final
        with atomic.naming(final):
            # A larger buffer: one write call per 256 KB, not one per small record.
            self._raw = open(temp, "wb", buffering=1 << 18)  # noqa: SIM115 (closed by __exit__, where a full disk can fail it too)

    def write(self, data: bytes) -> int:
        try:  # once per record: a bare try, not atomic.naming's context manager
            return self._raw.write(data)
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None

    def flush(self) -> None:
        with atomic.naming(self._final):
            self._raw.flush()

    def sync(self) -> None:
        with atomic.naming(self._final):
            atomic.flush_to_disk(self._raw.fileno())

    def __enter__(self) -> _ShardFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            with atomic.naming(self._final):
                self._raw.close()
        else:  # already failing: closing flushes what is buffered, which may fail again and hide why
            with contextlib.suppress(OSError):
                self._raw.close()


def _check_still_ours(task: ShardTask) -> None:
    """Refuse to commit into OUT once another build owns it.

    A task can outlive its build: a Dask worker finishes the task it is running after the
    client that submitted it has failed, been cancelled or been killed, and meanwhile
    ``--overwrite`` may have started a different build in OUT. The same build's shard would be
    byte-identical, so only a changed (or removed) fingerprint stops the commit.
    """
    settings = task.settings
    if current_fingerprint(settings.out_dir) != settings.fingerprint:
        raise StateError(
            f"{settings.out_dir}: now holds another build ({layout.STATE_DIR}/{layout.BUILD_STATE} changed while {task.name} was written); "
            "this task's shard was discarded"
        )
