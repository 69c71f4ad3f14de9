"""The mergeable summaries statistics are made of: moments, quantiles (a KLL sketch) and
distinct values (exact up to a bound, then a HyperLogLog estimate and a Misra-Gries summary).

Each is small, merges exactly as its data would (the sketches within their stated error), and
round-trips through plain JSON data (sketch bytes as base64), which a shard's record carries.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

KLL_K = 200  # the KLL sketch's size: normalized rank error about 1.3 % (datasketches' bound, 99 % confidence)
DISTINCT_EXACT = 1_000  # distinct values counted exactly up to this many a feature (a shard record stays small); then estimated
HLL_LG_K = 12  # HyperLogLog with 4,096 registers: relative error about 1.6 % (1.04/sqrt(4096), one standard deviation)
FREQUENT = 1024  # counters of the Misra-Gries summary of top values beyond the exact bound
TOP = 20  # the most frequent values a feature reports


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


class Moments:
    """Count, mean and sum of squared deviations (Welford's M2), merged by Chan's formula: no
    cancellation where values are large and close together, as a sum of squares would suffer."""

    __slots__ = ("m2", "mean", "n")

    def __init__(self, n: int = 0, mean: float = 0.0, m2: float = 0.0) -> None:
        self.n, self.mean, self.m2 = n, mean, m2

    @classmethod
    def of(cls, values: np.ndarray) -> Moments:
        n = int(values.size)
        if not n:
            return cls()
        mean = float(values.mean(dtype=np.float64))
        centred = values.astype(np.float64, copy=False) - mean
        return cls(n, mean, float(np.square(centred, out=centred).sum()))  # not np.dot: BLAS threads would spin in workers

    def merge(self, other: Moments) -> None:
        if not other.n:
            return
        n = self.n + other.n
        delta = other.mean - self.mean
        self.mean += delta * other.n / n
        self.m2 += other.m2 + delta * delta * self.n * other.n / n
        self.n = n

    @property
    def std(self) -> float:
        """The population standard deviation (as TFDV reports it and ``Normalize`` takes it)."""
        return math.sqrt(max(self.m2, 0.0) / self.n) if self.n else 0.0

    def to_list(self) -> list[float]:
        return [self.n, self.mean, self.m2]

    @classmethod
    def from_list(cls, raw: list[Any]) -> Moments:
        return cls(int(raw[0]), float(raw[1]), float(raw[2]))


class Quantiles:
    """A KLL sketch of doubles: quantiles and histograms within ``rank_error`` of the exact ones."""

    def __init__(self, sketch: Any = None) -> None:
        from datasketches import kll_doubles_sketch

        self.sketch = sketch if sketch is not None else kll_doubles_sketch(KLL_K)

    def update(self, values: np.ndarray) -> None:
        if values.size:
            self.sketch.update(np.ascontiguousarray(values, dtype=np.float64))

    def merge(self, other: Quantiles) -> None:
        self.sketch.merge(other.sketch)

    @property
    def empty(self) -> bool:
        return bool(self.sketch.is_empty())

    @property
    def rank_error(self) -> float:
        """The sketch's bound on the error of a quantile's rank, as a fraction of the count."""
        return float(self.sketch.normalized_rank_error(False))

    def quantiles(self, buckets: int) -> list[float]:
        """The ``buckets + 1`` boundaries of equal-count buckets: the minimum, ..., the maximum."""
        if self.empty:
            return []
        return [float(q) for q in self.sketch.get_quantiles([i / buckets for i in range(buckets + 1)])]

    def counts_below(self, edges: list[float]) -> list[float]:
        """Estimated counts in [edges[i], edges[i+1]) (the last bucket closed), from the sketch's CDF."""
        n = self.sketch.n
        cdf = self.sketch.get_cdf(edges[1:-1], False) if len(edges) > 2 else [1.0]
        ranks = [0.0, *cdf[: len(edges) - 2], 1.0]
        return [max(0.0, (ranks[i + 1] - ranks[i]) * n) for i in range(len(edges) - 1)]

    def to_data(self) -> str:
        return _b64(self.sketch.serialize())

    @classmethod
    def from_data(cls, text: str) -> Quantiles:
        from datasketches import kll_doubles_sketch

        return cls(kll_doubles_sketch.deserialize(_unb64(text)))


class Distinct:
    """How many of each value, exactly while a feature has at most ``DISTINCT_EXACT`` values;
    past that, the number of distinct values is a HyperLogLog estimate (``Registers``) and the top
    values come from a Misra-Gries summary of ``FREQUENT`` counters, each count at most
    ``top_error`` below the true one (``exact`` says which). Values come as Arrow arrays, a batch
    at a time: past the bound no value is touched one by one in Python."""

    def __init__(self) -> None:
        self.counts: dict[str, int] | None = {}
        self.registers: Registers | None = None
        self.frequent: dict[str, int] = {}
        self.error = 0  # the most any count in ``frequent`` is below the truth

    @property
    def exact(self) -> bool:
        return self.counts is not None

    def add_array(self, values: Any) -> None:
        """A batch of values: an Arrow string or binary array without nulls."""
        import pyarrow.compute as pc

        if not len(values):
            return
        counted = pc.value_counts(values)
        if self.counts is not None and len(counted) + len(self.counts) <= DISTINCT_EXACT * 2:
            self._count(dict(zip(map(_text, counted.field("values").to_pylist()), counted.field("counts").to_pylist(), strict=True)))
            return
        if self.counts is not None:
            self._estimate()
        assert self.registers is not None
        self.registers.add(values)
        counts = counted.field("counts").to_numpy()
        if len(counts) > FREQUENT:  # the chunk's own summary: its FREQUENT largest, each off by at most the next
            order = np.argpartition(-counts, FREQUENT)
            self.error += int(counts[order[FREQUENT]])
            keep = order[:FREQUENT]
            names = counted.field("values").take(keep).to_pylist()
            counts = counts[keep]
        else:
            names = counted.field("values").to_pylist()
        self._summarize(dict(zip(map(_text, names), counts.tolist(), strict=True)))

    def add(self, values: Iterable[bytes]) -> None:
        import pyarrow as pa

        self.add_array(pa.array(list(values), pa.large_binary()))

    def _count(self, counts: Mapping[str, int]) -> None:
        known = self.counts
        assert known is not None
        for value, n in counts.items():
            known[value] = known.get(value, 0) + n
        if len(known) > DISTINCT_EXACT:
            self._estimate()

    def _estimate(self) -> None:
        """From exact counts to the sketches, once a feature has too many values to keep them all."""
        import pyarrow as pa

        counts, self.counts = self.counts or {}, None
        self.registers = Registers()
        self.registers.add(pa.array([v.encode("utf-8", "surrogateescape") for v in counts], pa.large_binary()))
        self.frequent, self.error = {}, 0
        self._summarize(counts)

    def _summarize(self, counts: Mapping[str, int]) -> None:
        """Misra-Gries: add the counts, then while more than FREQUENT values are kept, take the
        (FREQUENT+1)-th largest count off every one (the bound grows by it) and drop those at zero."""
        known = self.frequent
        for value, n in counts.items():
            known[value] = known.get(value, 0) + n
        if len(known) > FREQUENT:
            cut = sorted(known.values(), reverse=True)[FREQUENT]
            self.frequent = {v: n - cut for v, n in known.items() if n > cut}
            self.error += cut

    def merge(self, other: Distinct) -> None:
        if other.counts is not None:
            if self.counts is not None:
                self._count(other.counts)
            else:
                import pyarrow as pa

                assert self.registers is not None
                self.registers.add(pa.array([v.encode("utf-8", "surrogateescape") for v in other.counts], pa.large_binary()))
                self._summarize(other.counts)
            return
        if self.counts is not None:
            self._estimate()
        assert self.registers is not None and other.registers is not None
        self.registers.merge(other.registers)
        self.error += other.error
        self._summarize(other.frequent)

    @property
    def unique(self) -> int:
        if self.counts is not None:
            return len(self.counts)
        assert self.registers is not None
        return round(self.registers.estimate())

    def top(self, n: int = TOP) -> list[tuple[str, int]]:
        """The ``n`` most frequent values and their counts, most frequent first (ties by value)."""
        found = self.counts if self.counts is not None else self.frequent
        return sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    @property
    def top_error(self) -> int:
        """The most a top value's count may be below the truth (0 while counts are exact)."""
        return self.error

    def to_data(self) -> dict[str, Any]:
        if self.counts is not None:
            return {"counts": self.counts}
        assert self.registers is not None
        return {"registers": _b64(self.registers.cells.tobytes()), "frequent": self.frequent, "error": self.error}

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> Distinct:
        made = cls()
        if "counts" in raw:
            made.counts = {str(k): int(v) for k, v in raw["counts"].items()}
            return made
        made.counts = None
        made.registers = Registers(np.frombuffer(_unb64(raw["registers"]), dtype=np.uint8).copy())
        made.frequent = {str(k): int(v) for k, v in raw["frequent"].items()}
        made.error = int(raw["error"])
        return made


def _text(value: Any) -> str:
    """A value as counted and shown: UTF-8 text where it is, each stray byte kept as an escape."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "surrogateescape")


class Registers:
    """HyperLogLog with 2**HLL_LG_K six-bit registers over a 64-bit hash of each value
    (``value_hashes``), all in NumPy; merged by taking the larger register."""

    def __init__(self, cells: np.ndarray | None = None) -> None:
        self.cells = cells if cells is not None else np.zeros(1 << HLL_LG_K, dtype=np.uint8)

    def add(self, values: Any) -> None:
        hashes = value_hashes(values)
        where = (hashes >> np.uint64(64 - HLL_LG_K)).astype(np.intp)
        rest = (hashes & np.uint64((1 << (64 - HLL_LG_K)) - 1)).astype(np.float64)  # exact: below 2**53
        _, bits = np.frexp(rest)  # the rest's bit length (0 for 0)
        rank = (64 - HLL_LG_K + 1 - bits).astype(np.uint8)  # leading zeros in the rest, plus one
        np.maximum.at(self.cells, where, rank)

    def merge(self, other: Registers) -> None:
        np.maximum(self.cells, other.cells, out=self.cells)

    def estimate(self) -> float:
        m = float(len(self.cells))
        raw = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(np.ldexp(1.0, -self.cells.astype(np.int64))))
        zeros = int(np.count_nonzero(self.cells == 0))
        return m * math.log(m / zeros) if raw <= 2.5 * m and zeros else raw  # few values: linear counting


_P = 0x100000001B3  # odd: invertible modulo 2**64
_P_INVERSE = pow(_P, -1, 1 << 64)
_HASH_BYTES = 1 << 20  # values hashed together: up to 1 MB of their bytes (8 MB tables of powers, made once)


def value_hashes(values: Any) -> np.ndarray:
    """A 64-bit hash of each value of an Arrow string or binary array, vectorized: a polynomial
    hash of its bytes modulo 2**64 (from prefix sums of the bytes times falling powers, each value's
    span scaled back by the inverse powers), its length mixed in, then SplitMix64's finalizer."""
    import pyarrow as pa

    array = values.cast(pa.large_binary()) if values.type != pa.large_binary() else values
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8) if array.buffers()[2] is not None else np.zeros(0, np.uint8)
    out = np.empty(len(array), dtype=np.uint64)
    start = 0
    with np.errstate(over="ignore"):
        while start < len(array):
            stop = int(np.searchsorted(offsets, offsets[start] + _HASH_BYTES, side="right")) - 1
            stop = min(max(stop, start + 1), len(array))
            out[start:stop] = _span_hashes(data[offsets[start] : offsets[stop]], offsets[start : stop + 1] - offsets[start])
            start = stop
    return out


@functools.cache
def _powers() -> tuple[np.ndarray, np.ndarray]:
    """P**k and P**-k for k = 0 .. the most bytes hashed together, plus one."""
    size = _HASH_BYTES + 2
    with np.errstate(over="ignore"):
        up = np.cumprod(np.full(size, _P, dtype=np.uint64))
        down = np.cumprod(np.full(size, _P_INVERSE, dtype=np.uint64))
    return np.concatenate([[np.uint64(1)], up[:-1]]), np.concatenate([[np.uint64(1)], down[:-1]])


def _span_hashes(data: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    n = len(data)
    up, down = _powers()
    if n + 1 >= len(up):  # one value longer than the tables: its own powers
        up = np.concatenate([[np.uint64(1)], np.cumprod(np.full(n + 1, _P, dtype=np.uint64))])
        down = np.concatenate([[np.uint64(1)], np.cumprod(np.full(n + 1, _P_INVERSE, dtype=np.uint64))])
    falling = up[n + 1 : 0 : -1]  # P**(n+1-j) for j = 0..n
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(data.astype(np.uint64) * falling[1:], out=prefix[1:])
    inverse = down[1:]  # P**-(k+1) for k = 0..
    starts, stops = bounds[:-1], bounds[1:]
    h = (prefix[stops] - prefix[starts]) * inverse[n - stops]
    h ^= (stops - starts).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return splitmix64_finish(h)


def splitmix64_finish(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over uint64s, in place: every input bit moves every output bit."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return np.asarray(x, dtype=np.uint64)
