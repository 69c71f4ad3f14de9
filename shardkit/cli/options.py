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
