"""What a shard's records count as they are made (``features.base.FeatureKind.encoder`` and
``batch_columns`` call it; ``pipeline.shard.stats.Stats`` keeps it): list lengths, picture sizes
and label counts for the manifest, pictures' formats and pixels for the statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np


class RecordStats(Protocol):
    """The running statistics a shard's records give the manifest (``pipeline.shard.records``)."""

    def length(self, key: str, n: int) -> None: ...

    def size(self, key: str, height: int, width: int, channels: int) -> None: ...

    def length_range(self, key: str, lo: int, hi: int) -> None: ...  # a batch's shortest and longest list

    def counts(self, key: str, counts: Mapping[str, int] | None) -> None: ...  # a batch's label counts; None: no label

    # A record's picture of ``key``: its format, and the pixels handed to the encoder (None: passed through undecoded).
    def picture(self, key: str, image_format: str, array: np.ndarray | None) -> None: ...

    def picture_counted(self, key: str, image_format: str, count: Any) -> None: ...  # pixels counted already (``PixelCount``)
