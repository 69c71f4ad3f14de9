"""Darknet's YOLO files, and the label files every YOLO layout shares (Ultralytics kept
Darknet's): ``obj.data`` naming the splits' image lists and the class names, each image's labels
in a ``.txt`` beside it. ``obj.data`` names its own splits: ``file_splits``.

CVAT's "YOLO 1.1" export and datumaro's ``yolo`` format write ``obj.data`` as ``classes = 3``, a
line ``<split> = data/<split>.txt`` a split, ``names = data/obj.names`` and ``backup = backup/``;
``obj.names`` a class a line; ``<split>.txt`` an image a line (``data/obj_train_data/a.jpg``),
and each image's labels beside it (``obj_train_data/a.txt``). ``data/`` is where Darknet keeps
the export (its paths are against Darknet's own folder): a relative path is read against
``obj.data``'s folder, and where it is not there and starts with ``data/``, without that (as
datumaro reads them). Every key but ``classes``, ``names``, ``backup``, ``eval`` and ``results``
names a split, called as the key is: ``valid`` stays ``valid`` (datumaro writes a subset ``val``
as ``val = data/val.txt``: renaming ``valid`` would merge two). A split whose list is not there
is left out with a warning (Darknet's own ``coco.data`` says ``valid = coco_testdev``); none at
all is one line. ``classes``, where given, must count ``obj.names``. A label line is ``class cx
cy w h``, normalized (or a YOLO-seg polygon, whose extent is the box); an image with no label
file has no objects; a label file that is no regular file (a FIFO) or has a line past 64 KiB, a
bad label naming it. Rows are as in ``detection.yolo``: the source ``obj.data`` at line 0, a bad
list entry naming the list and its line, a bad label its file and line.

``unread_labels``: whether a plain image list would leave such labels unread.
"""

from __future__ import annotations

import dataclasses
import math
import os
import posixpath
import re
import stat
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from shardkit.errors import EntryError, ShardkitError, ShardkitWarning
from shardkit.formats.image_headers import IMAGE_SUFFIXES, image_format
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage.boundary import Boundary

_PEEK = 1 << 20  # a dataset's own files (obj.data, obj.names, classes.txt) are small
_SUFFIX = ".data"
_NOT_SPLITS = ("classes", "names", "backup", "eval", "results")  # Darknet's other keys
_KEY = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(.*)$")
_COMMENT = re.compile(r"\s+#.*$")  # "valid = valid.txt # optional", as CVAT's page shows it
_PREFIX = "data/"
SAMPLE = 8  # the images of a plain list looked at for labels beside them
_HEAD = 4096  # what a probe reads of a label file: its first line
_LINE_CHARS = 1 << 16  # a label line's bound: a YOLO-seg polygon of a thousand points is about 20,000 characters
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)  # O_NONBLOCK: a FIFO opens, not waited on


@dataclasses.dataclass(frozen=True)
class DataFile:
    """An ``obj.data`` as read: its class names, each split's image list (absolute), the splits
    whose list is not there."""

    path: str
    names: list[str]
    splits: dict[str, str]
    absent: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Darknet(DetectionFormat):
    def claims(self, path: str) -> bool:
        return _is_data_file(path)

    def claims_folder(self, root: str) -> bool:
        return bool(_data_files(root))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        found = _data_files(root)
        chosen = [p for p in found if os.path.basename(p) == "obj.data"] or found
        if len(chosen) > 1:
            raise ShardkitError(f"{root}: several Darknet .data files ({', '.join(map(os.path.basename, found))}): give the one to build")
        return self.file_splits(chosen[0])

    def file_splits(self, path: str) -> list[tuple[str, Piece]]:
        found = read_data(path)
        for split, given in found.absent:
            warnings.warn(f"{path}: {split} = {given}: no such image list: the split is left out", ShardkitWarning, stacklevel=2)
        return [(split, Piece(path, context=split)) for split in found.splits]

    def label_map(self, path: str) -> tuple[tuple[int, str], ...]:
        return tuple((i + 1, name) for i, name in enumerate(read_data(path).names))

    def root_of(self, path: str, image_root: str | None) -> str:
        """``obj.data``'s folder: its paths are read against it (``--image-root`` has nothing to resolve)."""
        return os.path.dirname(os.path.abspath(path))

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        found = read_data(source)
        root = self.root_of(source, None)
        rule, top = Boundary(), root if piece.confined else None  # None: --allow-outside-root
        list_file = found.splits[piece.context]
        if top is not None and (refused := rule.outside(list_file, top)) is not None:
            raise ShardkitError(f"{source}: {piece.context}: {refused}")
        for number, text in list_lines(list_file):
            image = local(root, text)
            labels = os.path.splitext(image)[0] + ".txt"
            refused = None if top is None else rule.outside(image, top) or rule.outside(labels, top)
            problem = refused or not_an_image(image)
            if problem is not None:
                yield EntryError(list_file, number, problem if refused else f"{image}: {problem}")
                continue
            yield labelled_row(source, image, labels, root, found.names)


def read_data(path: str) -> DataFile:
    """``obj.data`` as Darknet reads it: ``key = value`` lines, ``#`` comments; one line naming
    its line where it is not so, or names no class file, or no split is there."""
    root = os.path.dirname(os.path.abspath(path))
    keys: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(small_text(path, "a Darknet .data file").splitlines(), start=1):
        text = line.strip()
        if not text or text[0] in "#;":
            continue
        match = _KEY.match(text)
        if match is None:
            raise ShardkitError(f"{path}:{number}: expected key = value (Darknet's .data lines), got {text[:80]!r}")
        keys[match[1]] = (number, _COMMENT.sub("", match[2]).strip())
    if "names" not in keys:
        raise ShardkitError(f"{path}: names: missing (the file of class names: names = data/obj.names)")
    named_in = local(root, keys["names"][1])
    if Boundary().outside(named_in, root) is not None:  # its lines become the label map: never a file outside, flag or not
        number, given = keys["names"]
        raise ShardkitError(
            f"{path}:{number}: names = {given}: {named_in} is outside {root}: refused (copy the class names beside obj.data)"
        )
    names = class_list(named_in)
    if "classes" in keys:
        number, given = keys["classes"]
        count = given.split()[0] if given else ""
        if not count.isdigit() or int(count) != len(names):
            raise ShardkitError(f"{path}:{number}: classes = {given}, but {keys['names'][1]} names {len(names)} classes")
    named = {key: value for key, (_, value) in keys.items() if key not in _NOT_SPLITS and value}
    lists = {split: local(root, value) for split, value in named.items()}
    absent = tuple((split, named[split]) for split, found in lists.items() if not os.path.isfile(found))
    splits = {split: found for split, found in lists.items() if os.path.isfile(found)}
    if not splits:
        said = ", ".join(f"{s} = {v}" for s, v in absent) or "no key names one"
        raise ShardkitError(f"{path}: no split's image list is there ({said}): expected train = data/train.txt beside obj.data")
    return DataFile(path, names, splits, absent)


def local(root: str, given: str) -> str:
    """A path ``obj.data`` or a list gives, absolute: against ``root``; where it is not there and
    starts with ``data/`` (Darknet's folder for the export), without that."""
    text = posixpath.normpath(given.strip().replace("\\", "/"))
    found = os.path.normpath(os.path.join(root, text))
    if not os.path.exists(found) and text.startswith(_PREFIX):
        return os.path.normpath(os.path.join(root, text[len(_PREFIX) :]))
    return found


def list_lines(list_file: str) -> list[tuple[int, str]]:
    """The non-blank lines of an image list, stripped, with their numbers."""
    try:
        with open(list_file, encoding="utf-8-sig") as f:
            return [(n, line.strip()) for n, line in enumerate(f, start=1) if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ShardkitError(f"{list_file}: cannot read the image list: {getattr(exc, 'strerror', None) or exc}") from None


def _is_data_file(path: str) -> bool:
    """Whether ``path`` is a Darknet ``.data`` file: ``key = value`` lines, among them ``names``
    or ``classes`` and a split."""
    if not path.lower().endswith(_SUFFIX) or not os.path.isfile(path) or os.path.getsize(path) > _PEEK:
        return False
    try:
        with open(path, encoding="utf-8-sig") as f:
            found = {m[1] for m in (_KEY.match(line.strip()) for line in f) if m is not None}
    except (OSError, UnicodeDecodeError):
        return False
    return bool(found & {"names", "classes"}) and bool(found - set(_NOT_SPLITS))


def _data_files(root: str) -> list[str]:
    """The Darknet ``.data`` files directly in the folder ``root``."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [path for path in (os.path.join(root, n) for n in names) if _is_data_file(path)]


def unread_labels(list_file: str, images: Sequence[tuple[int, str]]) -> str | None:
    """Why building the plain image list ``list_file`` as images alone would leave YOLO labels
    unread: a ``.data`` file beside it names it, or one of ``images`` (line, absolute path; the
    first few) has a label file of YOLO lines beside it or in the parallel ``labels/`` folder;
    None where neither."""
    listed_as = os.path.abspath(list_file)
    for data in _data_files(os.path.dirname(listed_as)):
        try:
            splits = read_data(data).splits
        except ShardkitError:
            continue
        for split, found in splits.items():
            if found == listed_as:
                return f"{list_file}: the {split} image list of {data}; a list alone leaves its labels out: build {data} to read them"
    for line, image in images[:SAMPLE]:
        for labels in _label_files(image):
            if yolo_lines(labels):
                return (
                    f"{list_file}:{line}: {image} has YOLO labels ({labels}), which an image list leaves out: build the dataset "
                    "(its obj.data or data.yaml: a data.yaml naming this list as train: and the names reads them), "
                    "or give a --config to build the images alone"
                )
    return None


def _label_files(image: str) -> list[str]:
    """Where YOLO tools look for an image's labels: beside it (Darknet), the last ``images``
    folder made ``labels`` (Ultralytics)."""
    beside = os.path.splitext(image)[0] + ".txt"
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    parallel = os.path.splitext(labels.join(image.rsplit(images, 1)))[0] + ".txt"
    return [p for p in dict.fromkeys((beside, parallel)) if p != image]


def yolo_lines(path: str) -> bool | None:
    """Whether the file ``path`` starts with a YOLO label line (a class index and 4, or an even 6
    or more, numbers in [0, 1]); None where it says nothing: empty, absent, or not a regular file
    (a FIFO is never waited on). Its first 4 KiB are read: a sample, not the file."""
    try:
        fd = _open_regular(path)
        try:
            head = os.read(fd, _HEAD).decode("utf-8", "replace")
        finally:
            os.close(fd)
    except (OSError, _NotRegular):
        return None
    words = next((line.split() for line in head.splitlines() if line.strip()), [])
    if not words:
        return None
    if len(words) < 5 or (len(words) > 5 and len(words) % 2 == 0) or not words[0].isdigit():
        return False
    return all(_is_number(w) and 0.0 <= float(w) <= 1.0 for w in words[1:])


class _NotRegular(Exception):
    """A path that is there but is no regular file (a FIFO, a device, a folder)."""


def _open_regular(path: str) -> int:
    """A read descriptor of the regular file ``path``; ``_NotRegular`` where it is another kind.
    Opened without waiting (a FIFO's open would block until a writer comes), then told by
    ``fstat``: no window between the look and the read."""
    fd = os.open(path, _READ)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotRegular(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def class_list(path: str) -> list[str]:
    """The class names of a file with a class a line (``classes.txt``, Darknet's ``obj.names``),
    YOLO's class ``i`` on its ``i``-th non-blank line (as Darknet and datumaro read them)."""
    found = [(n, line.strip()) for n, line in enumerate(small_text(path, "a list of class names").splitlines(), start=1) if line.strip()]
    if not found:
        raise ShardkitError(f"{path}: no class names (expected one a line)")
    seen: dict[str, int] = {}
    for number, name in found:
        if name in seen:
            raise ShardkitError(f"{path}:{number}: {name!r} names two classes (line {seen[name]} too)")
        seen[name] = number
    return [name for _, name in found]


def small_text(path: str, what: str) -> str:
    """The UTF-8 text of a small file (a dataset's own: at most 1 MiB); one line where it is not."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_PEEK + 1)
        return raw.decode("utf-8-sig") if len(raw) <= _PEEK else _too_large(path, what)
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ShardkitError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x}): save it as UTF-8") from None


def _too_large(path: str, what: str) -> str:
    raise ShardkitError(f"{path}: larger than {_PEEK >> 20} MiB: not {what}")


def not_an_image(image: str) -> str | None:
    """Why a list's entry cannot be built (a missing file; a name with no image suffix whose
    content is no image either, such as a .txt); None where it can: an entry of a list the user
    wrote is never left out unsaid (Ultralytics drops those without an image suffix)."""
    try:
        if os.path.splitext(image)[1].lower() in IMAGE_SUFFIXES:
            return None if os.path.isfile(image) else "no such image file" if not os.path.exists(image) else "not a file"
        kind = image_format(image)  # .jfif from a browser, a name with no suffix: told by content
    except OSError as exc:
        return "no such image file" if isinstance(exc, FileNotFoundError) else f"cannot read: {exc.strerror or exc}"
    return None if kind is not None else "not an image (no image suffix, and Pillow does not know its content): a list names images only"


def labelled_row(source: str, image: str, labels: str, root: str, classes: list[str]) -> Row | EntryError:
    """The row of ``image`` (no line: messages name it by its path under ``root``) with the objects
    of its label file ``labels``; that file's error where a line of it is bad."""
    try:
        found = objects(labels, classes, os.path.relpath(labels, root))
    except EntryError as exc:
        return exc
    name = os.path.basename(image)
    return detection_row(source, 0, image, name, os.path.splitext(name)[0], found, os.path.relpath(image, root))


def objects(labels: str, classes: list[str], shown: str) -> dict[str, Any]:
    """An image's label file as a row's ``objects`` value (none where it has no file), each object
    called by its line (``shown``, the file as messages name it, and the line number); a bad line
    raises an ``EntryError`` naming the file and line."""
    boxes: list[list[float]] = []
    found: list[int] = []
    refs: list[str] = []
    for number, text in enumerate(_label_lines(labels), start=1):
        words = text.split()
        if not words:
            continue
        try:
            values = [float(w) for w in words]
        except ValueError:
            bad = next(w for w in words if not _is_number(w))
            raise EntryError(labels, number, f"{bad!r} is not a number") from None
        if not all(math.isfinite(v) for v in values):
            raise EntryError(labels, number, "a value is not finite")
        index = values[0]
        if not index.is_integer() or not 0 <= index < len(classes):
            raise EntryError(labels, number, f"class {words[0]} is not in names (0 to {len(classes) - 1})")
        boxes.append(_box(values[1:], labels, number))
        found.append(int(index))
        refs.append(f"{shown}:{number}")
    return {
        "units": "normalized",
        "bbox": boxes,
        "text": [classes[i] for i in found],
        "label": [i + 1 for i in found],
        "ref": refs,
    }


def _label_lines(labels: str) -> list[str]:
    """The lines of a label file, each at most ``_LINE_CHARS`` long; none where it is absent. One
    that is not a regular file (a FIFO would be waited on forever) or has a line past the bound is
    an ``EntryError`` naming it. A file shorter than the bound (every label file but a hostile
    one) is one read through the descriptor, faster than a file object's lines; a longer one is
    read a line at a time."""
    try:
        fd = _open_regular(labels)
    except FileNotFoundError:
        return []
    except _NotRegular:
        raise EntryError(labels, 0, "not a regular file: a label file is a .txt of lines") from None
    except OSError as exc:
        raise EntryError(labels, 0, f"cannot read: {exc.strerror or exc}") from None
    try:
        head = os.read(fd, _LINE_CHARS)
        if len(head) < _LINE_CHARS and not os.read(fd, 1):  # the whole file: no line of it is past the bound
            return head.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as text mode reads lines
        os.lseek(fd, 0, os.SEEK_SET)
        lines: list[str] = []
        with open(fd, encoding="utf-8-sig", closefd=False) as f:
            while line := f.readline(_LINE_CHARS + 1):
                if len(line) > _LINE_CHARS:
                    raise EntryError(labels, len(lines) + 1, f"longer than {_LINE_CHARS} characters: no YOLO label line")
                lines.append(line)
        return lines
    except (OSError, UnicodeDecodeError) as exc:
        raise EntryError(labels, 0, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        os.close(fd)


def _box(values: list[float], labels: str, number: int) -> list[float]:
    if len(values) == 4:
        cx, cy, w, h = values
        return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    if len(values) >= 6 and len(values) % 2 == 0:  # YOLO-seg: a polygon of three points or more
        xs, ys = values[0::2], values[1::2]
        return [min(xs), min(ys), max(xs), max(ys)]
    raise EntryError(labels, number, f"{len(values) + 1} values: expected class cx cy w h, or class and a polygon x1 y1 x2 y2 ...")


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


DARKNET = Darknet("darknet")
