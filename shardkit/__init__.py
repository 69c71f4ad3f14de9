"""shardkit: image datasets -> TFRecord shards, fast, safely and reproducibly.

The public Python API, one function per command (``shardkit.api`` holds them)::

    shardkit.build(indexes, out, config=..., seed=...)  -> BuildResult       shardkit build
    shardkit.build_with(indexes, out, BuildOptions(...)) -> BuildResult      (the same, options as one value)
    shardkit.finalize(out)                              -> BuildResult       shardkit finalize
    shardkit.inspect(paths)                             -> dict              shardkit inspect
    shardkit.count_records(paths)                       -> list[dict]        shardkit inspect --count
    shardkit.verify(paths, deep=..., workers=...)       -> VerifyReport      shardkit verify
    shardkit.write_idx_files(paths)                     -> list[IndexReport] shardkit index
    shardkit.materialize_snapshot(src, snap, preprocess) -> SnapshotResult   shardkit snapshot-materialize
    shardkit.preview(paths, out=None, ...)              -> PIL.Image.Image   shardkit preview
    shardkit.reshard(paths, out, shards=..., seed=...)  -> ReshardResult     shardkit reshard
    shardkit.stats(paths, workers=..., output=...)      -> DatasetStatistics shardkit stats

Also public: ``shardkit.errors`` (what the functions raise), ``shardkit.executors``
(``DaskExecutor``, ...), ``shardkit.tfdata.load`` and ``shardkit.reader.ShardReader``. The
subpackages (``pipeline``, ``formats``, ``check``, ``read``, ``storage``, ``view``) are the implementation.

Names resolve on first use, so ``import shardkit`` stays light and never imports TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardkit.version import __version__

if TYPE_CHECKING:
    from shardkit.api import (
        BuildOptions,
        BuildResult,
        DatasetStatistics,
        FileReport,
        IndexReport,
        ReshardOptions,
        ReshardResult,
        SnapshotResult,
        VerifyReport,
        build,
        build_with,
        count_records,
        finalize,
        inspect,
        materialize_snapshot,
        preview,
        reshard,
        reshard_with,
        stats,
        verify,
        write_idx_files,
    )

__all__ = [
    "BuildOptions",
    "BuildResult",
    "DatasetStatistics",
    "FileReport",
    "IndexReport",
    "ReshardOptions",
    "ReshardResult",
    "SnapshotResult",
    "VerifyReport",
    "__version__",
    "build",
    "build_with",
    "count_records",
    "finalize",
    "inspect",
    "materialize_snapshot",
    "preview",
    "reshard",
    "reshard_with",
    "stats",
    "verify",
    "write_idx_files",
]
_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from shardkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'shardkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
