"""Every pair of 64-bit hashes within a Hamming distance, found by multi-index hashing: no pairwise matrix.

The hash is cut into ``m`` bands. By the pigeonhole principle (Norouzi, Punjani and Fleet,
"Fast search in Hamming space with multi-index hashing", CVPR 2012), two hashes at most ``t`` apart
agree within radius ``r_i`` in at least one band ``i`` whenever ``sum(r_i) >= t - m + 1``. So each
band's values are sorted once (a table of where each value's run starts, or a sorted array where a
band is too wide for a table), and for every bit mask of at most ``r_i`` bits each hash looks up its
band XOR the mask: a whole column of hashes per lookup (NumPy gathers, or ``searchsorted``), never a
Python loop per hash. The candidates a lookup finds are checked at once by a popcount of the whole
hashes' XOR. A mask is probed only from the hashes whose band has the mask's highest bit clear, so
each pair of values is looked up once per mask, not twice.

Memory is the hashes, a band's sort order and its table (``2**bits`` int32s, 16 MiB at 22 bits),
and a bounded block of candidates at a time: never anything pairwise. The work is about
``n * probes`` lookups plus ``n**2 * probes / 2**bits`` candidates; ``plan_bands`` picks the cut
that makes that least for the number of hashes and the threshold (at 1,000,000 hashes and ``t = 8``:
three bands of 21 or 22 bits, radius 2 each).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shardkit.duplicates.phash import HASH_BITS, distances

TABLE_BITS = 22  # a band this wide or narrower is looked up in a table of run starts; a wider one by searchsorted
BLOCK_CANDIDATES = 1 << 21  # candidates checked at once: bounds the memory of a lookup, whatever the data
_MAX_BANDS = 8
# Relative costs (measured on one core, NumPy 2): one hash's lookup in a table, in a sorted array, one candidate checked.
_TABLE_LOOKUP, _SORTED_LOOKUP, _CANDIDATE = 1.0, 6.0, 2.5

Pairs = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.uint8]]


@dataclass(frozen=True)
class Band:
    """``bits`` bits of the hash from bit ``shift`` up, probed within ``radius`` bits."""

    shift: int
    bits: int
    radius: int

    def values(self, hashes: NDArray[np.uint64]) -> NDArray[np.int64]:
        mask = np.uint64((1 << self.bits) - 1)
        values: NDArray[np.int64] = ((hashes >> np.uint64(self.shift)) & mask).astype(np.int64)
        return values

    def masks(self) -> Iterator[int]:
        """Every bit mask of at most ``radius`` of the band's bits, zero first."""
        for weight in range(self.radius + 1):
            for chosen in itertools.combinations(range(self.bits), weight):
                yield sum(1 << bit for bit in chosen)


def plan_bands(count: int, threshold: int) -> tuple[Band, ...]:
    """The cut into bands, and each band's radius, that costs the least for ``count`` distinct hashes."""
    if not 0 <= threshold <= HASH_BITS:
        raise ValueError(f"a Hamming threshold is 0 to {HASH_BITS}, not {threshold}")
    plans = [_cut(m, threshold) for m in range(1, min(threshold + 1, _MAX_BANDS) + 1)]
    return min(plans, key=lambda bands: _cost(bands, count))


def _cut(m: int, threshold: int) -> tuple[Band, ...]:
    widths = [HASH_BITS // m + (1 if i < HASH_BITS % m else 0) for i in range(m)]
    spare = threshold - m + 1  # the radii must add up to this (the generalized pigeonhole bound)
    radii = [spare // m + (1 if i < spare % m else 0) for i in range(m)]
    shifts = [sum(widths[:i]) for i in range(m)]
    return tuple(Band(shift, bits, radius) for shift, bits, radius in zip(shifts, widths, radii, strict=True))


def _cost(bands: tuple[Band, ...], count: int) -> float:
    total = 0.0
    for band in bands:
        probes = sum(math.comb(band.bits, k) for k in range(band.radius + 1))
        lookup = _TABLE_LOOKUP if band.bits <= TABLE_BITS else _SORTED_LOOKUP * max(1.0, math.log2(max(count, 2)) / 10)
        total += probes * (count * lookup / 2 + _CANDIDATE * count * count / 2.0**band.bits / 2)
    return total


def near_pairs(hashes: NDArray[np.uint64], threshold: int) -> Iterator[Pairs]:
    """Blocks of pairs ``(i, j, distance)``, ``i < j``, of hashes at most ``threshold`` apart.
    ``hashes`` should be distinct (equal hashes are one value to search for): every pair of
    positions is found at least once; a pair may come again in a later block."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    for band in plan_bands(len(hashes), threshold):
        yield from _band_pairs(hashes, band, threshold)


def _band_pairs(hashes: NDArray[np.uint64], band: Band, threshold: int) -> Iterator[Pairs]:
    # Everything happens among the hashes sorted by the band's value: a probe's lookups then walk
    # the table nearly in order (a mask moves a value only a little), and its candidates are runs.
    values = band.values(hashes)
    order = np.argsort(values, kind="stable")
    values, ranked = values[order], hashes[order]
    lookup = _Lookup(values, band.bits)
    every = np.arange(len(hashes), dtype=np.int64)
    queries, wanted, top = every, values, -1
    for mask in sorted(band.masks(), key=int.bit_length):  # the masks of one highest bit together
        if mask.bit_length() - 1 != top:
            top = mask.bit_length() - 1  # probe only from hashes with this bit clear: each pair once
            queries = every[(values & (1 << top)) == 0]
            wanted = values[queries]
        hit, start, count = lookup.runs(wanted ^ mask)
        for i, j, apart in _checked(ranked, queries[hit], start, count, threshold, same_value=mask == 0):
            i, j = order[i], order[j]
            yield np.minimum(i, j), np.maximum(i, j), apart


class _Lookup:
    """Where each band value's run starts among the sorted values, and its length: tables for a
    narrow band (the lengths as int32: most lookups find nothing, and only the hits read a start)."""

    def __init__(self, sorted_values: NDArray[np.int64], bits: int) -> None:
        self.sorted_values = sorted_values
        self.counts: NDArray[np.int32] | None = None
        self.starts: NDArray[np.int64] | None = None
        if bits <= TABLE_BITS:
            counts = np.bincount(sorted_values, minlength=1 << bits)
            self.counts = counts.astype(np.int32)
            self.starts = np.cumsum(counts) - counts

    def runs(self, wanted: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Which of ``wanted`` are there, where each one's run starts, and its length."""
        if self.counts is not None and self.starts is not None:
            count = np.take(self.counts, wanted)
            hit = np.flatnonzero(count > 0)
            found = wanted[hit]
            return hit, np.take(self.starts, found), count[hit].astype(np.int64)
        left = np.searchsorted(self.sorted_values, wanted, side="left")
        length = np.searchsorted(self.sorted_values, wanted, side="right") - left
        hit = np.flatnonzero(length > 0)
        return hit, left[hit], length[hit]


def _checked(
    ranked: NDArray[np.uint64],
    queries: NDArray[np.int64],
    start: NDArray[np.int64],
    count: NDArray[np.int64],
    threshold: int,
    same_value: bool,
) -> Iterator[Pairs]:
    """The candidates of one lookup (each query's run of ``count`` positions from ``start``), a
    bounded block at a time, kept where the whole hashes are close enough: pairs of positions among
    the ``ranked`` hashes."""
    if not len(queries):
        return
    ends = np.cumsum(count)
    cuts = np.searchsorted(ends, np.arange(BLOCK_CANDIDATES, int(ends[-1]), BLOCK_CANDIDATES), side="left")
    for lo, hi in itertools.pairwise([0, *cuts.tolist(), len(queries)]):
        if lo == hi:
            continue
        reps = count[lo:hi]
        first = np.repeat(queries[lo:hi], reps)
        second = np.repeat(start[lo:hi] - (np.cumsum(reps) - reps), reps) + np.arange(len(first), dtype=np.int64)
        if same_value:  # a run of equal band values: each pair twice, and each hash with itself
            keep = first < second
            first, second = first[keep], second[keep]
        apart = distances(ranked[first], ranked[second])
        close = apart <= threshold
        if close.any():
            yield first[close], second[close], apart[close]
