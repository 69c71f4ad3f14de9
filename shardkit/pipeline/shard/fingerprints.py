"""What a shard keeps of each input for ``--duplicates``: the perceptual hash of its picture's
pixels as decoded for the build, and a digest of its bytes (of the picture file, or of the whole
record where a record has no picture). One row an input, not one a record: augmented copies of
one input are never duplicates of each other.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shardkit.features.base import FeatureSpec
from shardkit.pipeline.config import Config
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.storage import location

if TYPE_CHECKING:
    from shardkit.duplicates.groups import Group

DROPS = "drops.json"  # in the plan's folder: what ``--duplicates drop`` leaves out (``pipeline.state.duplicate_drop``)


class Fingerprints:
    """A shard's rows, in the order its inputs were written."""

    def __init__(self, config: Config) -> None:
        pictures = [f for f in config.features if f.kind.picture and not f.kind.class_values]
        leading = [f for f in pictures if f.kind.leads]
        self.picture: FeatureSpec | None = (leading or pictures or [None])[0]  # type: ignore[list-item]  # the record's leading image
        self.identities: list[str] = []
        self.hashes: list[int] = []
        self.digests: list[bytes] = []

    def add(self, identity: str, pixels: np.ndarray | None, data: bytes) -> None:
        """One input: its picture's pixels (None: it has no picture) and the bytes its digest is of."""
        from shardkit.duplicates.phash import digest, phash  # SciPy's DCT: imported by builds that ask for duplicates alone

        self.identities.append(identity)
        self.digests.append(digest(data))
        if pixels is not None:
            self.hashes.append(phash(pixels))

    def to_data(self) -> dict[str, Any]:
        return {
            "identity": self.identities,
            "hash": [f"{h:016x}" for h in self.hashes] if self.picture is not None else None,
            "digest": [d.hex() for d in self.digests],
        }


def pixels_of(data: bytes) -> np.ndarray:
    """A picture file's pixels for its hash, where the build did not decode it (passed through)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image if image.mode in ("L", "RGB", "RGBA") else image.convert("RGB"))


def drops_path(task: ShardTask) -> str:
    return location.join(task.settings.plan_dir, DROPS)


_DROPPED: dict[str, frozenset[str]] = {}  # per drops.json, in each worker process: read once


def dropped_inputs(task: ShardTask) -> frozenset[str]:
    """The identities ``--duplicates drop`` leaves out of ``task``'s build (none without it)."""
    if task.settings.duplicates != "drop":
        return frozenset()
    path = drops_path(task)
    if path not in _DROPPED:
        _DROPPED[path] = frozenset(json.loads(location.read_bytes(path))["dropped"])
    return _DROPPED[path]


def grouped(parts: Sequence[tuple[str, Mapping[str, Any]]], threshold: int) -> tuple[list[Group], list[str], bool]:
    """The groups among shards' rows (``(split, Fingerprints.to_data())`` in build order), each
    row's split, and whether pictures were compared (else records' bytes alone)."""
    from shardkit.duplicates.groups import find_groups

    identities = [i for _, rows in parts for i in rows["identity"]]
    splits = [split for split, rows in parts for _ in rows["identity"]]
    digests = np.array([bytes.fromhex(d) for _, rows in parts for d in rows["digest"]], dtype="S16")
    pictures = bool(parts) and all(rows["hash"] is not None for _, rows in parts)
    hashes = np.array([int(h, 16) for _, rows in parts for h in rows["hash"]], dtype=np.uint64) if pictures else None
    groups = find_groups(hashes, digests, splits, identities, identities, threshold) if identities else []
    return groups, splits, pictures


def compared(pictures: bool, threshold: int) -> str:
    """What the search compared, as the summary and the manifest say it."""
    return (
        f"pictures by a 64-bit perceptual hash within {threshold} bits, and by their bytes"
        if pictures
        else "records by their bytes (no pictures)"
    )


def group_entry(group: Group, dropped: Collection[str] | None = None) -> dict[str, Any]:
    """A group as ``OUT/duplicates.jsonl`` holds it (with ``dropped``: each member marked)."""
    members: list[dict[str, Any]] = [{"split": m.split, "source_id": m.source_id} for m in group.members]
    if dropped is not None:
        members = [{**m, "dropped": m["source_id"] in dropped} for m in members]
    return {"exact": group.exact, "distance": group.distance, "splits": list(group.splits), "members": members}


def leak_counts(counted: Mapping[tuple[str, str], int]) -> dict[str, int]:
    return {f"{split} in {other}": n for (split, other), n in sorted(counted.items())}
