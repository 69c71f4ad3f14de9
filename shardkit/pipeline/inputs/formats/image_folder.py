"""ImageFolder trees: the layout (``ROOT/<split>/<class>/<img>`` or ``ROOT/<class>/<img>``), and
each split's images by class as rows, streamed, on a local disk or in a bucket.

A class folder is walked down, as torchvision's ``ImageFolder`` walks it: an image in a folder
under it (``cat/more/x.jpg``) is of its class. No image is opened. A local tree is walked with
``os``, through links to folders; a tree in a bucket is listed through
``storage.location`` (a store has no folders, only object names with ``/``), its images named by
URL. A row's plan payload is ``[image, class, key]`` as JSON: the key (the image's path under
ROOT) is its identity.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

from shardkit.errors import EntryError, ShardkitError, printable
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

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
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


def folder_split_rows(root: str | Path, split_root: str | Path) -> Iterator[Row | EntryError]:
    """One split's images as Row(image path, class name), streamed; line numbers count entries.

    Each class folder is walked down, through links to folders, as torchvision's ``ImageFolder``
    does (``os.walk(followlinks=True)``): ``cat/more/x.jpg`` is a ``cat``. What cannot be an
    image is an ``EntryError`` naming it, never left out: a link that leads nowhere or in a loop,
    a link back to a folder it is in, a folder that cannot be listed, a name that is not UTF-8.
    """
    root, split_root = os.fspath(root), os.fspath(split_root)
    if location.is_url(split_root):
        yield from _url_folder_split_rows(location.absolute(root), split_root)
        return
    number = 0
    for class_dir in sorted(p for p in Path(split_root).iterdir() if p.is_dir() and not p.name.startswith(".")):
        for found in _images_under(class_dir):
            number += 1
            if isinstance(found, tuple):  # a place that should be an image and is not
                yield EntryError(split_root, number, f"{printable(found[0])}: {found[1]}")
                continue
            key = found.relative_to(root).as_posix()
            if not _utf8(key):
                yield EntryError(split_root, number, f"{printable(str(found))}: {_NOT_UTF8} {printable(root)})")
                continue
            # Absolute: entries resolve a relative value against the row's source folder, which
            # would join a relative ROOT twice (photos/train/photos/train/cat/x.jpg).
            yield Row(split_root, number, (str(found.absolute()), class_dir.name), FOLDER_COLUMNS, key)


# A name goes into the shards as text (source_id, errors.jsonl, the label map), which TensorFlow's
# string ops, TFDS and JSON read as UTF-8: bytes that are not would break those readers far
# from here, and an escaped stand-in is not the name the user searches for.
_NOT_UTF8 = "the name is not UTF-8, and a record stores it as text: rename it (e.g. convmv -f latin1 -t utf-8 -r --notest"


def _images_under(class_dir: Path) -> Iterator[Path | tuple[str, str]]:
    """The image files under ``class_dir``, depth first by name, through links to folders; each
    place that should be one and is not, as (path, problem). A hidden folder is not walked."""
    stack = [(iter(_entries(class_dir)), frozenset({os.path.realpath(class_dir)}))]
    while stack:
        entries, above = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
        elif isinstance(entry, tuple):
            yield entry
        elif _is_dir(entry):
            if entry.name.startswith("."):
                continue
            real = os.path.realpath(entry.path)
            if real in above:  # torchvision walks such a loop until the path is too long
                yield entry.path, f"a symbolic link back to {printable(real)}, a folder it is in: remove the link"
            else:
                stack.append((iter(_entries(Path(entry.path))), above | {real}))
        elif _is_image(entry.name):
            problem = _not_a_file(entry)
            yield Path(entry.path) if problem is None else (entry.path, problem)
        elif entry.is_symlink() and not os.path.splitext(entry.name)[1] and not os.path.exists(entry.path):
            yield entry.path, _not_a_file(entry) or "a broken symbolic link"  # it may have led to a folder of images


def _entries(folder: Path) -> Sequence[os.DirEntry[str] | tuple[str, str]]:
    try:
        with os.scandir(folder) as found:
            return sorted(found, key=lambda e: e.name)
    except OSError as exc:
        return [(str(folder), f"cannot list this folder: {exc.strerror or exc}")]


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # through a link, as os.walk(followlinks=True)
    except OSError:
        return False


def _not_a_file(entry: os.DirEntry[str]) -> str | None:
    """Why ``entry``, named like an image, cannot be read as one; None where it can."""
    try:
        if entry.is_file():
            return None
        os.stat(entry.path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop: remove the link or point it at the image"
        if entry.is_symlink() and isinstance(exc, FileNotFoundError):
            return f"a symbolic link to {printable(os.readlink(entry.path))}, which does not exist: remove the link or restore its target"
        return f"cannot read: {exc.strerror or exc}"
    return "not a regular file"  # a FIFO would block the worker that opens it


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # os hands a name's non-UTF-8 bytes over as surrogate escapes
        return False
    return True


def _url_folder_split_rows(root: str, split_root: str) -> Iterator[Row]:
    """``folder_split_rows`` in a bucket: the images under each class folder (one listing), by
    name, as URLs; a store's names are UTF-8 and it has no links."""
    under = split_root[len(root) :].strip("/")  # "" when the split is ROOT itself
    images = sorted(
        (cls, name)
        for cls, _, name in (path.partition("/") for path in location.walk_files(split_root))
        if name and not cls.startswith(".") and not _hidden_folder(name) and _is_image(name)
    )
    for number, (cls, name) in enumerate(images, start=1):
        key = f"{under}/{cls}/{name}" if under else f"{cls}/{name}"
        yield Row(split_root, number, (location.join(split_root, cls, name), cls), FOLDER_COLUMNS, key)


def _hidden_folder(name: str) -> bool:
    """Whether the name ``a/.b/c.jpg`` under a class folder is in a hidden folder (not walked, as on a disk)."""
    return any(part.startswith(".") for part in name.split("/")[:-1])


def folder_rows(root: str | Path) -> Iterator[tuple[str, Row | EntryError]]:
    """Every image of an ImageFolder tree as (split, Row), split by split."""
    for split, split_root in folder_splits(root):
        for row in folder_split_rows(root, split_root):
            yield split, row
