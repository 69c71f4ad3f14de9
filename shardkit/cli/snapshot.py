"""The ``snapshot-materialize`` command: a build's shards preprocessed once into a ``tf.data`` snapshot."""

from __future__ import annotations

import click

from shardkit.cli.options import QUIET, PathOrURL
from shardkit.cli.reporting import friendly_errors
from shardkit.units import plural


@click.command("snapshot-materialize")
@click.argument("src", type=PathOrURL(exists=True, file_okay=False, path_type=str))
@click.option("-o", "--out", "snap", required=True, type=click.Path(path_type=str), help="Snapshot folder to write.")
@click.option(
    "--preprocess", metavar="MODULE:FUNCTION", help="A tf.data-mappable function from a feature dict to tensors (also FILE.py:FUNCTION)."
)
@click.option(
    "-c",
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="Take the preprocess function from this config's snapshot.preprocess.",
)
@click.option("--split", default="train", show_default=True)
@click.option(
    "--compression",
    type=click.Choice(["GZIP", "NONE"], case_sensitive=False),
    default="NONE",
    show_default=True,
    help="GZIP needs tf.data.Dataset.load(SNAP, compression='GZIP') to read it back.",
)
@click.option(
    "--num-shards",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Snapshot files, so a many-core training host reads them in parallel.",
)
@click.option("--overwrite", is_flag=True, help="Rebuild a snapshot whose source or preprocess code changed.")
@click.option("--dispatcher", metavar="grpc://HOST:PORT", help="Materialize on a tf.data service cluster (distributed_save).")
@QUIET
@friendly_errors
def snapshot_materialize(
    src: str,
    snap: str,
    preprocess: str | None,
    config: str | None,
    split: str,
    compression: str,
    num_shards: int,
    overwrite: bool,
    dispatcher: str | None,
    quiet: bool,
) -> None:
    """Run deterministic preprocessing over SRC once and save it with tf.data's own format.

    Training code then reads it with plain tf.data.Dataset.load(SNAP). A rerun with the same
    source and preprocess code is a no-op; a stale snapshot is refused unless --overwrite.
    """
    import shardkit

    if preprocess is None and config is None:
        raise click.UsageError("give --preprocess MODULE:FUNCTION, or a --config with snapshot.preprocess")
    result = shardkit.materialize_snapshot(
        src, snap, preprocess, config=config, split=split, compression=None if compression.upper() == "NONE" else "GZIP",
        num_shards=num_shards, overwrite=overwrite, progress=False if quiet else None, dispatcher=dispatcher,
    )  # fmt: skip
    if quiet:
        return
    if result.up_to_date:
        click.echo(f"{result.path} is up to date ({plural(result.records, 'record')}, same source and preprocess code): nothing to do")
    else:
        made = f"materialized {plural(result.records, 'record')} ({result.bytes / 1e6:.1f} MB)"
        click.echo(f"{made} into {result.path} in {result.seconds:.1f}s")
