"""The ``stats`` command: per split and feature, what the records hold."""

from __future__ import annotations

import json

import click

from shardkit.cli.options import AS_JSON, workers
from shardkit.cli.reporting import friendly_errors


@click.command()
@click.argument("paths", nargs=-1, required=True)
@workers("Files read at once, for shard files")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False), help="Also write the DatasetFeatureStatisticsList here.")
@click.option(
    "--pixels",
    is_flag=True,
    help="Decode every picture to measure its pixels' mean and std (a build measures those it decodes; this reads the shards again).",
)
@AS_JSON
@friendly_errors
def stats(paths: tuple[str, ...], workers: int | None, output: str | None, pixels: bool, as_json: bool) -> None:
    """Statistics of every feature, split by split: numbers' range, mean, std and quantiles, texts'
    distinct and top values, images' formats and per-channel pixel mean and std for Normalize.

    PATHS is a shardkit output folder (its statistics.pb, written by the build) or shard files,
    folders of them or globs (TFRecord, ArrayRecord), read in one pass. TFDV and Facets read
    statistics.pb (or --output): tfdv.load_stats_binary, tfdv.visualize_statistics.
    """
    import shardkit

    found = shardkit.stats(paths, workers=workers, output=output, pixels=pixels)
    click.echo(json.dumps(found.to_dict(), indent=2) if as_json else "\n".join(found.lines()))
