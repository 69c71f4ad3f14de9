"""One feature's statistics in one shard or split: numbers, strings, bytes or pictures.

Each class takes values in NumPy batches (``update``), merges with another of its kind
(``merge``) and round-trips through plain data (``to_data``/``from_data``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from shardkit.formats.example_proto import FLOAT, INT64
from shardkit.statistics.sketches import Distinct, Moments, Quantiles

LEVELS = 256  # an 8-bit channel's values: a picture's histogram has this many bins a channel
EXACT_FLOAT32 = 1 << 24
HISTOGRAM_ROW_STEP = 4  # a picture's histogram counts every 4th row: a sample for the picture of the distribution


class ValueLists:
    """How many values each record holds (a scalar feature: one), as TFDV's common statistics say
    it: counted exactly per length (a feature has few), a quantile sketch only past ``LENGTHS``."""

    LENGTHS = 1024  # distinct list lengths counted exactly

    def __init__(self) -> None:
        self.records = 0
        self.total = 0
        self.least: int | None = None
        self.most: int | None = None
        self.counts: dict[int, int] | None = {}  # length -> records; None once past LENGTHS
        self.sketch: Quantiles | None = None

    def update(self, lengths: np.ndarray) -> None:
        if not lengths.size:
            return
        self.records += int(lengths.size)
        self.total += int(lengths.sum())
        lo, hi = int(lengths.min()), int(lengths.max())
        self.least = lo if self.least is None else min(self.least, lo)
        self.most = hi if self.most is None else max(self.most, hi)
        if self.counts is not None:
            found = (
                {lo: int(lengths.size)}
                if lo == hi
                else dict(zip(*(a.tolist() for a in np.unique(lengths, return_counts=True)), strict=True))
            )
            for length, n in found.items():
                self.counts[length] = self.counts.get(length, 0) + n
            if len(self.counts) > self.LENGTHS:
                self._sketched()
        else:
            assert self.sketch is not None
            self.sketch.update(lengths)

    def _sketched(self) -> None:
        counts, self.counts = self.counts or {}, None
        self.sketch = Quantiles()
        for length, n in counts.items():
            self.sketch.update(np.full(n, length, dtype=np.float64))

    def merge(self, other: ValueLists) -> None:
        self.records += other.records
        self.total += other.total
        for name, pick in (("least", min), ("most", max)):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else pick(mine, theirs))
        if self.counts is not None and other.counts is not None:
            for length, n in other.counts.items():
                self.counts[length] = self.counts.get(length, 0) + n
            if len(self.counts) > self.LENGTHS:
                self._sketched()
            return
        if self.counts is not None:
            self._sketched()
        assert self.sketch is not None
        if other.counts is not None:
            for length, n in other.counts.items():
                self.sketch.update(np.full(n, length, dtype=np.float64))
        else:
            assert other.sketch is not None
            self.sketch.merge(other.sketch)

    def quantiles(self, buckets: int) -> list[float]:
        """The ``buckets + 1`` boundaries of equal-count buckets of the lengths (exact while counted)."""
        if self.counts is None:
            assert self.sketch is not None
            return self.sketch.quantiles(buckets)
        if not self.counts:
            return []
        lengths = np.array(sorted(self.counts), dtype=np.float64)
        cumulative = np.cumsum([self.counts[int(v)] for v in lengths])
        ranks = [min(int(np.ceil(i / buckets * self.records)), self.records) for i in range(buckets + 1)]
        return [float(lengths[min(int(np.searchsorted(cumulative, max(r, 1))), len(lengths) - 1)]) for r in ranks]

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"records": self.records, "total": self.total, "least": self.least, "most": self.most}
        if self.counts is not None:
            out["counts"] = {str(k): v for k, v in self.counts.items()}
        else:
            assert self.sketch is not None
            out["sketch"] = self.sketch.to_data()
        return out

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> ValueLists:
        made = cls()
        made.records, made.total, made.least, made.most = int(raw["records"]), int(raw["total"]), raw["least"], raw["most"]
        if "counts" in raw:
            made.counts = {int(k): int(v) for k, v in raw["counts"].items()}
        else:
            made.counts, made.sketch = None, Quantiles.from_data(raw["sketch"])
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


@dataclasses.dataclass(frozen=True)
class PixelCount:
    """One picture's pixels, counted: each channel's mean and population std over every pixel
    (exact, in double precision), and a 256-bin histogram of every ``HISTOGRAM_ROW_STEP``-th row."""

    pixels: int
    means: tuple[float, ...]
    stds: tuple[float, ...]
    histogram: np.ndarray  # int64 [channels, 256]


class PictureStats(BytesStats):
    """A picture: its encoded sizes (as bytes), formats, and for the pixels the build held (decoded,
    augmented: the arrays handed to the encoder), per channel count, each channel's mean and std
    over every pixel (merged exactly) and a histogram of sampled rows."""

    role = "picture"

    def __init__(self) -> None:
        super().__init__()
        self.formats: dict[str, int] = {}
        self.histograms: dict[int, np.ndarray] = {}  # channels -> int64 [channels, 256]: pictures with that many
        self.moments: dict[int, list[Moments]] = {}  # channels -> each channel's moments
        self.measured = 0  # pictures whose pixels are counted

    def picture(self, image_format: str) -> None:
        self.formats[image_format] = self.formats.get(image_format, 0) + 1

    def pixels(self, count: PixelCount) -> None:
        """One picture's pixels (``pixel_count``)."""
        channels = int(count.histogram.shape[0])
        known = self.histograms.get(channels)
        if known is None:
            self.histograms[channels] = count.histogram.astype(np.int64)
            self.moments[channels] = [Moments() for _ in range(channels)]
        else:
            known += count.histogram
        for moments, mean, std in zip(self.moments[channels][: len(count.means)], count.means, count.stds, strict=True):  # a mask: none
            moments.merge(Moments(count.pixels, mean, std * std * count.pixels))
        self.measured += 1

    def merge(self, other: FeatureStats) -> None:
        assert isinstance(other, PictureStats)
        super().merge(other)
        for name, n in other.formats.items():
            self.formats[name] = self.formats.get(name, 0) + n
        for channels, histogram in other.histograms.items():
            if channels in self.histograms:
                self.histograms[channels] = self.histograms[channels] + histogram
                for mine, theirs in zip(self.moments[channels], other.moments[channels], strict=True):
                    mine.merge(theirs)
            else:
                self.histograms[channels] = histogram.copy()
                self.moments[channels] = [Moments(m.n, m.mean, m.m2) for m in other.moments[channels]]
        self.measured += other.measured

    def to_data(self) -> dict[str, Any]:
        histograms = {str(c): h.tolist() for c, h in self.histograms.items()}
        moments = {str(c): [m.to_list() for m in ms] for c, ms in self.moments.items()}
        return {**super().to_data(), "formats": self.formats, "histograms": histograms, "moments": moments, "measured": self.measured}

    def load(self, raw: Mapping[str, Any]) -> None:
        super().load(raw)
        self.formats = {str(k): int(v) for k, v in raw["formats"].items()}
        self.histograms = {int(c): np.asarray(h, dtype=np.int64) for c, h in raw["histograms"].items()}
        self.moments = {int(c): [Moments.from_list(m) for m in ms] for c, ms in raw["moments"].items()}
        self.measured = int(raw["measured"])

    def channel_moments(self, channels: int) -> tuple[list[float], list[float]]:
        """The mean and population std of each channel, on the 0-255 scale, over every measured pixel."""
        moments = [m for m in self.moments[channels] if m.n]  # none for a mask
        return [m.mean for m in moments], [m.std for m in moments]


class MaskStats(PictureStats):
    """A mask: its pixels are class ids, so only their histogram (pixels per class, sampled rows) is
    counted, not moments."""

    role = "mask"


KINDS: dict[str, type[FeatureStats]] = {k.role: k for k in (NumberStats, AreaStats, BytesStats, StringStats, PictureStats, MaskStats)}


def from_data(raw: Mapping[str, Any]) -> FeatureStats:
    made = KINDS[raw["role"]]()
    made.load(raw)
    return made


def pixel_count(array: np.ndarray, moments: bool = True) -> PixelCount | None:
    """An 8-bit picture's pixels counted (OpenCV: one pass for the means and stds, unless not
    ``moments`` (a mask's class ids), and histograms of a quarter of the rows: for a 640x480x3
    picture about a tenth of its JPEG encode); None for other depths, which are not measured."""
    if array.dtype != np.uint8:
        return None
    import cv2

    image = array[..., None] if array.ndim == 2 else array
    means, stds = cv2.meanStdDev(np.ascontiguousarray(image)) if moments else (np.zeros(0), np.zeros(0))
    rows = np.ascontiguousarray(image[::HISTOGRAM_ROW_STEP])
    if rows.shape[0] * rows.shape[1] >= EXACT_FLOAT32:  # OpenCV counts in float32: exact below 2**24 a bin
        counted: list[Any] = [np.bincount(rows[..., c].ravel(), minlength=LEVELS) for c in range(rows.shape[2])]
    else:
        counted = [cv2.calcHist([rows], [c], None, [LEVELS], [0, LEVELS]).reshape(LEVELS) for c in range(rows.shape[2])]
    pixels = int(image.shape[0] * image.shape[1])
    return PixelCount(pixels, tuple(means.ravel().tolist()), tuple(stds.ravel().tolist()), np.stack(counted).astype(np.int64))
