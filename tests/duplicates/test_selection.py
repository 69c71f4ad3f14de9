"""What ``drop`` removes: the training side's twins of evaluation images, all but the first within a split."""

from __future__ import annotations

import pytest

from shardkit.duplicates.groups import Group, Member
from shardkit.duplicates.selection import drops, kept_member, leak_line, leaks, split_ranks


def group(*members: tuple[int, str, object]) -> Group:
    return Group(tuple(Member(i, f"s{i}", split, identity) for i, split, identity in members), exact=False, distance=4)


def test_the_training_side_loses_its_twins_and_a_split_keeps_its_first() -> None:
    ranks = split_ranks(["train", "val", "test"])
    across = group((0, "train", 0), (3, "val", 3), (5, "test", 5), (7, "test", 7), (8, "train", 8))
    within = group((1, "train", 1), (2, "train", 2), (9, "train", 9))
    val_train = group((4, "train", 4), (6, "val", 6))
    dropped = drops([across, within, val_train], ranks)
    assert [(d.member.index, d.kept.index) for d in dropped] == [(0, 5), (2, 1), (3, 5), (4, 6), (7, 5), (8, 5), (9, 1)]
    assert kept_member(across, ranks).index == 5
    # Copies of the kept input stay with it; copies of a dropped input go with it.
    copies = group((0, "train", "a"), (1, "train", "a"), (2, "test", "b"), (3, "test", "b"), (4, "train", "c"))
    assert [d.member.index for d in drops([copies], ranks)] == [0, 1, 4]


def test_split_ranks_by_name_or_by_the_order_given() -> None:
    assert split_ranks(["train", "validation", "test", "extra"]) == {"train": 0, "validation": 1, "test": 2, "extra": 0}
    assert split_ranks(["a", "b"], order=["b", "a"]) == {"a": 1, "b": 0}
    with pytest.raises(ValueError, match="leaves out"):
        split_ranks(["train", "val"], order=["train"])
    with pytest.raises(ValueError, match="each split once"):
        split_ranks(["train"], order=["train", "train"])


def test_leaks_are_counted_per_pair_of_splits_and_said_in_one_line() -> None:
    ranks = split_ranks(["train", "val", "test"])
    groups = [group((0, "train", 0), (1, "val", 1), (2, "val", 2), (3, "test", 3)), group((4, "val", 4), (5, "test", 5))]
    counted = leaks(groups, ranks)
    assert counted == {("val", "train"): 2, ("test", "train"): 1, ("test", "val"): 2}
    assert leak_line(counted) == "1 test image and 2 val images have a twin in train; 2 test images have a twin in val"
    assert leak_line({("test", "train"): 1}) == "1 test image has a twin in train"
    assert leak_line(leaks([group((0, "train", 0), (1, "train", 1))], ranks)) is None
