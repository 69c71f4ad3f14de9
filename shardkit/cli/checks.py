"""The ``inspect``, ``verify`` and ``index`` commands: what TFRecord files hold, whether they are whole, their ``.idx`` files."""

from __future__ import annotations

import json
import sys

import click

from shardkit.cli.options import AS_JSON, READ_COMPRESSION, workers
from shardkit.cli.reporting import friendly_errors
from shardkit.units import plural


@click.command()
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
@READ_COMPRESSION
@AS_JSON
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


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--deep", is_flag=True, help="Also parse every record against the schema and decode every image.")
@workers("Files checked")
@READ_COMPRESSION
@AS_JSON
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


@click.command()
@click.argument("paths", nargs=-1, required=True)
@workers("Files indexed")
@READ_COMPRESSION
@friendly_errors
def index(paths: tuple[str, ...], workers: int | None, compression: str) -> None:
    """Write NAME.idx beside existing TFRecord files (offset and length per record, for DALI and PyTorch).

    Every record's CRCs are checked on the way; each index is written atomically. Compressed
    files cannot be indexed (readers seek in the uncompressed bytes). ArrayRecord files carry
    their own index: they are skipped, and said so.
    """
    import shardkit
    from shardkit.executors import default_workers

    reports = shardkit.write_idx_files(paths, workers or default_workers(), compression)
    for r in reports:
        if r.skipped is not None:
            click.echo(f"SKIPPED {r.path}: {r.skipped}")
        else:
            click.echo(f"OK      {r.index} ({plural(r.records, 'record')})" if r.problem is None else f"FAILED  {r.path}: {r.problem}")
    sys.exit(0 if all(r.problem is None for r in reports) else 1)
