"""The ``shardkit preview`` command: a picture of augmentations before a build, of records after it,
or of label balance. Registered on the ``shardkit`` group by ``cli``; parse, one API call, print."""

from __future__ import annotations

import click

from shardkit.cli.options import ALLOW_OUTSIDE_ROOT, ALLOW_SCHEME, PathOrURL
from shardkit.cli.reporting import friendly_errors


@click.command()
@click.argument("paths", nargs=-1)
# OUT is checked by the library (a picture's suffix, none of the inputs), so that every refusal is one line.
@click.option("-o", "--out", "picture", required=True, help="The picture to write (.png, .jpg or .webp).")
@click.option("-c", "--config", type=PathOrURL(exists=True, dir_okay=False, path_type=str), help="The build's config (before a build).")
@click.option("--from-folder", type=PathOrURL(exists=True, file_okay=False, path_type=str), help="An ImageFolder tree (before a build).")
@click.option(
    "--image-root",
    type=PathOrURL(exists=True, file_okay=False, path_type=str),
    help="Where the inputs' relative image paths resolve, as build's --image-root (before a build).",
)
@click.option("--split", help="The split to show (default: every split's inputs before a build; the first split after).")
@ALLOW_OUTSIDE_ROOT
@ALLOW_SCHEME
@click.option("--ignore", multiple=True, metavar="PATTERN", help="Skip index files whose name matches, as build does (repeatable).")
@click.option("-n", "count", type=click.IntRange(min=1), help="Entries before a build (default 6), records after one (default 16).")
@click.option("--copies", type=click.IntRange(0, 16), default=4, show_default=True, help="Augmented copies drawn beside each original.")
@click.option("--seed", type=int, default=0, show_default=True, help="The build's seed (the same pixels it writes), or the sample's.")
@click.option("--labels", is_flag=True, help="Draw a built output's label balance: class counts per split, and their spread over shards.")
@click.option("--stats", is_flag=True, help="Draw a built output's (or shard files') statistics: histograms, pixel mean and std.")
@friendly_errors
def preview(
    paths: tuple[str, ...],
    picture: str,
    config: str | None,
    from_folder: str | None,
    image_root: str | None,
    split: str | None,
    allow_outside_root: bool,
    allow_schemes: tuple[str, ...],
    ignore: tuple[str, ...],
    count: int | None,
    copies: int,
    seed: int,
    labels: bool,
    stats: bool,
) -> None:
    """Look before you build, and after: a contact sheet of PATHS.

    \b
    Index files or folders (with -c CONFIG) or --from-folder ROOT: N entries, each as the
      original and K augmented copies, exactly the pixels a build with --seed writes.
    A built output or TFRecord files: a reproducible random sample of records, decoded.
    --labels on a built output: class counts per split and how evenly shards hold them.
    --stats on a built output or shard files: the statistics `shardkit stats` prints, drawn.
    """
    from shardkit.api import preview as make_preview

    image = make_preview(
        list(paths),
        picture,
        config=config,
        from_folder=from_folder,
        split=split,
        ignore=ignore,
        count=count,
        copies=copies,
        seed=seed,
        labels=labels,
        stats=stats,
        image_root=image_root,
        allow_outside_root=allow_outside_root,
        allow_schemes=allow_schemes,
    )
    click.echo(f"wrote {picture} ({image.width}x{image.height})")
