"""The ``reshard`` command: its options -> ``ReshardOptions`` -> one API call -> a summary line."""

from __future__ import annotations

from typing import Any

import click

from shardkit.cli.options import QUIET, workers
from shardkit.cli.reporting import friendly_errors
from shardkit.errors import UsageError
from shardkit.output import layout
from shardkit.units import plural


class _UsageLine(click.ClickException):
    """A bad option or PATH: one ``Error:`` line, exit 2 as click's own usage errors."""

    exit_code = 2


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("-o", "--out", required=True, type=click.Path(path_type=str), help="Output folder (not inside an input's folder).")
@click.option("--split", help="Put every input file in this split instead of the one its name says.")
@click.option("--shards", type=click.IntRange(min=1), metavar="M", help="Shards per split.")
@click.option("--records-per-shard", type=click.IntRange(min=1), metavar="R", help="Or: records per shard.")
@click.option(
    "--shard-size",
    metavar="SIZE",
    help="Or: bytes per shard, e.g. 256MB or 1GiB. Without any of the three, shards of about 128 MB (at most 100,000 records).",
)
@click.option(
    "--multiple-of",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="H",
    help="Round each split's shard count up to a multiple of H (hosts x loader workers), never under H.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the global shuffle.")
@click.option(
    "--shuffle/--no-shuffle",
    default=True,
    show_default=True,
    help="A uniform permutation of each split's records across all inputs (every shard a uniform sample of its split). "
    "--no-shuffle keeps the inputs' order.",
)
@click.option(
    "--format",
    "format_",
    default="tfrecord",
    show_default=True,
    metavar="NAMES",
    help="Output container: tfrecord, arrayrecord (for Grain and JAX; needs shardkit[arrayrecord]), or both: tfrecord,arrayrecord.",
)
@click.option(
    "--compression", type=click.Choice(["none", "gzip"]), default="none", show_default=True, help="TFRecord shards: GZIP each file."
)
@click.option("--index/--no-index", default=True, show_default=True, help="Write NAME.idx beside each uncompressed TFRecord shard.")
@workers("Files indexed and shards written")
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help=f"On a damaged record: stop, naming its file and byte offset, or leave it out and list it in OUT/{layout.ERRORS}.",
)
@click.option("--overwrite", is_flag=True, help="Replace a different build or reshard already in OUT.")
@click.option("--fsync/--no-fsync", default=True, show_default=True, help="Flush each shard to stable storage before committing it.")
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; dask: every shard task on a Dask cluster whose workers see OUT's folder.",
)
@click.option(
    "--scheduler",
    envvar="SHARDKIT_DASK_SCHEDULER",
    metavar="tcp://HOST:8786",
    help="Dask scheduler address for --executor dask [env: SHARDKIT_DASK_SCHEDULER].",
)
@QUIET
@click.option("--progress", "force_progress", is_flag=True, help="Show the progress bars even when stderr is not a terminal.")
@friendly_errors
def reshard(
    paths: tuple[str, ...],
    out: str,
    format_: str,
    compression: str,
    executor: str,
    scheduler: str | None,
    quiet: bool,
    force_progress: bool,
    **options: Any,
) -> None:
    """Write existing shards again: balanced, globally shuffled, sized for the hosts that read them, or converted.

    PATHS are a shardkit output, a TFDS prepared folder, or TFRecord/ArrayRecord files, folders or
    globs (local, gs:// or s3://). Re-running the same command resumes an interrupted reshard.
    """
    from shardkit.api import ReshardOptions, reshard_with

    dask_executor = None
    if executor == "dask":
        if not scheduler:
            raise click.UsageError("--executor dask needs --scheduler tcp://HOST:PORT (or SHARDKIT_DASK_SCHEDULER)")
        from shardkit.executors import DaskExecutor

        dask_executor = DaskExecutor(scheduler)
    try:
        made = ReshardOptions(
            executor=dask_executor,
            format=format_,
            compression=None if compression == "none" else compression,
            progress=False if quiet else (True if force_progress else None),
            **options,
        )
        result = reshard_with(paths, out, made)
    except UsageError as exc:
        raise _UsageLine(str(exc)) from None
    if quiet:
        return
    splits = ", ".join(
        f"{name} {plural(s.records, 'record')} in {plural(len(s.shards), 'shard')}" for name, s in result.manifest.splits.items()
    )
    reused = f", {result.shards_reused} kept from an earlier run" if result.shards_reused else ""
    rate = f" ({result.records_per_second:.0f} records/s)" if result.records_written else ""
    click.echo(f"resharded into {plural(result.shards_written, 'shard')}{reused} in {result.seconds:.1f}s{rate}: {splits}")
    if result.skipped:
        click.echo(f"left out {plural(result.skipped, 'damaged record')}: see {result.out_dir}/{layout.ERRORS}", err=True)
    click.echo(f"manifest: {result.out_dir}/{layout.MANIFEST}")
