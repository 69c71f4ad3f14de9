"""shardkit: image datasets -> TFRecord shards, fast, safely and reproducibly.

Heavy modules (TensorFlow, albumentations) are imported only where they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from shardkit.api import BuildResult, build

__all__ = ["BuildResult", "__version__", "build"]


def __getattr__(name: str) -> Any:
    if name in ("build", "BuildResult"):
        from shardkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'shardkit' has no attribute {name!r}")
