"""ImageFolder trees -> rows: the layout (``ROOT/<split>/<class>/<img>`` or ``ROOT/<class>/<img>``),
and each split's images by class, streamed, on a local disk or in a bucket.

No image is opened. A local tree is walked with ``os``; a tree in a bucket is listed through
``storage.location`` (a store has no folders, only object names with ``/``), its images named by URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from shardkit.errors import ShardkitError
from shardkit.pipeline.inputs.index_files import FOLDER_COLUMNS, IMAGE_SUFFIXES, Row
from shardkit.storage import location

_NO_CLASSES = "no class folders (expected ROOT/<class>/<image> or ROOT/<split>/<class>/<image>)"


def folder_splits(root: str | Path) -> list[tuple[str, str]]:
    """ImageFolder layout -> (split, folder of its class folders).

    ``ROOT/<split>/<class>/<img>`` when every folder under ROOT holds only folders, else
    ``ROOT/<class>/<img>`` as split ``train``.
    """
    root = os.fspath(root)
    if location.is_url(root):
        return _url_folder_splits(location.absolute(root))
    path = Path(root)
    if not path.is_dir():
        raise ShardkitError(f"{path}: no such folder")
    top = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not top:
        raise ShardkitError(f"{path}: {_NO_CLASSES}")
    nested = all(not any(f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES for f in d.iterdir()) for d in top)
    return [(d.name, str(d)) for d in top] if nested else [("train", str(path))]


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def _url_folder_splits(root: str) -> list[tuple[str, str]]:
    """``folder_splits`` in a bucket, from one listing: a store has no folders, only names with ``/``."""
    files = [name.split("/") for name in location.walk_files(root)]
    if not files:
        raise ShardkitError(f"{root}: no such folder (no objects under it)")
    top = sorted({parts[0] for parts in files if len(parts) > 1 and not parts[0].startswith(".")})
    if not top:
        raise ShardkitError(f"{root}: {_NO_CLASSES}")
    nested = not any(len(parts) == 2 and parts[0] in top and _is_image(parts[1]) for parts in files)
    return [(d, location.join(root, d)) for d in top] if nested else [("train", root)]


def folder_split_rows(root: str | Path, split_root: str | Path) -> Iterator[Row]:
    """One split's images as Row(image path, class name), streamed; line numbers count images."""
    root, split_root = os.fspath(root), os.fspath(split_root)
    if location.is_url(split_root):
        yield from _url_folder_split_rows(location.absolute(root), split_root)
        return
    number = 0
    for class_dir in sorted(p for p in Path(split_root).iterdir() if p.is_dir() and not p.name.startswith(".")):
        for image in sorted(class_dir.iterdir()):
            if image.is_file() and image.suffix.lower() in IMAGE_SUFFIXES:
                number += 1
                key = image.relative_to(root).as_posix()
                # Absolute: entries resolve a relative value against the row's source folder, which
                # would join a relative ROOT twice (photos/train/photos/train/cat/x.jpg).
                yield Row(split_root, number, (str(image.absolute()), class_dir.name), FOLDER_COLUMNS, key)


def _url_folder_split_rows(root: str, split_root: str) -> Iterator[Row]:
    """``folder_split_rows`` in a bucket: the images directly in each class folder, by name, as URLs."""
    under = split_root[len(root) :].strip("/")  # "" when the split is ROOT itself
    images = sorted(
        (cls, name)
        for cls, _, name in (path.partition("/") for path in location.walk_files(split_root))
        if name and "/" not in name and not cls.startswith(".") and _is_image(name)
    )
    for number, (cls, name) in enumerate(images, start=1):
        key = f"{under}/{cls}/{name}" if under else f"{cls}/{name}"
        yield Row(split_root, number, (location.join(split_root, cls, name), cls), FOLDER_COLUMNS, key)


def folder_rows(root: str | Path) -> Iterator[tuple[str, Row]]:
    """Every image of an ImageFolder tree as (split, Row), split by split."""
    for split, split_root in folder_splits(root):
        for row in folder_split_rows(root, split_root):
            yield split, row
