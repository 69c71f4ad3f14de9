"""ImageFolder trees: the layout (``ROOT/<split>/<class>/<img>`` or ``ROOT/<class>/<img>``), and
each split's images by class as rows, streamed, on a local disk or in a bucket.

No image is opened. A local tree is walked with ``os``; a tree in a bucket is listed through
``storage.location`` (a store has no folders, only object names with ``/``), its images named by
URL. A row's plan payload is ``[image, class, key]`` as JSON: the key (the image's path under
ROOT) is its identity.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from shardkit.errors import ShardkitError
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.storage import location

FOLDER_COLUMNS = ("image", "label")  # the columns of an ImageFolder row
_NO_CLASSES = "no class folders (expected ROOT/<class>/<image> or ROOT/<split>/<class>/<image>)"


@dataclasses.dataclass(frozen=True)
class ImageFolder(InputFormat):
    any_folder: ClassVar[bool] = True

    def claims_folder(self, root: str) -> bool:
        return True  # any folder: the layout of last resort, so the registry asks it last

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        # Each split's piece carries ROOT: a row's key is its image's path under ROOT.
        return [(split, Piece(split_root, context=root)) for split, split_root in folder_splits(root)]

    def folder_of(self, path: str) -> str:
        return location.absolute(path) if location.is_url(path) else str(Path(path).absolute())

    def read_rows(self, piece: Piece) -> Iterator[Row]:
        return folder_split_rows(piece.context, piece.path)

    def plan_payload(self, row: Row) -> str:
        return json.dumps([*row.values, row.key])

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        values = json.loads(payload)
        return Row(source, line, tuple(values[:2]), FOLDER_COLUMNS, values[2])


IMAGE_FOLDER = ImageFolder("folder")


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
