"""``shardkit.preview``: which picture PATHS ask for, made and optionally saved.

Index files, folders of them or ``from_folder`` (an ImageFolder tree) are inputs: the picture is
entries with their augmented copies, as the build will write them. A built output, TFRecord
files, folders or patterns of them are shards: the picture is a sample of records, or with
``labels`` the label balance. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shardkit.errors import ShardkitError, UsageError
from shardkit.output.found import expand, is_output
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs import registry
from shardkit.storage import atomic, location, protected

if TYPE_CHECKING:
    from PIL import Image

ENTRIES = 6  # entries drawn before a build
RECORDS = 16  # records drawn after one


def preview(
    paths: Sequence[str | Path] = (),
    out: str | Path | None = None,
    *,
    config: Config | str | Path | None = None,
    from_folder: str | Path | None = None,
    split: str | None = None,
    ignore: Sequence[str] = (),
    count: int | None = None,
    copies: int = 4,
    seed: int = 0,
    labels: bool = False,
    stats: bool = False,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    allow_schemes: Sequence[str] = (),
) -> Image.Image:
    """A contact sheet of ``paths`` as a PIL image (notebooks show it inline), also written to
    ``out`` when given: a ``.png``, ``.jpg`` or ``.webp`` path that is none of the inputs (else a
    ``UsageError`` before any work).

    Before a build (index files, or ``from_folder``): ``count`` entries (6, at most 64) spread over
    the inputs (of ``split``, when given; ``ignore`` as the build's), each as the original and
    ``copies`` (at most 16) augmented copies: for a given ``seed``, the pixels the build writes
    (``image_root``, ``allow_outside_root``, ``allow_schemes``: as the build's).
    After one (an output, TFRecord files): ``count`` records (16) sampled with ``seed``, or with
    ``labels`` the class counts per split and their spread over shards, or with ``stats`` the
    statistics (``shardkit.stats``) as histograms: per split (or ``split``'s alone), class counts,
    numbers' buckets, pictures' per-channel pixel histograms with their mean and std, texts' top values.
    """
    names = [os.fspath(p) for p in paths]
    if count is not None and count < 1:
        raise UsageError("-n must be at least 1")
    if out is not None:
        given = [*names, *(os.fspath(p) for p in (config, from_folder) if isinstance(p, str | os.PathLike))]
        check_picture_path(os.fspath(out), given, None if from_folder is None else os.fspath(from_folder))
    if labels and stats:
        raise UsageError("--labels and --stats draw different pictures: give one")
    if stats:
        from shardkit.view.histograms import statistics_sheet

        picture = statistics_sheet(names, split=split)
    elif labels:
        from shardkit.view.balance import balance_sheet

        picture = balance_sheet(names)
    elif from_folder is not None or config is not None or not _are_shards(names):
        from shardkit.view.augmentations import augmentation_sheet

        folder = None if from_folder is None else os.fspath(from_folder)
        picture = augmentation_sheet(
            names, config=config, from_folder=folder, split=split, ignore=ignore, entries=count or ENTRIES, copies=copies, seed=seed,
            image_root=image_root, allow_outside_root=allow_outside_root, allow_schemes=allow_schemes,
        )  # fmt: skip
    else:
        from shardkit.view.records import record_sheet

        picture = record_sheet(names, split=split, count=count or RECORDS, seed=seed)
    if out is not None:
        save(picture, os.fspath(out))
    return picture


PICTURE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP"}


def check_picture_path(out: str, given: Sequence[str], image_root: str | None) -> None:
    """Refuse, before any work, a picture path that would overwrite something other than a picture
    preview wrote: an index file or a config passed where ``out`` goes (``-o data/train.txt``), one
    of the paths given, a file in the ImageFolder tree (an image there is one of the build's
    inputs), or any file that exists without preview's mark (an image an index file lists)."""
    if not location.is_url(out) and os.path.isdir(location.local_path(out)):
        raise UsageError(f"{out}: is a folder; give -o a .png, .jpg or .webp path")
    suffix = os.path.splitext(out)[1].lower()
    if suffix not in PICTURE_FORMATS:
        raise UsageError(f"{out}: not a picture's name; give -o a .png, .jpg or .webp path")
    target = protected.real(out)
    for path in given:
        if protected.real(path) == target:
            raise UsageError(f"{out}: is one of preview's inputs; give -o a new .png, .jpg or .webp path")
    if image_root is not None and protected.inside(target, protected.real(image_root)):
        raise UsageError(f"{out}: is inside the ImageFolder tree {image_root}, where a picture is an input; give -o a path outside it")
    if location.exists(out) and not _written_by_preview(out):
        # An image an index file lists is an input too, and its name says nothing of it: a picture
        # preview wrote carries its mark, anything else at that name is never overwritten.
        raise UsageError(f"{out}: exists and is not a picture shardkit preview wrote, which it never overwrites; give -o a new path")


_SOFTWARE = 0x0131  # the EXIF tag naming the program that made a picture
_MARK = "shardkit preview"


def _written_by_preview(path: str) -> bool:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(location.read_bytes(path))) as picture:
            return bool(picture.getexif().get(_SOFTWARE) == _MARK)
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError):
        return False


def _are_shards(paths: Sequence[str]) -> bool:
    """Whether ``paths`` name shards (an output, TFRecord files) rather than inputs: index files
    (files an input format claims) are inputs; the rest are shards when ``inspect`` would take
    them all. An output whose manifest is damaged is shards, and its error is raised, not taken
    for inputs."""
    if not paths or any(registry.file_format(p.rstrip("/")) is not None for p in paths):
        return False
    try:
        expand(paths)
    except ShardkitError:
        if any(is_output(p) for p in paths if "*" not in p and "?" not in p):
            raise
        return False
    return True


def save(picture: Image.Image, path: str) -> None:
    """Write the picture whole or not at all, on a disk or in a bucket."""
    from PIL import Image

    kind = PICTURE_FORMATS.get(os.path.splitext(path)[1].lower(), "PNG")
    buffer = io.BytesIO()
    mark = Image.Exif()
    mark[_SOFTWARE] = _MARK  # what lets a later preview replace this picture, and nothing else
    picture.save(buffer, kind, exif=mark, **({"quality": 90} if kind == "JPEG" else {"optimize": True}))
    if not location.is_url(path):
        path = os.path.abspath(path)
    atomic.write_atomic(path, buffer.getvalue(), durable=False)
