"""What a shard's record keeps of its records besides the records: ``Stats`` (list lengths, image
sizes, label counts, for the manifest), and how a file feature's problems are named.

Both ways of making a shard's records count into it: record by record (``records``) and a chunk
of entries at once (``batches``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np

from shardkit.formats.image_headers import ImageProblem
from shardkit.pipeline.config import Config
from shardkit.statistics.feature_stats import PixelCount
from shardkit.statistics.shard_statistics import ShardStatistics

MAX_LABEL_VALUES = 64  # an int64 feature with more distinct values than this is not counted as a label


class Stats:
    """Running min/max of list lengths and image sizes, for the manifest's schema, per label
    feature (class names, and int64 scalars with few values) how many records carry each value,
    and the shard's ``statistics`` (``OUT/statistics.pb``'s part: every feature's values)."""

    def __init__(self, config: Config) -> None:
        self.lengths: dict[str, tuple[int, int]] = {}
        self.sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]] = {}
        self.labels: dict[str, dict[str, int] | None] = {
            key: {} for f in config.features if f.kind.counts_labels for key in f.kind.counted_keys(f)
        }
        # Objects are counted by class however many classes there are; other labels stop at MAX_LABEL_VALUES.
        self.uncapped = {key for f in config.features if f.kind.counts_objects for key in f.kind.counted_keys(f)}
        self.statistics = ShardStatistics({key: role for f in config.features for key, role in f.kind.statistics_roles(f).items()})

    def picture(self, key: str, image_format: str, array: np.ndarray | None) -> None:
        self.statistics.picture(key, image_format, array)

    def picture_counted(self, key: str, image_format: str, count: PixelCount | None) -> None:
        self.statistics.picture_counted(key, image_format, count)

    def label(self, key: str, value: str | None) -> None:
        """Count one record's ``value`` of ``key``; None: this value is not a label (a list)."""
        counts = self.labels[key]
        if counts is None:
            return
        if value is None or (value not in counts and len(counts) == MAX_LABEL_VALUES and key not in self.uncapped):
            self.labels[key] = None  # too many values, or lists: not a label
            return
        counts[value] = counts.get(value, 0) + 1

    def length(self, key: str, n: int) -> None:
        lo, hi = self.lengths.get(key, (n, n))
        self.lengths[key] = (min(lo, n), max(hi, n))

    def length_range(self, key: str, lo: int, hi: int) -> None:
        known = self.lengths.get(key, (lo, hi))
        self.lengths[key] = (min(known[0], lo), max(known[1], hi))

    def counts(self, key: str, counts: Mapping[str, int] | None) -> None:
        """A batch's counts of ``key``'s values (None: not a label), merged as ``label`` would count them."""
        known = self.labels[key]
        if known is None:
            return
        if counts is None:
            self.labels[key] = None
            return
        for value, n in counts.items():
            known[value] = known.get(value, 0) + n
        if len(known) > MAX_LABEL_VALUES and key not in self.uncapped:
            self.labels[key] = None

    def size(self, key: str, height: int, width: int, channels: int) -> None:
        known = self.sizes.get(key)
        if known is not None and known[0] <= height <= known[1] and known[2] <= width <= known[3] and channels in known[4]:
            return  # most records: no new extreme
        if key not in self.sizes:
            self.sizes[key] = (height, height, width, width, (channels,))
            return
        h0, h1, w0, w1, ch = self.sizes[key]
        self.sizes[key] = (min(h0, height), max(h1, height), min(w0, width), max(w1, width), tuple(sorted({*ch, channels})))


def file_label(value: str | bytes) -> str:
    """A file feature's value as messages name it: its path, or where the input held the bytes."""
    return value if isinstance(value, str) else "bytes in the input"


@contextlib.contextmanager
def naming(key: str, path: str) -> Iterator[None]:
    """Prefix an image problem with the feature and the file it came from."""
    try:
        yield
    except ImageProblem as exc:
        raise ImageProblem(f"{key}: {path}: {exc}") from None
