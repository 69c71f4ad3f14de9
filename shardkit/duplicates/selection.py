"""What ``--duplicates drop`` removes, and what the summary says of leaks between splits.

Splits are ranked from the training side to the evaluation side (train < val < test): in a
group, the first record in build order of the highest-ranked split is kept, with every record of
its input identity (augmented copies of one input stay together), and every other record is
dropped. So the training side loses each twin of an evaluation image (train loses to val and
test, val to test), and within one split the first of each group stays. Splits of equal rank
(two training-side splits, say) are one side: the first in build order stays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from shardkit.duplicates.groups import Group, Member

# A split's rank by its usual names; any other name is on the training side (rank 0).
VALIDATION_NAMES = frozenset({"val", "valid", "validation", "dev"})
TEST_NAMES = frozenset({"test", "testing", "eval", "evaluation", "holdout"})


def split_ranks(splits: Iterable[str], order: Sequence[str] | None = None) -> dict[str, int]:
    """Each split's rank, higher on the evaluation side. ``order``: the splits from the training
    side to the evaluation side (all of them, each once); by default ranked by name (the test
    names above 2, the validation names 1, any other 0). A ValueError for an order that leaves a
    split out or names one twice."""
    names = list(dict.fromkeys(splits))
    if order is None:
        return {s: 2 if s.lower() in TEST_NAMES else 1 if s.lower() in VALIDATION_NAMES else 0 for s in names}
    if len(set(order)) != len(order):
        raise ValueError(f"a split order names each split once: {list(order)}")
    missing = [s for s in names if s not in order]
    if missing:
        raise ValueError(f"the split order {list(order)} leaves out {missing}")
    return {s: order.index(s) for s in names}


@dataclass(frozen=True)
class Dropped:
    """A record ``drop`` removes, and the record of its group that stays."""

    member: Member
    kept: Member


def kept_member(group: Group, ranks: Mapping[str, int]) -> Member:
    """The record a group keeps: the first in build order of its highest-ranked split."""
    top = max(ranks[m.split] for m in group.members)
    return next(m for m in group.members if ranks[m.split] == top)


def drops(groups: Iterable[Group], ranks: Mapping[str, int]) -> list[Dropped]:
    """Every record ``--duplicates drop`` removes, in build order, each with the twin that stays."""
    found: list[Dropped] = []
    for group in groups:
        kept = kept_member(group, ranks)
        found.extend(Dropped(m, kept) for m in group.members if m.identity != kept.identity)
    return sorted(found, key=lambda d: d.member.index)


def leaks(groups: Iterable[Group], ranks: Mapping[str, int]) -> Counter[tuple[str, str]]:
    """Per pair ``(split, other)``: how many records of ``split`` have a twin in ``other``, a split
    ranked below it (a val image with a twin in train counts once under ``("val", "train")``)."""
    counted: Counter[tuple[str, str]] = Counter()
    for group in groups:
        present = group.splits
        for member in group.members:
            for other in present:
                if ranks[other] < ranks[member.split]:
                    counted[(member.split, other)] += 1
    return counted


def leak_line(counted: Mapping[tuple[str, str], int], noun: str = "image") -> str | None:
    """The build summary's sentence: ``23 val images and 4 test images have a twin in train``
    (one clause per lower split, joined by ``;``), or None when no split leaks into another."""
    by_other: dict[str, list[str]] = {}
    for (split, other), count in sorted(counted.items(), key=lambda item: (item[0][1], item[0][0])):
        by_other.setdefault(other, []).append(f"{count:,} {split} {noun if count == 1 else noun + 's'}")
    clauses = []
    for other, parts in by_other.items():
        subject = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        one = len(parts) == 1 and parts[0].startswith("1 ")
        clauses.append(f"{subject} {'has' if one else 'have'} a twin in {other}")
    return "; ".join(clauses) or None
