"""The ``build`` and ``finalize`` commands: a build's options -> ``BuildOptions`` -> one API call -> a summary line."""

from __future__ import annotations

from typing import Any

import click

from shardkit.cli.options import (
    ALLOW_OUTSIDE_ROOT,
    ALLOW_SCHEME,
    COMPRESSION,
    EXECUTOR,
    FORMAT,
    FSYNC,
    INDEX,
    QUIET,
    SCHEDULER,
    PathOrURL,
    executor_named,
    node_share,
)
from shardkit.cli.reporting import friendly_errors
from shardkit.output import layout
from shardkit.units import plural


@click.command()
@click.argument("indexes", nargs=-1, type=click.Path(path_type=str))
# Not file_okay=False: the library refuses a file in one line that says what to do, as it does any other unusable OUT.
@click.option("-o", "--out", required=True, type=click.Path(path_type=str), help="Output folder.")
@click.option(
    "-c",
    "--config",
    type=PathOrURL(exists=True, dir_okay=False, path_type=str),
    help="YAML config mapping columns to features (default: image [+ mask or label] from the first line).",
)
@click.option(
    "--from-folder",
    type=PathOrURL(exists=True, file_okay=False, path_type=str),
    help="Build a classification set from ROOT/<split>/<class>/<img> or ROOT/<class>/<img>.",
)
@click.option("--split", help="Put every input in this split instead of the one its file name says.")
@click.option(
    "--image-root",
    type=PathOrURL(exists=True, file_okay=False, path_type=str),
    help="Resolve the inputs' relative image paths against this folder (default: the input's own folder; for COCO, "
    "the standard layout's image folder).",
)
@ALLOW_OUTSIDE_ROOT
@ALLOW_SCHEME
@click.option("--ignore", multiple=True, metavar="PATTERN", help="Skip index files whose name matches this glob (repeatable).")
@click.option(
    "--records-per-shard",
    type=click.IntRange(min=1),
    metavar="N",
    help="Input entries per shard (default: shards of about 128 MB, at most 100,000 records, and up to 16 shards "
    "per small split, never under 64 entries each; the same on every machine).",
)
@click.option(
    "-w", "--workers", type=click.IntRange(min=1), help="Worker processes, also for planning large index files (default: the usable cores)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the shuffle and of augmentation.")
@click.option(
    "--shuffle/--no-shuffle",
    default=True,
    show_default=True,
    help="Spread each split's entries over its shards, and each shard's records, in an order drawn from --seed. "
    "--no-shuffle keeps the inputs' order (sequences, video frames).",
)
@click.option(
    "--source-id/--no-source-id",
    default=True,
    show_default=True,
    help="Add a string feature source_id to every record: its input (index-file:line, or the path under --from-folder).",
)
@FORMAT
@COMPRESSION
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help=f"On a bad entry: stop naming file and line, or skip it and list it in OUT/{layout.ERRORS}.",
)
@click.option("--overwrite", is_flag=True, help="Replace a different build already in OUT.")
@click.option(
    "--duplicates",
    type=click.Choice(["report", "drop"]),
    help="Find duplicate inputs and train/test leaks (pictures by a perceptual hash, else records by their bytes): "
    "report them in OUT/duplicates.jsonl, the manifest and the summary; drop also leaves out the training side's twins "
    "of val and test inputs (val's of test) and all but the first of a group within a split.",
)
@click.option(
    "--duplicate-threshold",
    type=click.IntRange(0, 64),
    default=8,
    show_default=True,
    help="Pictures whose 64-bit perceptual hashes differ in at most this many bits are twins.",
)
@FSYNC
@INDEX
@EXECUTOR
@SCHEDULER
@click.option("--num-nodes", type=click.IntRange(min=1), help="Split the plan over N batch nodes [default: SLURM_ARRAY_TASK_COUNT or 1].")
@click.option(
    "--node-index",
    type=click.IntRange(min=0),
    help="This node's share, 0..N-1 [default: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, or JOB_COMPLETION_INDEX].",
)
@QUIET
@click.option("--progress", "force_progress", is_flag=True, help="Show the progress bar even when stderr is not a terminal.")
@friendly_errors
def build(
    indexes: tuple[str, ...],
    out: str,
    format_: str,
    compression: str,
    executor: str,
    scheduler: str | None,
    num_nodes: int | None,
    node_index: int | None,
    quiet: bool,
    force_progress: bool,
    **options: Any,
) -> None:
    """Build TFRecord shards from INDEX files or folders of them.

    Re-running the same command resumes an interrupted build.
    """
    from shardkit.api import BuildOptions, build_with

    # The options named above differ from BuildOptions' fields and are translated; the rest are its
    # fields by name, checked where it is made.
    nodes, node = node_share(num_nodes, node_index)
    dask_executor = executor_named(executor, scheduler)
    built = BuildOptions(
        format=format_,
        compression=None if compression == "none" else compression,
        executor=dask_executor,
        num_nodes=nodes,
        node_index=node,
        progress=False if quiet else (True if force_progress else None),
        **options,
    )
    result = build_with(indexes, out, built)
    if quiet:
        return
    if result.manifest is None:
        missing = f"{plural(result.shards_missing, 'shard')} of other nodes {'is' if result.shards_missing == 1 else 'are'}"
        click.echo(
            f"node {node} of {nodes}: built {plural(result.shards_built, 'shard')}, {result.shards_reused} kept; "
            f"{missing} not finished yet. The last node to finish writes the manifest, or run: shardkit finalize {result.out_dir}"
        )
        return
    splits = ", ".join(
        f"{name} {plural(s.records, 'record')} in {plural(len(s.shards), 'shard')}" for name, s in result.manifest.splits.items()
    )
    reused = f", {result.shards_reused} kept from an earlier run" if result.shards_reused else ""
    rate = f" ({result.records_per_second:.0f} records/s)" if result.records_built else ""
    click.echo(f"built {plural(result.shards_built, 'shard')}{reused} in {result.seconds:.1f}s{rate}: {splits}")
    for note in result.notes:
        click.echo(note, err=True)
    if result.skipped:
        click.echo(f"skipped {plural(result.skipped, 'bad entry', 'bad entries')}: see {result.out_dir}/{layout.ERRORS}", err=True)
    click.echo(f"manifest: {result.out_dir}/{layout.MANIFEST}")


@click.command()
@click.argument("out", type=PathOrURL(exists=True, file_okay=False, path_type=str))
@friendly_errors
def finalize(out: str) -> None:
    """Write OUT's manifest once every shard of a multi-node build is committed."""
    import shardkit

    result = shardkit.finalize(out)
    assert result.manifest is not None
    splits = ", ".join(f"{name} {plural(s.records, 'record')}" for name, s in result.manifest.splits.items())
    click.echo(f"finalized {plural(result.shards_reused, 'shard')}: {splits}\nmanifest: {result.out_dir}/{layout.MANIFEST}")
