"""The public Python API: one function per ``shardkit`` command, each returning a result value.

``import shardkit`` re-exports these names lazily; the CLI is a thin layer over them. Errors the
user can fix are ``shardkit.errors.ShardkitError`` subclasses carrying the one line the CLI prints.
Nothing here imports TensorFlow: ``materialize_snapshot`` does, when it is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shardkit.check.inspection import count as count_records
from shardkit.check.inspection import inspect
from shardkit.check.stats import DatasetStatistics, stats
from shardkit.check.verify import FileReport, VerifyReport, verify
from shardkit.errors import ConfigError
from shardkit.formats.containers.registry import IndexReport, write_indexes
from shardkit.output.found import expand
from shardkit.pipeline.build_result import BuildResult
from shardkit.pipeline.builder import build, build_with, finalize
from shardkit.pipeline.options import BuildOptions
from shardkit.pipeline.reshard.options import ReshardOptions
from shardkit.pipeline.reshard.resharder import ReshardResult, reshard, reshard_with
from shardkit.read.materialize import DEFAULT_NUM_SHARDS, SnapshotResult
from shardkit.view.preview import preview

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


def write_idx_files(paths: Sequence[str], workers: int = 1, compression: str = "auto") -> list[IndexReport]:
    """Write ``NAME.idx`` beside every TFRecord file ``paths`` name (files, folders, globs, shardkit
    folders), checking every CRC on the way; one report per file, a failed one with its problem (an
    ArrayRecord file's: it carries its own index)."""
    return write_indexes(expand(paths).shard_files(), workers, compression)


def materialize_snapshot(
    src: str | Path,
    snap: str | Path,
    preprocess: str | None = None,
    *,
    config: str | Path | None = None,
    split: str = "train",
    compression: str | None = None,
    num_shards: int = DEFAULT_NUM_SHARDS,
    overwrite: bool = False,
    progress: bool | None = None,
    dispatcher: str | None = None,
) -> SnapshotResult:
    """Run ``preprocess`` (``module:function`` or ``file.py:function``, or the config's
    ``snapshot.preprocess``) over ``src``'s split once and save it with ``tf.data.Dataset.save``."""
    from shardkit.pipeline.config import load_config
    from shardkit.read.materialize import materialize_snapshot as materialize

    if preprocess is None and config is not None:
        preprocess = load_config(config).snapshot_preprocess
        if preprocess is None:
            raise ConfigError("snapshot.preprocess", "not set: give --preprocess MODULE:FUNCTION, or set it in the config", str(config))
    if preprocess is None:
        raise ConfigError("", "give --preprocess MODULE:FUNCTION, or a --config with snapshot.preprocess")
    return materialize(
        str(src), str(snap), preprocess, split=split, compression=compression, num_shards=num_shards,
        overwrite=overwrite, progress=progress, dispatcher=dispatcher,
    )  # fmt: skip
