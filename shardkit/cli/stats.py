"""The ``stats`` command for shard files: per feature, what their records hold, in one pass."""

from __future__ import annotations

import json
from typing import Any

import click

from shardkit.cli.options import AS_JSON, READ_COMPRESSION, workers
from shardkit.cli.reporting import friendly_errors
from shardkit.units import plural


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the statistics here, a DatasetFeatureStatisticsList (binary).")
@workers("Files read")
@READ_COMPRESSION
@AS_JSON
@friendly_errors
def stats(paths: tuple[str, ...], output: str | None, workers: int | None, compression: str, as_json: bool) -> None:
    """Statistics of TFRecord or ArrayRecord files, whoever wrote them: per feature its count,
    missing records, min, max, mean, std and quantiles of numbers, distinct and top values of text.

    PATHS are files, folders of them or globs; every record is read once, a file to a worker.
    --output writes the proto TFDV's load_stats_binary and Facets read.
    """
    import shardkit
    from shardkit.executors import default_workers

    found = shardkit.file_statistics(paths, workers=workers or default_workers(), compression=compression, output=output)
    proto = found.proto()
    if as_json:
        from google.protobuf import json_format

        click.echo(json.dumps(json_format.MessageToDict(proto), indent=2))
        return
    click.echo(f"{plural(found.records, 'record')} in {plural(len(found.files), 'file')} ({found.seconds:.1f} s)")
    for feature in proto.datasets[0].features:
        click.echo(_line(feature))
    if output:
        click.echo(f"wrote {output}")


def _line(feature: Any) -> str:
    name = ".".join(feature.path.step)
    kind = feature.WhichOneof("stats")
    stats = getattr(feature, kind)
    common = stats.common_stats
    head = f"{name}: {common.num_non_missing:,} present, {common.num_missing:,} missing"
    if common.max_num_values != 1 or common.min_num_values != 1:
        head += f", {common.min_num_values}-{common.max_num_values} values"
    if kind == "num_stats":
        spread = f"mean {stats.mean:.6g}, std {stats.std_dev:.6g}"
        return f"{head}; min {stats.min:.6g}, max {stats.max:.6g}, {spread}, zeros {stats.num_zeros:,}"
    if kind == "string_stats":
        estimate = any(c.name == "unique_is_estimate" for c in feature.custom_stats)
        top = ", ".join(f"{v.value[:24]!r} {int(v.frequency):,}" for v in list(stats.top_values)[:3])
        return f"{head}; {'~' if estimate else ''}{stats.unique:,} distinct; top {top}"
    return f"{head}; {stats.avg_num_bytes:,.0f} bytes on average ({stats.min_num_bytes:,.0f}-{stats.max_num_bytes:,.0f})"
