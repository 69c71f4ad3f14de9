"""What a shard keeps of each input for ``--duplicates``: the perceptual hash of its picture's
pixels as decoded for the build, and a digest of its bytes (of the picture file, or of the whole
record where a record has no picture). One row an input, not one a record: augmented copies of
one input are never duplicates of each other.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from shardkit.features.base import FeatureSpec
from shardkit.pipeline.config import Config
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.storage import location

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
