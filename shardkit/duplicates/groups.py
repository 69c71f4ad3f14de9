"""Groups of duplicate records: exact (equal digests) and near (perceptual hashes within a Hamming
threshold), within a split and across splits, joined by union-find.

Records come in build order as arrays: a hash per record (or none, where records have no image
and only their bytes' digests are compared), a digest, a split, a source id and an input identity.
Records with equal hashes are one value to the search (``bands.near_pairs`` runs over the distinct
hashes), so a million copies of one blank picture cost one lookup, not a million squared pairs;
the union-find is vectorized over those values. Two records of one input identity (augmented
copies of one input) are never duplicates of each other: an edge joins two values only where
their records are not all of one identity, and a group must hold two identities at least.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shardkit.duplicates.bands import near_pairs
from shardkit.duplicates.phash import HASH_BITS, distances

DEFAULT_THRESHOLD = 8  # of 64 bits: docs/duplicates.md has the measurements behind it
_EXACT_DIAMETER = 4096  # distinct hashes in a group up to which its largest distance is exact
_MERGE_EVERY = 1 << 20  # edges held before they are folded into the union-find


@dataclass(frozen=True)
class Member:
    """One record of a group: its position in build order, source id, split and input identity."""

    index: int
    source_id: str
    split: str
    identity: Hashable


@dataclass(frozen=True)
class Group:
    """Records that are duplicates of each other, in build order. ``exact``: all of them have equal
    bytes. ``distance``: the largest Hamming distance between two of them (0 when exact)."""

    members: tuple[Member, ...]
    exact: bool
    distance: int

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits the group's records are in, each once, in the order they first appear."""
        return tuple(dict.fromkeys(m.split for m in self.members))


def check_threshold(threshold: int) -> int:
    """``threshold``, or a ValueError when it is not a whole number of bits from 0 to 64."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)) or not 0 <= threshold <= HASH_BITS:
        raise ValueError(f"a near-duplicate threshold is a Hamming distance from 0 to {HASH_BITS} bits, not {threshold!r}")
    return int(threshold)


def find_groups(
    hashes: NDArray[np.uint64] | None,
    digests: Sequence[bytes] | NDArray[np.bytes_],
    splits: Sequence[str],
    source_ids: Sequence[str],
    identities: Sequence[Hashable],
    threshold: int = DEFAULT_THRESHOLD,
) -> list[Group]:
    """Every group of duplicates among the records, ordered by its first record. ``hashes=None``
    compares the digests alone (records without images)."""
    threshold = check_threshold(threshold)
    count = len(digests)
    if not count == len(splits) == len(source_ids) == len(identities) or (hashes is not None and len(hashes) != count):
        raise ValueError("hashes, digests, splits, source ids and identities must have one entry per record")
    if not count:
        return []
    digest_of = _digest_codes(digests)
    identity_of = _codes(identities)
    if hashes is None:
        values, value_of = np.zeros(digest_of.max() + 1, np.uint64), digest_of
    else:
        values, value_of = np.unique(np.asarray(hashes, dtype=np.uint64), return_inverse=True)
        value_of = value_of.ravel()
    owner = _single_identity(value_of, identity_of, len(values))
    roots = np.arange(len(values), dtype=np.int64)
    held: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = [_digest_edges(digest_of, value_of)]
    size = len(held[0][0])
    if hashes is not None:
        for i, j, _ in near_pairs(values, threshold):
            held.append((i, j))
            size += len(i)
            if size >= _MERGE_EVERY:
                _merge(roots, held, owner)
                held, size = [], 0
    _merge(roots, held, owner)
    return _groups(roots[value_of], identity_of, digest_of, values[value_of], splits, source_ids, identities)


def _digest_codes(digests: Sequence[bytes] | NDArray[np.bytes_]) -> NDArray[np.int64]:
    """Per record, a number for its digest: equal bytes, equal numbers (an array of fixed-width
    ``S`` values is taken whole, so a digest ending in zero bytes is not cut)."""
    raw = np.asarray(digests)
    uneven = not isinstance(digests, np.ndarray) and any(len(d) != raw.dtype.itemsize for d in digests)
    if raw.dtype.kind != "S" or raw.ndim != 1 or uneven:
        raise ValueError("digests must be bytes of one length, one per record")
    return np.unique(raw.view(f"V{raw.dtype.itemsize}"), return_inverse=True)[1].ravel().astype(np.int64)


def _codes(items: Sequence[Hashable]) -> NDArray[np.int64]:
    """Per item, a number: equal items, equal numbers (by NumPy where all are ints or all strings)."""
    kinds = {type(item) for item in items} if isinstance(items, list) else set()
    if isinstance(items, (np.ndarray, range)) or (len(kinds) == 1 and kinds <= {int, str}):
        as_array = np.asarray(items)
        if as_array.ndim == 1 and as_array.dtype.kind in "iuSU":
            return np.unique(as_array, return_inverse=True)[1].ravel().astype(np.int64)
    seen: dict[Hashable, int] = {}
    return np.fromiter((seen.setdefault(item, len(seen)) for item in items), dtype=np.int64, count=len(items))


def _single_identity(value_of: NDArray[np.int64], identity_of: NDArray[np.int64], values: int) -> NDArray[np.int64]:
    """Per value, the one identity all its records share, or -1 where they have several."""
    low = np.full(values, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(values, -1, dtype=np.int64)
    np.minimum.at(low, value_of, identity_of)
    np.maximum.at(high, value_of, identity_of)
    return np.where(low == high, low, -1)


def _digest_edges(digest_of: NDArray[np.int64], value_of: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Edges between the values of records with equal bytes (one value already, unless the hash of
    equal bytes differs: never for a deterministic decode, but then the bytes still decide)."""
    order = np.argsort(digest_of, kind="stable")
    same = digest_of[order][1:] == digest_of[order][:-1]
    left, right = value_of[order][:-1][same], value_of[order][1:][same]
    differ = left != right
    return left[differ], right[differ]


def _merge(roots: NDArray[np.int64], edges: list[tuple[NDArray[np.int64], NDArray[np.int64]]], owner: NDArray[np.int64]) -> None:
    """Union-find, vectorized: each root points at the smallest root joined to it, then paths are
    halved until every value points at its root (``roots[v] <= v`` always, so no cycle forms)."""
    if not edges:
        return
    a = np.concatenate([e[0] for e in edges])
    b = np.concatenate([e[1] for e in edges])
    one_input = (owner[a] == owner[b]) & (owner[a] >= 0)  # both values all of one identity: not duplicates
    a, b = a[~one_input], b[~one_input]
    while len(a):
        ra, rb = roots[a], roots[b]
        apart = ra != rb
        a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
        if not len(a):
            break
        np.minimum.at(roots, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            jumped = roots[roots]
            if np.array_equal(jumped, roots):
                break
            roots[:] = jumped


def _groups(
    component: NDArray[np.int64],
    identity_of: NDArray[np.int64],
    digest_of: NDArray[np.int64],
    hash_of: NDArray[np.uint64],
    splits: Sequence[str],
    source_ids: Sequence[str],
    identities: Sequence[Hashable],
) -> list[Group]:
    order = np.argsort(component, kind="stable")  # by component, then build order
    starts = np.flatnonzero(np.r_[True, np.diff(component[order]) != 0])
    ends = np.r_[starts[1:], len(order)]
    identity = identity_of[order]
    several = np.minimum.reduceat(identity, starts) != np.maximum.reduceat(identity, starts)  # one identity: no group
    found = []
    for start, end in zip(starts[several].tolist(), ends[several].tolist(), strict=True):
        members = order[start:end]
        exact = bool(np.all(digest_of[members] == digest_of[members[0]]))
        group = tuple(Member(int(i), source_ids[i], splits[i], identities[i]) for i in members.tolist())
        found.append(Group(group, exact, 0 if exact else _diameter(np.unique(hash_of[members]))))
    return sorted(found, key=lambda g: g.members[0].index)


def _diameter(hashes: NDArray[np.uint64]) -> int:
    """The largest distance between two of the hashes; beyond 4,096 of them, the largest from the first."""
    if len(hashes) > _EXACT_DIAMETER:
        return int(distances(hashes, hashes[0]).max())
    return max(int(distances(hashes[i:], hashes[i]).max()) for i in range(len(hashes)))
