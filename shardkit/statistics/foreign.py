"""Statistics of shard files written by anyone (TFRecord, ArrayRecord), in one pass: each file's
records decoded and counted in a worker, the parts merged per split. Records are decoded a batch
at a time into columns (``formats.example_columns``, NumPy over the batch); a record of another
layout, or not an Example, goes through ``decode_example``, which names what is wrong with it.

A bytes feature is told by its first value: a picture (its signature: JPEG, PNG, GIF, BMP, WebP),
text (valid UTF-8) or opaque bytes. Pictures' formats and sizes in bytes are counted; their pixels
only with ``pixels`` (each picture decoded: the cost of a decode per picture).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.errors import CorruptShardError, ShardkitError
from shardkit.formats import image_codec, image_headers
from shardkit.formats.containers import registry
from shardkit.formats.example_columns import decode_columns
from shardkit.formats.example_proto import BYTES, DecodeError, decode_example
from shardkit.interrupts import pool_map
from shardkit.statistics.proto import dataset_list
from shardkit.statistics.shard_statistics import ShardStatistics, merged
from shardkit.storage import location

ALL = "all"  # the one dataset of files given without a split
BATCH = 65536  # records decoded at once (formats.example_columns): a few MB of small records
_HEAD = 16  # bytes that tell a container and its compression apart
_SIGNATURES = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF8", "gif"), (b"BM", "bmp"))


def picture_format(value: bytes) -> str | None:
    """The picture format ``value`` starts as, or None."""
    for signature, name in _SIGNATURES:
        if value.startswith(signature):
            return name
    if value[:4] == b"RIFF" and value[8:12] == b"WEBP":
        return "webp"
    return None


def file_statistics(paths: Sequence[str], workers: int | None = None, pixels: bool = False) -> Any:
    """One dataset, ``all``, of every record in ``paths``: a ``DatasetFeatureStatisticsList``."""
    return split_statistics({ALL: list(paths)}, workers, pixels)


def split_statistics(files: Mapping[str, Sequence[str]], workers: int | None = None, pixels: bool = False) -> Any:
    """Per split, the statistics of its files' records: a ``DatasetFeatureStatisticsList``."""
    jobs = [(split, (path, pixels)) for split, paths in files.items() for path in paths]
    if workers is None:
        workers = len(os.sched_getaffinity(0))
    parts = pool_map(_file_part, [job for _, job in jobs], workers)
    by_split: dict[str, list[tuple[str, dict[str, Any]]]] = {split: [] for split in files}
    for (split, (path, _)), part in zip(jobs, parts, strict=True):
        by_split[split].append((path, part))
    return dataset_list({split: _merged(found) for split, found in by_split.items()})


def _merged(parts: Sequence[tuple[str, dict[str, Any]]]) -> ShardStatistics:
    """Files' parts merged, a feature of two wire types refused (as TFDV refuses it) naming both
    files; a bytes feature one file took for text or a picture and another for opaque bytes is
    counted as bytes in all (each file tells by its own first value)."""
    first: dict[str, tuple[str, str]] = {}  # key -> (wire, the file it was first seen in)
    roles: dict[str, set[str]] = {}
    for path, part in parts:
        for key, wire in part["wires"].items():
            seen = first.setdefault(key, (wire, path))
            if seen[0] != wire:
                raise ShardkitError(
                    f"{path}: feature {key!r} is {wire} here and {seen[0]} in {seen[1]}; a feature keeps one type across "
                    "a dataset's records (TFDV and tf.io.parse_example refuse it too): give these files to stats separately"
                )
        for key, feature in part["stats"]["features"].items():
            roles.setdefault(key, set()).add(feature["role"])
    mixed = {key for key, found in roles.items() if len(found) > 1}
    return merged({**part["stats"], "features": _as_blobs(part["stats"]["features"], mixed)} for _, part in parts)


def _as_blobs(features: Mapping[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: {"role": "blob", "lists": f["lists"], "sizes": f["sizes"]} if k in keys else f for k, f in features.items()}


def _file_part(job: tuple[str, bool]) -> dict[str, Any]:
    """The statistics of one file's records, as plain data; a damaged file is one error naming it.

    A local plain file is located in one vectorized pass (every record's framing and CRCs, as
    ``verify`` checks them) and read from its mapping; a URL or a compressed file in one stream.
    Either way the records are decoded ``BATCH`` at a time into columns."""
    path, pixels = job
    container = registry.of_file(path)
    counted = _Batches(path, pixels, container.locates_by_offset)
    if _plain_local(path):
        locators, lengths, result = container.locate(path)
        reader = container.read_located(path)
        try:
            for first in range(0, len(locators), BATCH):
                where, sizes = locators[first : first + BATCH].tolist(), lengths[first : first + BATCH].tolist()
                counted.count(reader.read(where, sizes), first, where)
        finally:
            reader.close()
    else:
        result = container.walk(path, counted.take, checksum=False)
        counted.flush()
    if not result.ok:
        raise CorruptShardError(path, f"{result.describe_error()}; the records before it were read (shardkit verify says the same)")
    return {"stats": counted.stats.to_data(), "wires": counted.wires}


def _plain_local(path: str) -> bool:
    if location.is_url(path):
        return False
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    found = registry.recognised(head)
    return found is None or found[1] == "none"  # None: too short to tell, or no container's: locate says what it is


class _Batches:
    """Records counted ``BATCH`` at a time: handed over by a walk (``take``), or a batch at once
    (``count``); bytes features told apart on first sight."""

    def __init__(self, path: str, pixels: bool, by_offset: bool) -> None:
        self.path = path
        self.pixels = pixels
        self.by_offset = by_offset  # locators are byte offsets (else record numbers)
        self.stats = ShardStatistics()
        self.records: list[bytes] = []
        self.first = 0
        self.offsets: list[int] = []
        self.wires: dict[str, str] = {}  # each feature's wire type, as its first record has it

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
        roles = self.stats.roles
        columns = []
        for key, column in decoded.columns.items():
            self._wire(key, column.wire, first + int(column.rows[0]) if len(column.rows) else first, where, first)
            if column.wire == BYTES and key not in roles and len(column.values):
                roles[key] = _role(column.values[0].as_py())
            columns.append((key, column.wire, column.lists()))
            if roles.get(key) == "picture":
                self._pictures(key, column.values.to_pylist())
        self.stats.columns(columns, len(records) - len(decoded.by_hand))
        for position in decoded.by_hand.tolist():
            self.stats.add(self._by_hand(records[position], first + position, where[position]))

    def _by_hand(self, record: bytes, index: int, locator: int) -> dict[str, Any]:
        try:
            features = decode_example(record)
        except DecodeError as exc:
            at = f"record {index} at byte {locator}" if self.by_offset else f"record {index}"
            raise CorruptShardError(self.path, f"{at}: not a tf.train.Example ({exc})") from None
        for key, (wire, _) in features.items():
            self._wire(key, wire, index, None, 0, locator)
        for key, (wire, values) in features.items():
            if wire == BYTES and values and key not in self.stats.roles:
                self.stats.roles[key] = _role(values[0])  # type: ignore[arg-type]
            if self.stats.roles.get(key) == "picture":
                self._pictures(key, values)  # type: ignore[arg-type]
        return features

    def _wire(self, key: str, wire: str, index: int, where: Sequence[int] | None, first: int, locator: int = 0) -> None:
        """Refuse a feature whose wire type differs from the one its first record had, naming the record."""
        known = self.wires.setdefault(key, wire)
        if known != wire:
            at_byte = where[index - first] if where is not None else locator
            at = f"record {index} at byte {at_byte}" if self.by_offset else f"record {index}"
            raise ShardkitError(
                f"{self.path}: {at}: feature {key!r} is {wire} here and {known} in the records before it; "
                "a feature keeps one type across a dataset's records (TFDV and tf.io.parse_example refuse it too)"
            )

    def _pictures(self, key: str, values: Sequence[bytes]) -> None:
        for value in values:
            self.stats.picture(key, picture_format(value) or "unknown", _pixels(value) if self.pixels else None)


def _pixels(value: bytes) -> np.ndarray | None:
    """A picture's pixels as a build would hold them (palettes as RGB); None where it does not decode."""
    try:
        info = image_headers.probe(value)
        return image_codec.decode(value, image_codec.stored_mode(info, False, "image", None, "png"), info=info)
    except (image_headers.ImageProblem, ValueError, OSError):
        return None


def _role(value: bytes) -> str:
    if picture_format(value) is not None:
        return "picture"
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return "blob"
    return "text"
