"""The mergeable pieces: moments merge as one pass over all values would; distinct values exact up
to the bound, then within HyperLogLog's error; top values within the summary's stated bound."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa

from shardkit.statistics.sketches import DISTINCT_EXACT, Distinct, Moments, Quantiles, value_hashes


def test_moments_merged_in_any_split_equal_the_whole() -> None:
    values = np.random.default_rng(1).normal(1e9, 2.5, 10_001)  # large, close together: no cancellation
    merged = Moments()
    for part in np.array_split(values, 7):
        merged.merge(Moments.of(part))
    assert merged.n == len(values)
    np.testing.assert_allclose(merged.mean, values.mean(), rtol=1e-15)
    np.testing.assert_allclose(merged.std, values.std(), rtol=1e-9)


def test_quantiles_are_within_the_stated_rank_error() -> None:
    values = np.random.default_rng(2).exponential(3.0, 200_000)
    sketch = Quantiles()
    for part in np.array_split(values, 13):
        other = Quantiles()
        other.update(part)
        sketch.merge(Quantiles.from_data(other.to_data()))
    ordered = np.sort(values)
    for i, q in enumerate(sketch.quantiles(10)):
        rank = np.searchsorted(ordered, q, side="right") / len(values)
        assert abs(rank - i / 10) <= sketch.rank_error + 1e-6


def _words(rng: np.random.Generator, n: int, vocabulary: int) -> list[bytes]:
    return [f"w{int(x) % vocabulary}".encode() for x in rng.zipf(1.3, n)]


def test_distinct_values_are_exact_up_to_the_bound_and_then_within_the_estimate_error() -> None:
    rng = np.random.default_rng(3)
    few = _words(rng, 20_000, DISTINCT_EXACT // 2)
    exact = Distinct()
    exact.add(few)
    counts = Counter(v.decode() for v in few)
    assert exact.exact and exact.unique == len(counts)
    assert exact.top() == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    many = [f"item-{i}-{x}".encode() for i, x in enumerate(rng.integers(0, 50, 300_000))] + _words(rng, 100_000, 10)
    parts = [Distinct() for _ in range(4)]
    for i, part in enumerate(parts):
        part.add_array(pa.array(many[i::4], pa.large_binary()))
    merged = Distinct.from_data(json.loads(json.dumps(parts[0].to_data())))
    for part in parts[1:]:
        merged.merge(part)
    truth = Counter(v.decode() for v in many)
    assert not merged.exact
    assert abs(merged.unique - len(truth)) <= 0.05 * len(truth)  # 1.6 % one standard deviation: 3 of them
    for value, count in merged.top(5):
        assert truth[value] - merged.top_error <= count <= truth[value]
    assert [v for v, _ in merged.top(3)] == [v for v, _ in truth.most_common(3)]


def test_a_value_hashes_alike_wherever_it_stands() -> None:
    first = value_hashes(pa.array([b"abc", b"", b"x" * 3_000_000, b"abc"], pa.large_binary()))
    second = value_hashes(pa.array(["zz", "abc"]).slice(1))
    assert first[0] == first[3] == second[0] and len(set(first[:3].tolist())) == 3


def test_an_entry_counts_only_once_all_its_records_are_made() -> None:
    from shardkit.statistics.shard_statistics import ShardStatistics

    stats = ShardStatistics({"img": "picture"})
    picture = np.full((4, 4, 3), 9, np.uint8)
    stats.hold()
    stats.add({"n": ("int64", [1])})
    stats.picture("img", "png", picture)  # the entry fails after this: never committed
    stats.hold()
    stats.add({"n": ("int64", [2])})
    stats.picture("img", "png", picture)
    stats.commit()
    data = stats.to_data()
    assert data["records"] == 1
    assert data["features"]["n"]["moments"][:2] == [1, 2.0]
    assert data["features"]["img"]["measured"] == 1
