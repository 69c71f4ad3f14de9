"""A shard's statistics, fed as its records are made: record by record (a record's features) or a
batch of records at once (Arrow columns), and pictures' pixels where the build holds them.

Values are buffered per feature and folded into its statistics ``FLUSH_RECORDS`` records at a time,
so the per-record cost is appending to a list; the folding is NumPy and the sketches' C++.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.formats.example_proto import BYTES, FLOAT
from shardkit.statistics.feature_stats import (
    KINDS,
    BytesStats,
    FeatureStats,
    MaskStats,
    NumberStats,
    PictureStats,
    PixelCount,
    StringStats,
    from_data,
    pixel_count,
)

FLUSH_RECORDS = 4096
ROLES = ("number", "area", "text", "blob", "picture", "mask")
NUMBERS = ("number", "area")


def _text(value: bytes) -> str:
    """A string value as counted and shown: UTF-8 where it is, each stray byte kept as an escape."""
    return value.decode("utf-8", "surrogateescape")


class ShardStatistics:
    """Per feature key, its statistics over the records given so far; ``records`` counts them.

    ``roles`` names what each bytes feature is ("text", "blob" or "picture"); a bytes key it
    does not name is text. Numbers need no role: their wire type says it.
    """

    def __init__(self, roles: Mapping[str, str] | None = None) -> None:
        self.roles = dict(roles or {})
        self.records = 0
        self.features: dict[str, FeatureStats] = {}
        self._values: dict[str, list[Any]] = {}
        self._lengths: dict[str, list[int]] = {}
        self._wires: dict[str, str] = {}
        self._sizes_only: dict[str, bool] = {}  # keys whose buffer holds each value's size, not the value
        self._pending = 0
        self._held: list[tuple[str, Any]] | None = None  # an entry's records, until all of them are made

    # -- feeding ---------------------------------------------------------------------------------

    def hold(self) -> None:
        """Hold what comes until ``commit``: an entry's records, counted only once all are made
        (a skipped entry counts nothing); anything held before is dropped."""
        self._held = []

    def commit(self) -> None:
        held, self._held = self._held or [], None
        for what, args in held:
            if what == "add":
                self.add(args)
            else:
                self.picture(*args)

    def add(self, features: Mapping[str, tuple[str, Any]]) -> None:
        """One record's features, as ``formats.example_proto.encode_example`` takes them."""
        if self._held is not None:
            self._held.append(("add", features))
            return
        self.records += 1
        for key, (wire, values) in features.items():
            buffer = self._values.get(key)
            if buffer is None:
                buffer = self._values[key] = []
                self._lengths[key] = []
                self._wires[key] = wire
                self._sizes_only[key] = wire == BYTES and self._role(key, wire) != "text"
            if self._sizes_only[key]:  # a picture's or a file's bytes: only their sizes are kept, not the bytes
                buffer.extend(map(len, values))
            else:
                buffer.extend(values)
            self._lengths[key].append(len(values))
        self._pending += 1
        if self._pending >= FLUSH_RECORDS:
            self.flush()

    def picture(self, key: str, image_format: str, array: np.ndarray | None) -> None:
        """A record's picture of ``key``: its format, and its pixels where the build holds them."""
        if self._held is not None:
            self._held.append(("picture", (key, image_format, array)))
            return
        stats = self._stats(key, self.roles.get(key, "picture"))
        assert isinstance(stats, PictureStats)
        stats.picture(image_format)
        if array is not None:
            count = pixel_count(array, moments=not isinstance(stats, MaskStats))
            if count is not None:
                stats.pixels(count)

    def picture_counted(self, key: str, image_format: str, count: PixelCount | None) -> None:
        """As ``picture``, with the pixels already counted (a batch's worker did)."""
        stats = self._stats(key, self.roles.get(key, "picture"))
        assert isinstance(stats, PictureStats)
        stats.picture(image_format)
        if count is not None:
            stats.pixels(count)

    def columns(self, columns: Sequence[tuple[str, str, Any]], records: int) -> None:
        """A batch of ``records`` records, one Arrow array per key (a value or a list per record)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.records += records
        for key, wire, array in columns:
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks()
            if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
                lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
                flat = pc.list_flatten(array)
            else:
                lengths = np.ones(len(array), dtype=np.int64)
                flat = array
            role = self._role(key, wire)
            if role in NUMBERS:
                numbers = flat.to_numpy(zero_copy_only=False)
                self._number(key, numbers.astype(np.float32) if wire == FLOAT else numbers.astype(np.int64), lengths)
                continue
            sizes = pc.binary_length(flat).to_numpy(zero_copy_only=False)
            stats = self._stats(key, role)
            assert isinstance(stats, BytesStats)
            stats.update_sizes(sizes, lengths)
            if isinstance(stats, StringStats):
                stats.distinct.add_array(flat)

    def flush(self) -> None:
        """Fold the buffered values into each feature's statistics."""
        for key, values in self._values.items():
            if not self._lengths[key]:
                continue
            lengths = np.asarray(self._lengths[key], dtype=np.int64)
            wire = self._wires[key]
            role = self._role(key, wire)
            if role in NUMBERS:
                self._number(key, np.asarray(values, dtype=np.float32 if wire == FLOAT else np.int64), lengths)
            else:
                stats = self._stats(key, role)
                assert isinstance(stats, BytesStats)
                sizes = (
                    np.asarray(values, dtype=np.int64) if self._sizes_only[key] else np.fromiter(map(len, values), np.int64, len(values))
                )
                stats.update_sizes(sizes, lengths)
                if isinstance(stats, StringStats):
                    stats.distinct.add(bytes(v) for v in values)
            values.clear()
            self._lengths[key] = []
        self._pending = 0

    def _role(self, key: str, wire: str) -> str:
        if wire != BYTES:
            return "area" if self.roles.get(key) == "area" else "number"
        return self.roles.get(key, "text")

    def _stats(self, key: str, role: str) -> FeatureStats:
        stats = self.features.get(key)
        if stats is None:
            stats = self.features[key] = KINDS[role]()
        return stats

    def _number(self, key: str, values: np.ndarray, lengths: np.ndarray) -> None:
        stats = self._stats(key, "area" if self.roles.get(key) == "area" else "number")
        assert isinstance(stats, NumberStats)
        stats.update(values, lengths)

    # -- merging and carrying --------------------------------------------------------------------

    def merge(self, other: ShardStatistics) -> None:
        self.flush()
        other.flush()
        self.records += other.records
        for key, stats in other.features.items():
            mine = self.features.get(key)
            if mine is None:
                self.features[key] = from_data(stats.to_data())  # a copy: ``other`` stays as it was
            elif type(mine) is type(stats):
                mine.merge(stats)
            else:
                raise ValueError(f"feature {key!r} is {mine.role} in one shard and {stats.role} in another")

    def to_data(self) -> dict[str, Any]:
        self.flush()
        return {"records": self.records, "features": {key: stats.to_data() for key, stats in sorted(self.features.items())}}

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> ShardStatistics:
        made = cls()
        made.records = int(raw["records"])
        made.features = {key: from_data(value) for key, value in raw["features"].items()}
        return made


def merged(parts: Iterable[Mapping[str, Any]]) -> ShardStatistics:
    """The statistics of several shards' records, from each shard's ``to_data``."""
    total = ShardStatistics()
    for part in parts:
        total.merge(ShardStatistics.from_data(part))
    return total
