"""Groups of twins: every planted group found at the default threshold, no false one, the same as
imagehash's; exact twins by bytes; copies of one input never twins of each other."""

from __future__ import annotations

import imagehash
import numpy as np
import pytest
from PIL import Image

from shardkit.duplicates.groups import DEFAULT_THRESHOLD, Group, check_threshold, find_groups
from shardkit.duplicates.phash import digest, phash
from tests.duplicates.planted import Record, planted_records

# Measured (docs/duplicates.md): a 2 % crop moves a fine texture's hash further than the default
# threshold; scikit-image's brick, 12 bits. Its copy is a group of its own at 12, and there only.
TEXTURE_CROP = ("brick", "brick+cropped-2", 12)


@pytest.fixture(scope="module")
def planted() -> list[Record]:
    return planted_records(synthetic=40)


@pytest.fixture(scope="module")
def ours(planted: list[Record]) -> list[int]:
    return [phash(r.picture) for r in planted]


@pytest.fixture(scope="module")
def theirs(planted: list[Record]) -> list[imagehash.ImageHash]:
    return [imagehash.phash(Image.fromarray(r.picture)) for r in planted]


def search(records: list[Record], hashes: list[int], threshold: int = DEFAULT_THRESHOLD) -> list[Group]:
    return find_groups(
        np.array(hashes, dtype=np.uint64),
        [digest(r.picture.tobytes()) for r in records],
        [r.split for r in records],
        [r.source_id for r in records],
        [r.source_id for r in records],  # every record an input of its own
        threshold,
    )


def as_sets(groups: list[Group]) -> set[frozenset[str]]:
    return {frozenset(m.source_id for m in g.members) for g in groups}


def test_every_planted_group_is_found_and_no_false_one(planted: list[Record], ours: list[int]) -> None:
    groups = search(planted, ours)
    expected: dict[str, set[str]] = {}
    for record in planted:
        expected.setdefault(record.base, set()).add(record.source_id)
    base, copy, apart = TEXTURE_CROP
    expected[base].discard(copy)
    assert as_sets(groups) == {frozenset(members) for members in expected.values()}
    assert len(groups) == 60 and max(g.distance for g in groups) <= DEFAULT_THRESHOLD
    # Twins within a split and across splits were both planted, and found.
    assert any(len(g.splits) == 1 for g in groups) and sum(len(g.splits) == 3 for g in groups) >= 5
    by_name = {r.source_id: r for r in planted}
    for group in groups:
        assert [m.index for m in group.members] == sorted(m.index for m in group.members)
        assert all(planted[m.index] is by_name[m.source_id] and m.split == by_name[m.source_id].split for m in group.members)
    # At the texture's own distance its crop joins its group, and no two distinct pictures join.
    wider = search(planted, ours, threshold=apart)
    assert as_sets(wider) == {frozenset(m | {copy}) if base in m else m for m in as_sets(groups)}
    assert max(g.distance for g in wider) == apart


def test_the_groups_are_imagehash_phash_groups_at_the_same_threshold(planted: list[Record], theirs: list[imagehash.ImageHash]) -> None:
    bits = np.array([h.hash.ravel() for h in theirs])
    apart = (bits[:, None, :] != bits[None, :, :]).sum(axis=2)  # imagehash's ``h1 - h2``, every pair at once
    for threshold in (4, DEFAULT_THRESHOLD, 12, 20):
        parent = list(range(len(planted)))
        for i, j in zip(*np.nonzero(np.triu(apart <= threshold, 1)), strict=True):
            parent[root(parent, int(i))] = root(parent, int(j))
        components: dict[int, set[str]] = {}
        for i, record in enumerate(planted):
            components.setdefault(root(parent, i), set()).add(record.source_id)
        expected = {frozenset(c) for c in components.values() if len(c) > 1}
        assert as_sets(search(planted, [int(str(h), 16) for h in theirs], threshold)) == expected, threshold


def root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        i = parent[i]
    return i


def test_exact_twins_by_bytes_and_copies_of_one_input_never_twins() -> None:
    # Records without images: only their bytes compared. a and c are equal, b differs; d and e are
    # two copies of one input (equal bytes, one identity): not twins of each other, until f joins.
    payloads = [b"a" * 5, b"b" * 5, b"a" * 5, b"dd", b"dd", b"x"]
    digests = [digest(p) for p in payloads]
    ids = ["a", "b", "c", "d0", "d1", "f"]
    groups = find_groups(None, digests, ["train", "train", "test", "val", "val", "test"], ids, ["a", "b", "c", "d", "d", "f"])
    assert [[m.source_id for m in g.members] for g in groups] == [["a", "c"]]
    assert groups[0].exact and groups[0].distance == 0 and groups[0].splits == ("train", "test")
    digests[5] = digest(b"dd")
    groups = find_groups(None, digests, ["train"] * 6, ids, ["a", "b", "c", "d", "d", "f"])
    assert [[m.source_id for m in g.members] for g in groups] == [["a", "c"], ["d0", "d1", "f"]]
    # By hash: copies of one input near each other are no group; another input near one of them joins them all.
    hashes = np.array([0b0, 0b11, 0b1111 << 20, 0b1], dtype=np.uint64)
    found = find_groups(hashes, [digest(bytes([i])) for i in range(4)], ["train"] * 4, list("wxyz"), [1, 1, 2, 3], 2)
    assert [[m.source_id for m in g.members] for g in found] == [["w", "x", "z"]]
    assert not found[0].exact and found[0].distance == 2
    assert find_groups(hashes[:2], digests[:2], ["train"] * 2, ["w", "x"], [1, 1], 64) == []


def test_many_copies_of_one_picture_are_one_value_to_search() -> None:
    """200,000 blank pictures (each its own bytes, one hash): one group, found without 2e10 pairs."""
    count = 200_000
    hashes = np.zeros(count, dtype=np.uint64)
    hashes[-1] = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    digests = np.arange(count, dtype=">i8").view("S8")
    groups = find_groups(hashes, digests, ["train"] * count, [str(i) for i in range(count)], list(range(count)), 8)
    assert len(groups) == 1 and len(groups[0].members) == count - 1 and not groups[0].exact and groups[0].distance == 0


@pytest.mark.parametrize("bad", [-1, 65, True, 2.5, "8"])
def test_a_threshold_outside_0_to_64_is_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="0 to 64"):
        check_threshold(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0 to 64"):
        find_groups(None, [b"x" * 16], ["train"], ["a"], [0], bad)  # type: ignore[arg-type]
    assert check_threshold(0) == 0 and check_threshold(64) == 64 and check_threshold(np.int64(8)) == 8


def test_arrays_of_different_lengths_or_digests_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one entry per record"):
        find_groups(None, [b"x" * 16, b"y" * 16], ["train"], ["a"], [0])
    with pytest.raises(ValueError, match="bytes of one length"):
        find_groups(None, [b"x" * 16, b"y" * 15], ["train"] * 2, ["a", "b"], [0, 1])
