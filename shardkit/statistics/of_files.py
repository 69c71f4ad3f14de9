"""The statistics of one shard file's records, whoever wrote them (``check.file_statistics``
hands each file of ``shardkit stats FILE...`` to a worker here, and merges what they give back).

Each file is walked by its container's adapter (every record's framing and checksum checked, as
``verify`` checks them; a local plain file by ``locate``, in one vectorized pass over its mapping),
its records are decoded ``BATCH`` at a time into columns (``formats.example_columns``) and
counted by ``ShardStatistics``, whose parts merge exactly, as a build's shards do. A bytes feature whose first
value is a JPEG or PNG is counted as pictures (formats and byte sizes; the pixels are not decoded:
a build counts those as it writes them), one whose first value is not UTF-8 text as blobs (sizes),
any other as text (distinct and top values). A record that is not a ``tf.train.Example``, or a file
whose framing is broken, stops the count with one line naming the file, the record and its
byte offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shardkit.errors import CorruptShardError
from shardkit.formats.containers import registry
from shardkit.formats.example_columns import decode_columns
from shardkit.formats.example_proto import BYTES, DecodeError, decode_example
from shardkit.formats.record_survey import sniff
from shardkit.statistics.shard_statistics import ShardStatistics
from shardkit.storage import location

BATCH = 65536  # records decoded at once: a few MB of small records, one record's worth of large ones
PICTURES = ("jpeg", "png")
_HEAD = 16  # bytes that tell a container and its compression apart


def role_of(first: bytes) -> str:
    """What a bytes feature is, by its first value: pictures, bytes that are not text (blob), or text."""
    found = sniff(first)
    return "picture" if found in PICTURES else "blob" if found == "binary" else "text"


def count_file(job: tuple[str, str]) -> dict[str, Any]:
    """The statistics of the records of one file (``(path, compression)``), as plain data (what a pool
    hands back: ``ShardStatistics.from_data`` takes it)."""
    path, compression = job
    container = registry.of_file(path, compression)
    batches = _Batches(path, container.locates_by_offset)
    if _plain_local(path, compression):  # found in one vectorized pass, read from the file's mapping
        locators, lengths, result = container.locate(path)
        reader = container.read_located(path)
        try:
            for first in range(0, len(locators), BATCH):
                where, sizes = locators[first : first + BATCH].tolist(), lengths[first : first + BATCH].tolist()
                batches.count(reader.read(where, sizes), first, where)
        finally:
            reader.close()
    else:  # a URL or a compressed file: one stream
        result = container.walk(path, batches.take, checksum=False)
        batches.flush()
    if not result.ok:
        raise CorruptShardError(path, result.describe_error())
    return batches.statistics.to_data()


def _plain_local(path: str, compression: str) -> bool:
    if location.is_url(path) or compression not in ("auto", "none"):
        return False
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    found = registry.recognised(head)
    return found is None or found[1] == "none"  # None: too short to tell, or not a container's: locate says what it is


class _Batches:
    """Records counted ``BATCH`` at a time: handed over by a walk (``take``), or a batch at once (``count``)."""

    def __init__(self, path: str, by_offset: bool) -> None:
        self.path = path
        self.by_offset = by_offset  # locators are byte offsets (else record numbers)
        self.statistics = ShardStatistics()
        self.records: list[bytes] = []
        self.first = 0
        self.offsets: list[int] = []

    def take(self, index: int, offset: int, payload: memoryview) -> None:
        if not self.records:
            self.first = index
        self.records.append(bytes(payload))
        self.offsets.append(offset)
        if len(self.records) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.records:
            self.count(self.records, self.first, self.offsets)
        self.records, self.offsets = [], []

    def count(self, records: Sequence[bytes], first: int, where: Sequence[int]) -> None:
        """``records``, the first of them record ``first`` of the file, found at ``where`` (locators)."""
        lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
        starts = np.zeros(len(records), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        decoded = decode_columns(np.frombuffer(b"".join(records), dtype=np.uint8), starts, lengths)
        columns = []
        for key, column in decoded.columns.items():
            if column.wire == BYTES and key not in self.statistics.roles and len(column.values):
                self.statistics.roles[key] = role_of(column.values[0].as_py())
            columns.append((key, column.wire, column.lists()))
            if self.statistics.roles.get(key) == "picture":
                for value in column.values.to_pylist():
                    self.statistics.picture_histogram(key, sniff(value), None)
        self.statistics.columns(columns, len(records) - len(decoded.by_hand))
        for position in decoded.by_hand.tolist():
            self.statistics.add(self._by_hand(records[position], first + position, where[position]))

    def _by_hand(self, record: bytes, index: int, locator: int) -> dict[str, Any]:
        try:
            features = decode_example(record)
        except DecodeError as exc:
            at = f"record {index} at byte {locator}" if self.by_offset else f"record {index}"
            raise CorruptShardError(self.path, f"{at}: not a tf.train.Example ({exc})") from None
        for key, (wire, values) in features.items():
            if wire == BYTES and values and key not in self.statistics.roles:
                self.statistics.roles[key] = role_of(values[0])  # type: ignore[arg-type]
            if self.statistics.roles.get(key) == "picture":
                for value in values:
                    self.statistics.picture_histogram(key, sniff(value), None)  # type: ignore[arg-type]
        return features
