"""The ``shardkit`` command: parse options, make one API call, print the result.

Library errors become one-line errors (exit 1), usage errors exit 2, and Ctrl-C and SIGTERM one
line saying what was kept (exit 130 or 143): see ``cli_reporting``. Nothing here imports
TensorFlow, so ``shardkit --help`` is instant.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from shardkit import interrupts
from shardkit.cli.options import PathOrURL, node_share, set_storage_options
from shardkit.cli.preview import preview
from shardkit.cli.reporting import friendly_errors
from shardkit.units import plural
from shardkit.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="shardkit")
@click.option("--debug", is_flag=True, envvar="SHARDKIT_DEBUG", help="Show the traceback behind an error or an interrupt.")
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Passed to the fsspec filesystem of gs:// and s3:// paths (repeatable; VALUE may be JSON), e.g. "
    "--storage-option requester_pays=true. Credentials and endpoints come from the usual places (AWS_*, "
    "Application Default Credentials, STORAGE_EMULATOR_HOST).",
)
def main(debug: bool, storage_options: tuple[str, ...]) -> None:
    """Turn image datasets into TFRecord shards fast, safely and reproducibly."""
    if storage_options:
        set_storage_options(storage_options)


@main.command()
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
@click.option("--compression", type=click.Choice(["none", "gzip"]), default="none", show_default=True)
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="On a bad entry: stop naming file and line, or skip it and list it in OUT/errors.jsonl.",
)
@click.option("--overwrite", is_flag=True, help="Replace a different build already in OUT.")
@click.option(
    "--fsync/--no-fsync",
    default=True,
    show_default=True,
    help="Flush each shard to stable storage before committing it. --no-fsync is for scratch disks: "
    "a killed build still resumes safely, but a power cut may lose recently finished shards.",
)
@click.option(
    "--index/--no-index",
    default=True,
    show_default=True,
    help="Write NAME.idx beside each uncompressed shard (offset and length per record, for DALI and PyTorch readers).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; dask: every shard task on a Dask cluster.",
)
@click.option(
    "--scheduler",
    envvar="SHARDKIT_DASK_SCHEDULER",
    metavar="tcp://HOST:8786",
    help="Dask scheduler address for --executor dask [env: SHARDKIT_DASK_SCHEDULER].",
)
@click.option("--num-nodes", type=click.IntRange(min=1), help="Split the plan over N batch nodes [default: SLURM_ARRAY_TASK_COUNT or 1].")
@click.option(
    "--node-index",
    type=click.IntRange(min=0),
    help="This node's share, 0..N-1 [default: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, or JOB_COMPLETION_INDEX].",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
@click.option("--progress", "force_progress", is_flag=True, help="Show the progress bar even when stderr is not a terminal.")
@friendly_errors
def build(
    indexes: tuple[str, ...],
    out: str,
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
    dask_executor = None
    if executor == "dask":
        if not scheduler:
            raise click.UsageError("--executor dask needs --scheduler tcp://HOST:PORT (or SHARDKIT_DASK_SCHEDULER)")
        from shardkit.executors import DaskExecutor

        dask_executor = DaskExecutor(scheduler)
    built = BuildOptions(
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
        f"{name} {plural(s['records'], 'record')} in {plural(len(s['shards']), 'shard')}" for name, s in result.manifest["splits"].items()
    )
    reused = f", {result.shards_reused} kept from an earlier run" if result.shards_reused else ""
    rate = f" ({result.records_per_second:.0f} records/s)" if result.records_built else ""
    click.echo(f"built {plural(result.shards_built, 'shard')}{reused} in {result.seconds:.1f}s{rate}: {splits}")
    if result.skipped:
        click.echo(f"skipped {plural(result.skipped, 'bad entry', 'bad entries')}: see {result.out_dir}/errors.jsonl", err=True)
    click.echo(f"manifest: {result.out_dir}/manifest.json")


@main.command()
@click.argument("out", type=PathOrURL(exists=True, file_okay=False, path_type=str))
@friendly_errors
def finalize(out: str) -> None:
    """Write OUT's manifest once every shard of a multi-node build is committed."""
    import shardkit

    result = shardkit.finalize(out)
    assert result.manifest is not None
    splits = ", ".join(f"{name} {plural(s['records'], 'record')}" for name, s in result.manifest["splits"].items())
    click.echo(f"finalized {plural(result.shards_reused, 'shard')}: {splits}\nmanifest: {result.out_dir}/manifest.json")


COMPRESSION = click.Choice(["auto", "none", "gzip", "zlib"])


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--records",
    "limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Records to sample from files without a manifest.",
)
@click.option("--all", "scan_all", is_flag=True, help="Sample every record.")
@click.option("--count", is_flag=True, help="Only count records exactly, by walking the framing (fast, no parsing).")
@click.option(
    "--compression",
    type=COMPRESSION,
    default="auto",
    show_default=True,
    help="auto: from the file's first bytes (a .gz name is not needed).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of tables.")
@friendly_errors
def inspect(paths: tuple[str, ...], limit: int, scan_all: bool, count: bool, compression: str, as_json: bool) -> None:
    """Show feature keys, dtypes, shapes and counts of TFRecord files or shardkit folders.

    PATHS are files, folders or globs. A shardkit folder is described from its manifest at once;
    other files are sampled and their schema inferred.
    """
    import shardkit
    from shardkit.check import report

    if count:
        counts = shardkit.count_records(paths, compression)
        if as_json:
            click.echo(json.dumps({"files": counts, "records": sum(c["records"] for c in counts)}, indent=2))
            return
        for c in counts:
            click.echo(f"{c['records']:>10}  {c['path']}" + (f"  ({c['problem']})" if c["problem"] else ""))
        total = sum(c["records"] for c in counts)
        click.echo(f"{total:>10}  {'record' if total == 1 else 'records'} in {plural(len(counts), 'file')}")
        return
    found = shardkit.inspect(paths, records=None if scan_all else limit, compression=compression)
    if as_json:
        click.echo(json.dumps(found, indent=2, default=str))
        return
    for info in found["outputs"]:
        click.echo("\n".join(report.output_text(info)))
    if found["files"] is not None:
        click.echo("\n".join(report.inferred_text(found["files"])))


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--deep", is_flag=True, help="Also parse every record against the schema and decode every image.")
@click.option("-w", "--workers", type=click.IntRange(min=1), help="Files checked in parallel (default: the usable cores).")
@click.option("--compression", type=COMPRESSION, default="auto", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of lines.")
@friendly_errors
def verify(paths: tuple[str, ...], deep: bool, workers: int | None, compression: str, as_json: bool) -> None:
    """Check every record's CRCs and framing, and a shardkit folder against its manifest.

    Exit code 0 when everything is whole, 1 when anything is wrong, 2 for usage errors.
    """
    import shardkit
    from shardkit.check import report
    from shardkit.executors import default_workers

    result = shardkit.verify(paths, deep=deep, workers=workers or default_workers(), compression=compression)
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else "\n".join(report.verify_text(result)))
    sys.exit(0 if result.ok else 1)


@main.command("snapshot-materialize")
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
@click.option("-q", "--quiet", is_flag=True)
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


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-w", "--workers", type=click.IntRange(min=1), help="Files indexed in parallel (default: the usable cores).")
@click.option("--compression", type=COMPRESSION, default="auto", show_default=True)
@friendly_errors
def index(paths: tuple[str, ...], workers: int | None, compression: str) -> None:
    """Write NAME.idx beside existing TFRecord files (offset and length per record, for DALI and PyTorch).

    Every record's CRCs are checked on the way; each index is written atomically. Compressed
    files cannot be indexed (readers seek in the uncompressed bytes).
    """
    import shardkit
    from shardkit.executors import default_workers

    reports = shardkit.write_idx_files(paths, workers or default_workers(), compression)
    for r in reports:
        click.echo(f"OK      {r.index} ({plural(r.records, 'record')})" if r.problem is None else f"FAILED  {r.path}: {r.problem}")
    sys.exit(0 if all(r.problem is None for r in reports) else 1)


main.add_command(preview)


def run() -> None:
    """The ``shardkit`` console script: ``main``, and once a command has ended on an interrupt,
    a second Ctrl-C while the interpreter shuts down changes nothing (exit 130 stays 130)."""
    try:
        main()
    except SystemExit as exc:
        if exc.code in (130, 143):
            interrupts.ignore_further()
        raise


if __name__ == "__main__":  # pragma: no cover
    run()
