"""Write one reshard shard: its run of plan rows -> the records, read where the plan found them -> its files.

Records are read in batches of at most 8,192 records or 32 MB, each input file mapped or opened
once per task, and handed to every container's writer as one batch. The bytes of a record are
never changed. Nothing is decoded, and TensorFlow is never imported.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from shardkit.formats.containers import registry
from shardkit.formats.containers.adapter import LocatedReader
from shardkit.formats.example_decoder import ExampleDecoder
from shardkit.output.shard_record import ShardFile, ShardResult
from shardkit.pipeline.reshard.task import ReshardTask
from shardkit.pipeline.shard.shard_files import ShardWriters, WrittenShard
from shardkit.storage import location

BATCH_RECORDS = 8192
BATCH_BYTES = 32 << 20

Progress = Callable[[int], None]
Stop = Callable[[], None]


def copy_shard(task: ReshardTask, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None) -> WrittenShard:
    """Write the shard to local temp files (flushed when the run fsyncs); commit nothing."""
    started = time.perf_counter()
    settings = task.settings
    rows = np.load(location.join(settings.plan_dir, task.plan_file), mmap_mode="r", allow_pickle=False)[task.rows[0] : task.rows[1]]
    readers: dict[int, LocatedReader] = {}
    labels = _LabelCounts(settings.labels)
    writers = ShardWriters(task, uuid.uuid4().hex[:8])
    pending, last_tick = 0, time.monotonic()
    try:
        try:
            for batch in _batches(rows):
                if stop is not None:
                    stop()
                records = _read(task, batch, readers)
                labels.add(records)
                writers.write_batch(pa.array(records, pa.large_binary()))
                pending += len(batch)
                if progress is not None and time.monotonic() - last_tick >= tick_every:
                    progress(pending)
                    pending, last_tick = 0, time.monotonic()
            files = writers.close(sync=settings.fsync)
        except BaseException:
            writers.abandon()
            raise
    finally:
        for reader in readers.values():
            reader.close()
    if progress is not None and pending:
        progress(pending)
    primary, twins = files[0], files[1:]
    result = ShardResult(
        name=task.name,
        split=task.split,
        index=task.index,
        num_shards=task.num_shards,
        records=primary.written.records,
        bytes=primary.written.size,
        crc32c=primary.written.crc32c,
        entries=primary.written.records,
        covers=(),
        skipped=(),
        lengths={},
        sizes={},
        fingerprint=settings.fingerprint,
        seconds=round(time.perf_counter() - started, 3),
        index_file=None if primary.sidecar is None else primary.sidecar[0],
        labels=labels.counts,
        format=primary.container.name,
        twins=tuple(ShardFile(t.container.name, t.name, t.written.size, t.written.crc32c, t.sidecar and t.sidecar[0]) for t in twins),
    )
    return WrittenShard(task, result, files)


class _LabelCounts:
    """Per label feature an input OUT counted, how many of the shard's records carry each value
    (class names where it has them); None once a record holds anything but one value."""

    def __init__(self, keys: tuple[tuple[str, tuple[str, ...] | None], ...]) -> None:
        self.keys = keys
        self.counts: dict[str, dict[str, int] | None] = {key: {} for key, _ in keys}
        self.decoder = ExampleDecoder({}) if keys else None

    def add(self, records: list[bytes]) -> None:
        if self.decoder is None:
            return
        for record in records:
            features, _ = self.decoder.decode(record)
            for key, names in self.keys:
                counts = self.counts[key]
                if counts is None:
                    continue
                _, values = features.get(key, (None, []))
                if len(values) != 1:
                    self.counts[key] = None
                    continue
                value = values[0]
                if names is not None and isinstance(value, int) and 0 <= value < len(names):
                    shown = names[value]
                else:
                    shown = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                counts[shown] = counts.get(shown, 0) + 1


def _batches(rows: np.ndarray) -> Iterator[np.ndarray]:
    """Runs of ``rows`` of at most ``BATCH_RECORDS`` records and, beyond one record, ``BATCH_BYTES``."""
    ends = np.cumsum(rows["length"], dtype=np.int64)
    start = 0
    while start < len(rows):
        before = ends[start - 1] if start else 0
        by_bytes = int(np.searchsorted(ends, before + BATCH_BYTES, side="right"))
        end = min(start + BATCH_RECORDS, max(by_bytes, start + 1))
        yield rows[start:end]
        start = end


def _read(task: ReshardTask, batch: np.ndarray, readers: dict[int, LocatedReader]) -> list[bytes]:
    """The records of ``batch``, in its order: one read per input file it draws from."""
    inputs = batch["input"]
    records: list[bytes] = [b""] * len(batch)
    for number in np.unique(inputs).tolist():
        at = np.flatnonzero(inputs == number)
        reader = readers.get(number)
        if reader is None:
            reader = readers[number] = _open(task, number)
        got = reader.read(batch["locator"][at].tolist(), batch["length"][at].tolist())
        for position, record in zip(at.tolist(), got, strict=True):
            records[position] = record
    return records


def _open(task: ReshardTask, number: int) -> LocatedReader:
    source = task.sources[number]
    staged = source.get("staged")
    path = os.path.join(task.settings.plan_dir, staged) if staged else source["path"]
    return registry.named(source["container"]).read_located(path)
