"""Compare two ``DatasetFeatureStatisticsList`` protos, shardkit's and TFDV's, feature by feature.

What is compared, per dataset (split) and feature, and why so:

- the features present and each dataset's ``num_examples``: equal;
- common stats (``num_non_missing``, ``num_missing``, ``min/max/avg/tot_num_values``): equal, the
  average to float tolerance;
- numbers: ``min``, ``max``, ``mean``, ``std_dev`` to float tolerance (both sum float32 values in
  float64, in other orders), ``num_zeros`` equal; the ten equal-count quantile boundaries and the
  median are sketches on both sides, so each is checked against the true values (``truth``): the
  rank the boundary has in them must be within shardkit's stated rank error
  (``quantiles_rank_error``) of the boundary's; TFDV's own rank error is printed beside it;
- strings: ``unique`` equal where shardkit counts exactly (else within 3 %), ``avg_length``
  (``avg_num_bytes`` where shardkit keeps the feature as bytes, e.g. images: TFDV without a schema
  calls every bytes list a STRING), and the top values: the same counts in the same order, and the
  same values above the last count (values tied at the last count are a free choice of either side);
- equal-width histograms are left out: TFDV draws them from its quantile sketch, so they are estimates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

REL = 1e-6  # relative tolerance of float fields
ABS = 1e-9


@dataclasses.dataclass(frozen=True)
class Difference:
    split: str
    feature: str
    field: str
    ours: Any
    tfdv: Any

    def row(self) -> str:
        return f"{self.split:10} {self.feature:24} {self.field:28} {_show(self.ours):>22} {_show(self.tfdv):>22}"


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.9g}"
    text = str(value)
    return text if len(text) <= 22 else text[:19] + "..."


def features_of(dataset: Any) -> dict[str, Any]:
    return {".".join(f.path.step) or f.name: f for f in dataset.features}


def custom(feature: Any, name: str) -> float | None:
    for stat in feature.custom_stats:
        if stat.name == name:
            return float(stat.num)
    return None


def compare(ours: Any, tfdv: Any, truth: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> tuple[list[Difference], list[str]]:
    """Differences between the two lists' datasets (paired by name, or the only one of each), and
    notes on what was checked. ``truth[split][feature]``: the feature's values, flat, sorted."""
    differences: list[Difference] = []
    notes: list[str] = []
    pairs = _pairs(ours, tfdv, differences)
    for split, mine, theirs in pairs:
        if mine.num_examples != theirs.num_examples:
            differences.append(Difference(split, "-", "num_examples", mine.num_examples, theirs.num_examples))
        my_features, their_features = features_of(mine), features_of(theirs)
        for name in sorted(set(my_features) | set(their_features)):
            if name not in my_features or name not in their_features:
                differences.append(Difference(split, name, "present", name in my_features, name in their_features))
                continue
            found = _feature(split, name, my_features[name], their_features[name], (truth or {}).get(split, {}).get(name), notes)
            differences.extend(found)
    return differences, notes


def _pairs(ours: Any, tfdv: Any, differences: list[Difference]) -> list[tuple[str, Any, Any]]:
    if len(ours.datasets) == 1 and len(tfdv.datasets) == 1:
        return [(ours.datasets[0].name or "-", ours.datasets[0], tfdv.datasets[0])]
    mine = {d.name: d for d in ours.datasets}
    theirs = {d.name: d for d in tfdv.datasets}
    for name in sorted(set(mine) ^ set(theirs)):
        differences.append(Difference(name, "-", "dataset present", name in mine, name in theirs))
    return [(name, mine[name], theirs[name]) for name in sorted(set(mine) & set(theirs))]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=ABS)


def _common(mine: Any, theirs: Any) -> Iterable[tuple[str, Any, Any, bool]]:
    for field in ("num_non_missing", "num_missing", "min_num_values", "max_num_values", "tot_num_values"):
        a, b = getattr(mine, field), getattr(theirs, field)
        yield field, a, b, a == b
    yield "avg_num_values", mine.avg_num_values, theirs.avg_num_values, _close(mine.avg_num_values, theirs.avg_num_values)


def _feature(split: str, name: str, mine: Any, theirs: Any, values: np.ndarray | None, notes: list[str]) -> list[Difference]:
    out: list[Difference] = []
    kind_mine, kind_theirs = mine.WhichOneof("stats"), theirs.WhichOneof("stats")
    if kind_mine == "num_stats" or kind_theirs == "num_stats":
        if kind_mine != kind_theirs:
            return [Difference(split, name, "stats kind", kind_mine, kind_theirs)]
        a, b = mine.num_stats, theirs.num_stats
        checks = list(_common(a.common_stats, b.common_stats))
        for field in ("min", "max", "mean", "std_dev"):
            checks.append((field, getattr(a, field), getattr(b, field), _close(getattr(a, field), getattr(b, field))))
        checks.append(("num_zeros", a.num_zeros, b.num_zeros, a.num_zeros == b.num_zeros))
        out += [Difference(split, name, f, x, y) for f, x, y, same in checks if not same]
        out += _quantiles(split, name, mine, theirs, values, notes)
        return out
    their_strings = theirs.string_stats if kind_theirs == "string_stats" else None
    if their_strings is None:
        return [Difference(split, name, "stats kind", kind_mine, kind_theirs)]
    if kind_mine == "bytes_stats":
        a = mine.bytes_stats
        checks = list(_common(a.common_stats, their_strings.common_stats))
        length, their_length = a.avg_num_bytes, their_strings.avg_length
        checks.append(("avg_num_bytes~avg_length", length, their_length, _close(length, their_length)))
        out += [Difference(split, name, f, x, y) for f, x, y, same in checks if not same]
        return out
    a = mine.string_stats
    checks = list(_common(a.common_stats, their_strings.common_stats))
    checks.append(("avg_length", a.avg_length, their_strings.avg_length, _close(a.avg_length, their_strings.avg_length)))
    estimate = custom(mine, "unique_is_estimate")
    same_unique = a.unique == their_strings.unique if not estimate else abs(a.unique - their_strings.unique) <= 0.03 * their_strings.unique
    checks.append(("unique" + (" (estimate)" if estimate else ""), a.unique, their_strings.unique, same_unique))
    out += [Difference(split, name, f, x, y) for f, x, y, same in checks if not same]
    out += _top_values(split, name, a.top_values, their_strings.top_values)
    return out


def _top_values(split: str, name: str, mine: Any, theirs: Any) -> list[Difference]:
    my_counts = [int(v.frequency) for v in mine]
    their_counts = [int(v.frequency) for v in theirs]
    if my_counts != their_counts:
        return [Difference(split, name, "top value counts", my_counts[:6], their_counts[:6])]
    if not my_counts:
        return []
    last = my_counts[-1]
    above_mine = {v.value: int(v.frequency) for v in mine if v.frequency > last}
    above_theirs = {v.value: int(v.frequency) for v in theirs if v.frequency > last}
    if above_mine != above_theirs:
        only = sorted(set(above_mine.items()) ^ set(above_theirs.items()))
        return [Difference(split, name, "top values", only[:3], f"{len(only)} differ")]
    return []


def _boundaries(feature: Any) -> list[float]:
    for histogram in feature.num_stats.histograms:
        if histogram.type == histogram.QUANTILES and histogram.buckets:
            return [histogram.buckets[0].low_value] + [b.high_value for b in histogram.buckets]
    return []


def rank_error(values: np.ndarray, value: float, q: float) -> float:
    """How far ``q`` lies from the ranks ``value`` holds in the sorted ``values`` (0 inside them)."""
    low = np.searchsorted(values, value, side="left") / len(values)
    high = np.searchsorted(values, value, side="right") / len(values)
    return 0.0 if low <= q <= high else float(min(abs(q - low), abs(q - high)))


def _quantiles(split: str, name: str, mine: Any, theirs: Any, values: np.ndarray | None, notes: list[str]) -> list[Difference]:
    ours, tfdv = _boundaries(mine), _boundaries(theirs)
    if len(ours) != len(tfdv):
        return [Difference(split, name, "quantile buckets", len(ours) - 1, len(tfdv) - 1)]
    if values is None or not len(values) or len(ours) < 3:
        notes.append(f"{split}/{name}: quantiles not checked (no true values given)")
        return []
    stated = custom(mine, "quantiles_rank_error")
    allowed = stated if stated is not None else 0.01
    inner = len(ours) - 1
    points = [(f"quantile {i}/{inner}", i / inner, ours[i], tfdv[i]) for i in range(1, inner)]
    points.append(("median", 0.5, mine.num_stats.median, theirs.num_stats.median))
    worst_ours = worst_tfdv = 0.0
    out = []
    for label, q, a, b in points:
        error_ours, error_tfdv = rank_error(values, a, q), rank_error(values, b, q)
        worst_ours, worst_tfdv = max(worst_ours, error_ours), max(worst_tfdv, error_tfdv)
        if error_ours > allowed + 1e-12:
            field = f"{label} rank error > {allowed:.4g}"
            out.append(Difference(split, name, field, f"{a:.6g} ({error_ours:.4f})", f"{b:.6g} ({error_tfdv:.4f})"))
    notes.append(f"{split}/{name}: quantile rank error, shardkit {worst_ours:.4f} (stated {allowed:.4g}), TFDV {worst_tfdv:.4f}")
    return out
