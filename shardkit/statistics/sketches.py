"""The mergeable summaries statistics are made of: moments, quantiles (a KLL sketch) and
distinct values (exact up to a bound, then a HyperLogLog estimate and a frequent-items sketch).

Each is small, merges exactly as its data would (the sketches within their stated error), and
round-trips through plain JSON data (sketch bytes as base64), which a shard's record carries.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

KLL_K = 200  # the KLL sketch's size: normalized rank error about 1.3 % (datasketches' bound, 99 % confidence)
DISTINCT_EXACT = 1_000  # distinct values counted exactly up to this many a feature (a shard record stays small); then estimated
HLL_LG_K = 12  # HyperLogLog with 4,096 registers: relative error about 1.6 % (one standard deviation)
FREQUENT_LG_K = 10  # the frequent-items sketch beyond the exact bound: 1,024 counters
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
        return cls(n, mean, float(np.dot(centred, centred)))

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
    past that, the number of distinct values is a HyperLogLog estimate and the top values come
    from a frequent-items sketch (``exact`` says which, and ``top_error`` the counts' bound)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] | None = {}
        self.hll: Any = None
        self.frequent: Any = None

    @property
    def exact(self) -> bool:
        return self.counts is not None

    def add_counts(self, counts: Mapping[str, int]) -> None:
        if self.counts is not None:
            known = self.counts
            for value, n in counts.items():
                known[value] = known.get(value, 0) + n
            if len(known) > DISTINCT_EXACT:
                self._estimate()
            return
        for value, n in counts.items():
            self.hll.update(value)
            self.frequent.update(value, n)

    def add(self, values: Iterable[str]) -> None:
        counts: dict[str, int] = {}
        for value in values:
            counts[value] = counts.get(value, 0) + 1
        self.add_counts(counts)

    def _estimate(self) -> None:
        """From exact counts to sketches, once a feature has too many values to keep them all."""
        from datasketches import frequent_strings_sketch, hll_sketch

        counts, self.counts = self.counts or {}, None
        self.hll = hll_sketch(HLL_LG_K)
        self.frequent = frequent_strings_sketch(FREQUENT_LG_K)
        self.add_counts(counts)

    def merge(self, other: Distinct) -> None:
        if other.counts is not None:
            self.add_counts(other.counts)
            return
        if self.counts is not None:
            self._estimate()
        from datasketches import hll_union

        union = hll_union(HLL_LG_K)
        union.update(self.hll)
        union.update(other.hll)
        self.hll = union.get_result()
        self.frequent.merge(other.frequent)

    @property
    def unique(self) -> int:
        return len(self.counts) if self.counts is not None else round(self.hll.get_estimate())

    def top(self, n: int = TOP) -> list[tuple[str, int]]:
        """The ``n`` most frequent values and their counts, most frequent first (ties by value)."""
        if self.counts is not None:
            return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        from datasketches import frequent_items_error_type

        rows = self.frequent.get_frequent_items(frequent_items_error_type.NO_FALSE_NEGATIVES)
        return sorted(((str(r[0]), int(r[1])) for r in rows), key=lambda kv: (-kv[1], kv[0]))[:n]

    @property
    def top_error(self) -> int:
        """The most a top value's count may be off by (0 while counts are exact)."""
        return 0 if self.frequent is None else math.ceil(self.frequent.epsilon * self.frequent.total_weight)

    def to_data(self) -> dict[str, Any]:
        if self.counts is not None:
            return {"counts": self.counts}
        return {"hll": _b64(self.hll.serialize_compact()), "frequent": _b64(self.frequent.serialize())}

    @classmethod
    def from_data(cls, raw: Mapping[str, Any]) -> Distinct:
        from datasketches import frequent_strings_sketch, hll_sketch

        made = cls()
        if "counts" in raw:
            made.counts = {str(k): int(v) for k, v in raw["counts"].items()}
            return made
        made.counts = None
        made.hll = hll_sketch.deserialize(_unb64(raw["hll"]))
        made.frequent = frequent_strings_sketch.deserialize(_unb64(raw["frequent"]))
        return made
