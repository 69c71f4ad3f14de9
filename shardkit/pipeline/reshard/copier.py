"""Write one reshard shard: its run of plan rows -> the records, read where the plan found them -> its files.

Records are read in batches of at most 8,192 records or 8 MB, each input file mapped or opened
once per task, and handed to every container's writer as one batch. Where every input is in the
one container the shard is written in and its writer takes that container's frames as they are
(TFRecord into TFRecord), each record's frame is copied whole: no framing and no checksum again,
one copy fewer. The bytes of a record are never changed. Nothing is decoded, and TensorFlow is
never imported.
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
from shardkit.pipeline.reshard.task import ReshardTask
from shardkit.pipeline.shard.shard_files import ShardWriters, WrittenShard, shard_result
from shardkit.storage import location

BATCH_RECORDS = 8192
BATCH_BYTES = 8 << 20  # a batch is held about four times (records, arrow array, framed, written): 8 MB keeps a worker small

Progress = Callable[[int], None]
Stop = Callable[[], None]


def copy_shard(
    task: ReshardTask, progress: Progress | None = None, tick_every: float = 0.2, stop: Stop | None = None, sync: bool = True
) -> WrittenShard:
    """Write the shard to local temp files (flushed when the run fsyncs, or by its commit where
    ``sync`` is False); commit nothing."""
    started = time.perf_counter()
    settings = task.settings
    rows = np.load(location.join(settings.plan_dir, task.plan_file), mmap_mode="r", allow_pickle=False)[task.rows[0] : task.rows[1]]
    readers: dict[int, LocatedReader] = {}
    labels = _LabelCounts(settings.labels)
    framed = not settings.labels and _copies_frames(task)
    writers = ShardWriters(task, uuid.uuid4().hex[:8])
    pending, last_tick = 0, time.monotonic()
    try:
        try:
            for batch in _batches(rows):
                if stop is not None:
                    stop()
                if framed:  # TFRecord into TFRecord: the frames as the input holds them, checked when planned
                    writers.write_frames(_read(task, batch, readers, framed=True), batch["length"].tolist())
                else:
                    records = _read(task, batch, readers)
                    labels.add(records)
                    writers.write_batch(pa.array(records, pa.large_binary()))
                pending += len(batch)
                if progress is not None and time.monotonic() - last_tick >= tick_every:
                    progress(pending)
                    pending, last_tick = 0, time.monotonic()
            files = writers.close(sync=settings.fsync and sync)
        except BaseException:
            writers.abandon()
            raise
    finally:
        for reader in readers.values():
            reader.close()
    if progress is not None and pending:
        progress(pending)
    result = shard_result(task, files, started, entries=files[0].written.records, labels=labels.counts)
    return WrittenShard(task, result, files, flushed=sync or not settings.fsync)


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


def _copies_frames(task: ReshardTask) -> bool:
    """Whether every input is in the one container the shard is written in, whose writer takes its frames as they are."""
    containers = task.settings.containers
    return len(containers) == 1 and containers[0].copies_frames and all(s["container"] == containers[0].name for s in task.sources)


def _read(task: ReshardTask, batch: np.ndarray, readers: dict[int, LocatedReader], framed: bool = False) -> list[bytes]:
    """The records of ``batch`` (their payloads, or their whole frames), in its order: one read per input file it draws from."""
    inputs = batch["input"]
    records: list[bytes] = [b""] * len(batch)
    for number in np.unique(inputs).tolist():
        at = np.flatnonzero(inputs == number)
        reader = readers.get(number)
        if reader is None:
            reader = readers[number] = _open(task, number)
        take = reader.frames if framed else reader.read
        got = take(batch["locator"][at].tolist(), batch["length"][at].tolist())
        for position, record in zip(at.tolist(), got, strict=True):
            records[position] = record
    return records


def _open(task: ReshardTask, number: int) -> LocatedReader:
    source = task.sources[number]
    staged = source.get("staged")
    path = os.path.join(task.settings.plan_dir, staged) if staged else source["path"]
    return registry.named(source["container"]).read_located(path)
