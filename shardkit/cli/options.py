"""Command-line parameters: paths that may be URLs, fsspec's options, a node's share, and the option bundles commands share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
STORAGE_OPTIONS_VARIABLE = "SHARDKIT_STORAGE_OPTIONS"  # read by shardkit.storage.location, in every process


class PathOrURL(click.Path):
    """A local path, checked like ``click.Path``; or a URL (``gs://``, ``s3://``), which the library checks."""

    def convert(self, value: str | os.PathLike[str], param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and "://" in value:
            if not value.startswith("file://"):
                return value
            value = value[len("file://") :]  # a local path, checked as one
        return super().convert(value, param, ctx)


def set_storage_options(items: Sequence[str]) -> None:
    """``KEY=VALUE`` items (VALUE parsed as JSON where it is JSON) into the environment, where the
    build's worker processes inherit them."""
    try:
        options = dict(json.loads(os.environ.get(STORAGE_OPTIONS_VARIABLE) or "{}"))
    except (ValueError, TypeError):
        raise click.UsageError(f"{STORAGE_OPTIONS_VARIABLE} is set but is not a JSON object of fsspec options") from None
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--storage-option")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    os.environ[STORAGE_OPTIONS_VARIABLE] = json.dumps(options)


def node_share(num_nodes: int | None, node_index: int | None) -> tuple[int, int]:
    """--num-nodes/--node-index, defaulting from SLURM array jobs or Kubernetes indexed jobs."""
    env = os.environ
    if num_nodes is None and "SLURM_ARRAY_TASK_COUNT" in env:
        num_nodes = int(env["SLURM_ARRAY_TASK_COUNT"])
    if node_index is None:
        if "SLURM_ARRAY_TASK_ID" in env:
            node_index = int(env["SLURM_ARRAY_TASK_ID"]) - int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
        elif "JOB_COMPLETION_INDEX" in env:
            node_index = int(env["JOB_COMPLETION_INDEX"])
    nodes = num_nodes or 1
    if nodes > 1 and node_index is None:
        raise click.UsageError("--num-nodes needs --node-index (or SLURM_ARRAY_TASK_ID / JOB_COMPLETION_INDEX)")
    return nodes, node_index or 0


# Options several commands share, spelled once.
READ_COMPRESSION = click.option(
    "--compression",
    type=click.Choice(["auto", "none", "gzip", "zlib"]),
    default="auto",
    show_default=True,
    help="auto: from the file's first bytes (a .gz name is not needed).",
)
AS_JSON = click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
QUIET = click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
# What a build (and a preview of one) may read: docs/building.md, 'What a build reads'.
ALLOW_OUTSIDE_ROOT = click.option(
    "--allow-outside-root",
    is_flag=True,
    help="Read files that annotation files and tables name outside their dataset's root (an absolute path, ../, "
    "a link leading out). Off: such an entry is refused; see docs/building.md, 'What a build reads'.",
)
ALLOW_SCHEME = click.option(
    "--allow-scheme",
    "allow_schemes",
    multiple=True,
    metavar="SCHEME",
    help="Read URLs of this scheme too (e.g. http), besides gs:// and s3:// (repeatable).",
)


def workers(what: str) -> Callable[[F], F]:
    """``-w/--workers``: how many ``what`` run in parallel."""
    return click.option("-w", "--workers", type=click.IntRange(min=1), help=f"{what} in parallel (default: the usable cores).")


# What a build and a reshard write, and where their shard tasks run: the same options for both.
FORMAT = click.option(
    "--format",
    "format_",
    default="tfrecord",
    show_default=True,
    metavar="NAMES",
    help="Shard container: tfrecord, arrayrecord (random access for Grain and JAX; needs shardkit[arrayrecord]), "
    "or both from one plan: tfrecord,arrayrecord (each record encoded once, the same bytes in both).",
)
COMPRESSION = click.option(
    "--compression", type=click.Choice(["none", "gzip"]), default="none", show_default=True, help="TFRecord shards: GZIP each file."
)
FSYNC = click.option(
    "--fsync/--no-fsync",
    default=True,
    show_default=True,
    help="Flush each shard to stable storage before committing it. --no-fsync is for scratch disks: "
    "a killed run still resumes safely, but a power cut may lose recently finished shards.",
)
INDEX = click.option(
    "--index/--no-index",
    default=True,
    show_default=True,
    help="Write NAME.idx beside each uncompressed shard (offset and length per record, for DALI and PyTorch readers).",
)
EXECUTOR = click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; dask: every shard task on a Dask cluster.",
)
SCHEDULER = click.option(
    "--scheduler",
    envvar="SHARDKIT_DASK_SCHEDULER",
    metavar="tcp://HOST:8786",
    help="Dask scheduler address for --executor dask [env: SHARDKIT_DASK_SCHEDULER].",
)


def executor_named(executor: str, scheduler: str | None) -> Any:
    """The executor ``--executor``/``--scheduler`` name: None for the local pool, or a ``DaskExecutor``."""
    if executor != "dask":
        return None
    if not scheduler:
        raise click.UsageError("--executor dask needs --scheduler tcp://HOST:PORT (or SHARDKIT_DASK_SCHEDULER)")
    from shardkit.executors import DaskExecutor

    return DaskExecutor(scheduler)
