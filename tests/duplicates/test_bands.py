"""Multi-index hashing finds exactly the pairs a full pairwise comparison finds, at any threshold."""

from __future__ import annotations

import numpy as np
import pytest

from shardkit.duplicates import bands
from shardkit.duplicates.bands import near_pairs, plan_bands
from shardkit.duplicates.phash import distances


def planted_hashes(count: int, threshold: int, seed: int) -> np.ndarray:
    """Random hashes, and a tenth of them moved within ``threshold`` bits of another."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True)
    for _ in range(count // 10):
        i, j = rng.integers(count, size=2)
        flips = rng.choice(64, size=int(rng.integers(0, min(threshold, 64) + 1)), replace=False)
        hashes[j] = hashes[i] ^ np.uint64(sum(1 << int(b) for b in flips))
    return np.unique(hashes)


def pairwise(hashes: np.ndarray, threshold: int) -> set[tuple[int, int]]:
    apart = distances(hashes[:, None], hashes[None, :])
    return {(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(apart <= threshold, 1)), strict=True)}


@pytest.mark.parametrize(("count", "threshold"), [(3000, 0), (3000, 2), (3000, 8), (2000, 11), (600, 20), (200, 64)])
def test_every_pair_within_the_threshold_and_no_other(count: int, threshold: int) -> None:
    hashes = planted_hashes(count, threshold, seed=threshold)
    found: set[tuple[int, int]] = set()
    for i, j, apart in near_pairs(hashes, threshold):
        assert (i < j).all() and (apart == distances(hashes[i], hashes[j])).all()
        found |= set(zip(i.tolist(), j.tolist(), strict=True))
    assert found == pairwise(hashes, threshold)
    assert len(found) >= count // 20 if threshold else not found  # distinct hashes: none at distance 0


def test_blocks_of_candidates_are_bounded_and_a_wide_band_is_searched_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny block and no tables: the same pairs through the ``searchsorted`` path, block by block."""
    hashes = planted_hashes(2000, 6, seed=1)
    expected = pairwise(hashes, 6)
    monkeypatch.setattr(bands, "BLOCK_CANDIDATES", 7)
    monkeypatch.setattr(bands, "TABLE_BITS", 0)
    found = {pair for i, j, _ in near_pairs(hashes, 6) for pair in zip(i.tolist(), j.tolist(), strict=True)}
    assert found == expected


def test_the_cut_obeys_the_pigeonhole_bound_and_suits_a_million() -> None:
    for count in (10, 10_000, 1_000_000):
        for threshold in range(65):
            cut = plan_bands(count, threshold)
            assert sum(b.bits for b in cut) == 64 and sum(b.radius for b in cut) >= threshold - len(cut) + 1
    assert [(b.bits, b.radius) for b in plan_bands(1_000_000, 8)] == [(22, 2), (21, 2), (21, 2)]
    with pytest.raises(ValueError, match="0 to 64"):
        plan_bands(10, 65)
