"""One feature's statistics in one shard or split: numbers, strings, bytes or pictures.

Each class takes values in NumPy batches (``update``), merges with another of its kind
(``merge``) and round-trips through plain data (``to_data``/``from_data``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from shardkit.formats.example_proto import FLOAT, INT64
from shardkit.statistics.sketches import Distinct, Moments, Quantiles

LEVELS = 256  # an 8-bit channel's values: a picture's histogram has this many bins a channel
EXACT_FLOAT32 = 1 << 24


class ValueLists:
    """How many values each record holds (a scalar feature: one), as TFDV's common statistics say it."""

    def __init__(self) -> None:
        self.records = 0
        self.total = 0
        self.least: int | None = None
        self.most: int | None = None
        self.quantiles = Quantiles()

    def update(self, lengths: np.ndarray) -> None:
        if not lengths.size:
            return
        self.records += int(lengths.size)
        self.total += int(lengths.sum())
        lo, hi = int(lengths.min()), int(lengths.max())
        self.least = lo if self.least is None else min(self.least, lo)
        self.most = hi if self.most is None else max(self.most, hi)
        self.quantiles.update(lengths)

    def merge(self, other: ValueLists) -> None:
        self.records += other.records
        self.total += other.total
        for name, pick in (("least", min), ("most", max)):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else pick(mine, theirs))
        self.quantiles.merge(other.quantiles)

    def to_data(self) -> dict[str, Any]:
        return {"records": self.records, "total": self.total, "least": self.least, "most": self.most, "sketch": self.quantiles.to_data()}

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> ValueLists:
        made = cls()
        made.records, made.total, made.least, made.most = int(raw["records"]), int(raw["total"]), raw["least"], raw["most"]
        made.quantiles = Quantiles.from_data(raw["sketch"])
        return made


class FeatureStats:
    """What every feature's statistics have: the records that hold it and how many values each."""

    role: ClassVar[str]

    def __init__(self) -> None:
        self.lists = ValueLists()

    def merge(self, other: FeatureStats) -> None:
        self.lists.merge(other.lists)

    def to_data(self) -> dict[str, Any]:
        return {"role": self.role, "lists": self.lists.to_data()}

    def load(self, raw: Mapping[str, Any]) -> None:
        self.lists = ValueLists.from_data(raw["lists"])


class NumberStats(FeatureStats):
    """int64 or float values: moments, extremes, zeros, NaNs and a quantile sketch."""

    role = "number"

    def __init__(self) -> None:
        super().__init__()
        self.moments = Moments()
        self.low: float | None = None
        self.high: float | None = None
        self.zeros = 0
        self.nans = 0  # float values that are NaN: counted, left out of the rest
        self.quantiles = Quantiles()
        self.wire: str = FLOAT  # the Example list type: int64 or float

    def update(self, values: np.ndarray, lengths: np.ndarray) -> None:
        self.lists.update(lengths)
        self.wire = INT64 if values.dtype.kind in "iu" else FLOAT
        if values.dtype.kind == "f":
            nan = np.isnan(values)
            if nan.any():
                self.nans += int(nan.sum())
                values = values[~nan]
        if not values.size:
            return
        self.moments.merge(Moments.of(values))
        lo, hi = float(values.min()), float(values.max())
        self.low = lo if self.low is None else min(self.low, lo)
        self.high = hi if self.high is None else max(self.high, hi)
        self.zeros += int(values.size - np.count_nonzero(values))
        self.quantiles.update(values)

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, NumberStats)
        super().merge(other)
        self.moments.merge(other.moments)
        self.low = other.low if self.low is None else self.low if other.low is None else min(self.low, other.low)
        self.high = other.high if self.high is None else self.high if other.high is None else max(self.high, other.high)
        self.zeros += other.zeros
        self.nans += other.nans
        self.wire = other.wire if other.lists.records else self.wire
        self.quantiles.merge(other.quantiles)

    def to_data(self) -> dict[str, Any]:
        return {
            **super().to_data(),
            "moments": self.moments.to_list(),
            "low": self.low,
            "high": self.high,
            "zeros": self.zeros,
            "nans": self.nans,
            "sketch": self.quantiles.to_data(),
            "wire": self.wire,
        }

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.moments = Moments.from_list(raw["moments"])
        self.low, self.high, self.zeros, self.nans = raw["low"], raw["high"], int(raw["zeros"]), int(raw["nans"])
        self.quantiles = Quantiles.from_data(raw["sketch"])
        self.wire = str(raw["wire"])


class AreaStats(NumberStats):
    """Objects' areas in pixels (``objects``' ``area``), also counted exactly in COCO's size
    ranges: small below 32x32, medium below 96x96, large from there (as COCO's evaluation splits them)."""

    role = "area"
    LIMITS = (32.0**2, 96.0**2)

    def __init__(self) -> None:
        super().__init__()
        self.sizes = [0, 0, 0]  # small, medium, large

    def update(self, values: np.ndarray, lengths: np.ndarray) -> None:
        super().update(values, lengths)
        finite = values[~np.isnan(values)] if values.dtype.kind == "f" else values
        where = np.searchsorted(np.asarray(self.LIMITS), finite, side="right")
        for i, n in enumerate(np.bincount(where, minlength=3).tolist()):
            self.sizes[i] += int(n)

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, AreaStats)
        super().merge(other)
        self.sizes = [a + b for a, b in zip(self.sizes, other.sizes, strict=True)]

    def to_data(self) -> dict[str, Any]:
        return {**super().to_data(), "coco_sizes": self.sizes}

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.sizes = [int(n) for n in raw["coco_sizes"]]


class BytesStats(FeatureStats):
    """Opaque bytes (a file's, a mask's, a picture's encoding): how many bytes each value holds."""

    role = "blob"

    def __init__(self) -> None:
        super().__init__()
        self.sizes = ValueLists()  # each value's size in bytes, kept as a value list's length is

    def update_sizes(self, sizes: np.ndarray, lengths: np.ndarray) -> None:
        self.lists.update(lengths)
        self.sizes.update(sizes)

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, BytesStats)
        super().merge(other)
        self.sizes.merge(other.sizes)

    def to_data(self) -> dict[str, Any]:
        return {**super().to_data(), "sizes": self.sizes.to_data()}

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.sizes = ValueLists.from_data(raw["sizes"])


class StringStats(BytesStats):
    """Text: distinct values (exact up to a bound, then estimated), the top ones, lengths in bytes."""

    role = "text"

    def __init__(self) -> None:
        super().__init__()
        self.distinct = Distinct()

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, StringStats)
        super().merge(other)
        self.distinct.merge(other.distinct)

    def to_data(self) -> dict[str, Any]:
        return {**super().to_data(), "distinct": self.distinct.to_data()}

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.distinct = Distinct.from_data(raw["distinct"])


class PictureStats(BytesStats):
    """A picture: its encoded sizes (as bytes), formats, channel counts and, for the pixels the build
    held (decoded, augmented: the arrays handed to the encoder), a 256-bin histogram per channel,
    from which the per-channel mean and std follow exactly."""

    role = "picture"

    def __init__(self) -> None:
        super().__init__()
        self.formats: dict[str, int] = {}
        self.histograms: dict[int, np.ndarray] = {}  # channels -> int64 [channels, 256]: pictures with that many
        self.measured = 0  # pictures whose pixels are in the histograms

    def picture(self, image_format: str) -> None:
        self.formats[image_format] = self.formats.get(image_format, 0) + 1

    def pixels(self, histogram: np.ndarray) -> None:
        """One picture's histogram, [channels, 256] counts (``pixel_histogram``)."""
        channels = int(histogram.shape[0])
        known = self.histograms.get(channels)
        if known is None:
            self.histograms[channels] = histogram.astype(np.int64)
        else:
            known += histogram
        self.measured += 1

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, PictureStats)
        super().merge(other)
        for name, n in other.formats.items():
            self.formats[name] = self.formats.get(name, 0) + n
        for channels, histogram in other.histograms.items():
            if channels in self.histograms:
                self.histograms[channels] = self.histograms[channels] + histogram
            else:
                self.histograms[channels] = histogram.copy()
        self.measured += other.measured

    def to_data(self) -> dict[str, Any]:
        histograms = {str(c): h.tolist() for c, h in self.histograms.items()}
        return {**super().to_data(), "formats": self.formats, "histograms": histograms, "measured": self.measured}

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.formats = {str(k): int(v) for k, v in raw["formats"].items()}
        self.histograms = {int(c): np.asarray(h, dtype=np.int64) for c, h in raw["histograms"].items()}
        self.measured = int(raw["measured"])

    def channel_moments(self, channels: int) -> tuple[list[float], list[float]]:
        """The mean and population std of each channel, on the 0-255 scale, over every measured pixel."""
        histogram = self.histograms[channels]
        levels = np.arange(LEVELS, dtype=np.float64)
        n = histogram.sum(axis=1).astype(np.float64)
        mean = (histogram @ levels) / n
        var = (histogram @ (levels * levels)) / n - mean * mean
        return mean.tolist(), np.sqrt(np.maximum(var, 0.0)).tolist()


KINDS: dict[str, type[FeatureStats]] = {k.role: k for k in (NumberStats, AreaStats, BytesStats, StringStats, PictureStats)}


def from_data(raw: Mapping[str, Any]) -> FeatureStats:
    made = KINDS[raw["role"]]()
    made.load(raw)
    return made


def pixel_histogram(array: np.ndarray) -> np.ndarray | None:
    """[channels, 256] counts of an 8-bit picture's values (OpenCV's histogram: about 0.5 ms for
    512x512x3, a tenth of a JPEG encode); None for other depths, which are not measured."""
    if array.dtype != np.uint8:
        return None
    import cv2

    image = np.ascontiguousarray(array[..., None] if array.ndim == 2 else array)
    if image.shape[0] * image.shape[1] >= EXACT_FLOAT32:  # OpenCV counts in float32: exact below 2**24 a bin
        return np.stack([np.bincount(image[..., c].ravel(), minlength=LEVELS) for c in range(image.shape[2])]).astype(np.int64)
    counted = [cv2.calcHist([image], [c], None, [LEVELS], [0, LEVELS]).reshape(LEVELS) for c in range(image.shape[2])]
    return np.stack(counted).astype(np.int64)
