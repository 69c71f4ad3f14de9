"""LabelMe folders: one JSON file per image, as LabelMe saves them beside the images
(``{"version", "flags", "shapes": [{"label", "points", "group_id", "shape_type", "flags"}],
"imagePath", "imageData", "imageHeight", "imageWidth"}``).

A folder is LabelMe's where one of its first JSON files (in name order) is a LabelMe file, told
from its first bytes; it is one split, ``train``, unless its subfolders ``train/``, ``val/``,
``valid/`` or ``test/`` hold LabelMe files: then each of those is a split (JSON files beside them
as well is one line). Each JSON file directly in a split's folder is one row, in name order, with
no line (the folder is the rows' source, as VOC's ``Annotations``, and has no lines); a JSON file in it that is not
LabelMe's, or does not parse, is an entry error naming that file.

The image is ``imagePath`` (a Windows ``\\`` is a ``/``) against the JSON's folder (or
``--image-root``), as LabelMe resolves it; ``imageData``, the image embedded in base64, is not
read (cut out before parsing, so a large one costs no parse): a file with no ``imagePath`` is an
entry error. ``imageWidth`` and ``imageHeight`` are the annotation's size, checked against the
image. Shapes become objects as LabelMe's own ``labelme2coco`` makes them: a ``rectangle`` (two
corners in either order) has its box and that box as its polygon; a ``polygon`` (three points or
more) its polygon, its extent the box; a ``circle`` (centre, a point on the rim) a polygon of its
rim, its extent the box; shapes with one ``label`` and one ``group_id`` are one object, their
polygons its parts, their extent its box. Points, lines, line strips and masks are no objects:
an entry error naming the file and the shape, never left out unsaid. The label map is the names
found, sorted (or the config's ``classes``), as for VOC. Local folders only; a JSON file that is
a link out of the dataset's folder is refused (``storage.boundary``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Iterator
from typing import Any

from shardkit.errors import EntryError, ShardkitError, quoted
from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage.boundary import Boundary

SPLITS = ("train", "val", "valid", "test")
_PEEK = 1 << 16
_BLOCK = 1 << 20
_LOOKED_AT = 8  # JSON files of a folder peeked at to tell its layout
_OBJECT = re.compile(rb"\s*\{")
_SHAPES = re.compile(rb'"shapes"\s*:\s*\[')
_LABELME = re.compile(rb'"(imagePath|imageHeight|imageWidth|version|flags)"\s*:')
_IMAGE_DATA = re.compile(rb'"imageData"\s*:\s*"')
_NUMBER = (int, float)
_SHAPES_READ = ("rectangle", "polygon", "circle")


@dataclasses.dataclass(frozen=True)
class LabelMe(DetectionFormat):
    def claims(self, path: str) -> bool:
        return path.lower().endswith(".json") and _is_labelme(path)

    def file_splits(self, path: str) -> list[tuple[str, Piece]] | None:
        folder = os.path.dirname(path) or "."
        raise ShardkitError(f"{path}: a LabelMe file (one image's shapes): build the folder of them: shardkit build {folder} -o OUT")

    def claims_folder(self, root: str) -> bool:
        return _holds_labelme(root) or bool(_split_folders(root))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        splits = _split_folders(root)
        if not splits:
            return [("train", Piece(root))]
        if _holds_labelme(root):
            named = ", ".join(f"{name}/" for name, _ in splits)
            raise ShardkitError(f"{root}: LabelMe files both here and in the split folders {named}: move these into one of them")
        return [(name, Piece(folder)) for name, folder in splits]

    def folder_of(self, path: str) -> str:
        """The folder itself: ``imagePath`` is relative to the JSON file's folder."""
        return os.path.abspath(path)

    def root_of(self, path: str, image_root: str | None) -> str:
        """``--image-root`` where given, else the folder built (the dataset's, above a split's folder)."""
        folder = os.path.abspath(path)
        return image_root or (os.path.dirname(folder) if os.path.basename(folder) in SPLITS else folder)

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        folder = piece.path
        rule, top = Boundary(), self.root_of(folder, None) if piece.confined else None
        for line, (name, link, plain) in enumerate(_listed(folder), start=1):
            path = os.path.join(folder, name)
            refused = rule.outside(os.path.abspath(path), top) if link and top is not None else None
            if refused is not None:  # a link out of the dataset: not opened
                yield EntryError(path, 0, refused)
                continue
            if not plain:  # a FIFO would be waited on forever
                yield EntryError(path, 0, "not a file")
                continue
            try:
                yield _row(folder, line, path)
            except EntryError as exc:
                yield exc


def _listed(folder: str) -> list[tuple[str, bool, bool]]:
    """(name, whether a link, whether a file) of each JSON file in ``folder``, in name order."""
    try:
        with os.scandir(folder) as listing:
            return sorted((e.name, e.is_symlink(), e.is_file()) for e in listing if e.name.lower().endswith(".json"))
    except OSError as exc:
        raise ShardkitError(f"{folder}: cannot list: {exc.strerror or exc}") from None


def _is_labelme(path: str) -> bool:
    try:
        if not os.path.isfile(path):  # a FIFO would be waited on forever
            return False
        with open(path, "rb") as f:
            head = f.read(_PEEK)
    except OSError:
        return False
    head = head[len(bounded_json.BOM) :] if head.startswith(bounded_json.BOM) else head
    return bool(_OBJECT.match(head) and _SHAPES.search(head) and _LABELME.search(head))


def _holds_labelme(folder: str) -> bool:
    """Whether one of the first JSON files of ``folder`` (in name order) is a LabelMe file."""
    try:
        names = [name for name, _, plain in _listed(folder) if plain]
    except ShardkitError:
        return False
    return any(_is_labelme(os.path.join(folder, n)) for n in names[:_LOOKED_AT])


def _split_folders(root: str) -> list[tuple[str, str]]:
    found = [(name, os.path.join(root, name)) for name in SPLITS]
    return [(name, folder) for name, folder in found if os.path.isdir(folder) and _holds_labelme(folder)]


def _row(folder: str, line: int, path: str) -> Row:
    data = _load(path)
    image = data.get("imagePath")
    if type(image) is not str or not image:
        embedded = " (the image is embedded in imageData, which is not read: save it beside the file and name it)"
        raise EntryError(path, 0, "no imagePath" + (embedded if data.get("imageData") else ""))
    image = image.replace("\\", "/")
    found = objects(path, data)
    name = image.rpartition("/")[2]
    key = f"{os.path.basename(folder)}/{os.path.basename(path)}"  # the annotation file: one a row
    return detection_row(folder, 0, image, name, os.path.splitext(name)[0], found, key)  # 0: a folder has no lines


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(name)


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # made once: making one costs half the parse of a small file


def _load(path: str) -> dict[str, Any]:
    """The JSON file ``path``, its ``imageData`` cut out; ``EntryError`` naming its line where it is not a LabelMe file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise EntryError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    raw = raw[len(bounded_json.BOM) :] if raw.startswith(bounded_json.BOM) else raw
    embedded = _IMAGE_DATA.search(raw, max(0, raw.rfind(b'"imageData"')))
    if embedded is not None:  # base64 holds no quote: the string ends at the next one
        end = raw.find(b'"', embedded.end())
        if end > 0:
            raw = raw[: embedded.end() - 1] + b'"..."' + raw[end + 1 :]
    try:
        # A file that opens fewer arrays and objects than the limit, and is shorter than the
        # longest string allowed, is within both: most are, and cost two counts.
        if len(raw) > bounded_json.MAX_STRING or raw.count(b"[") + raw.count(b"{") > bounded_json.MAX_DEPTH:
            limits = bounded_json.Limits()
            for start in range(0, len(raw), _BLOCK):  # in blocks: a string is measured where it spans two
                limits.feed(raw[start : start + _BLOCK])
        data = _DECODER.decode(raw.decode("utf-8"))
    except bounded_json.Exceeded as exc:
        column = exc.offset - raw.rfind(b"\n", 0, exc.offset)
        raise EntryError(path, raw.count(b"\n", 0, exc.offset) + 1, f"{exc.reason} (column {column})") from None
    except UnicodeDecodeError as exc:
        raise EntryError(path, raw.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise EntryError(path, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except _NotFinite as exc:
        raise EntryError(path, 0, f"not valid JSON: {exc} (JSON has no NaN or Infinity)") from None
    if type(data) is not dict or type(data.get("shapes")) is not list:
        raise EntryError(path, 0, "not a LabelMe file: expected an object with a shapes list")
    return data


def objects(path: str, data: dict[str, Any]) -> dict[str, Any]:
    """A LabelMe file's shapes as a row's ``objects`` value; ``EntryError`` naming the bad shape."""
    instances: dict[Any, int] = {}  # (label, group_id) -> its object
    boxes: list[list[float]] = []
    names: list[str] = []
    polygons: list[list[list[float]]] = []
    refs: list[str] = []
    for k, shape in enumerate(data["shapes"]):
        if type(shape) is not dict:
            raise EntryError(path, 0, f"shapes[{k}]: expected a shape (an object)")
        label, group = shape.get("label"), shape.get("group_id")
        if type(label) is not str or not label:
            raise EntryError(path, 0, f"shapes[{k}]: label {quoted(label)} is not a class name")
        if group is not None and type(group) not in (int, str):
            raise EntryError(path, 0, f"shapes[{k}] ({label}): group_id {quoted(group)} is not a number")
        polygon = _polygon(path, k, label, shape.get("shape_type") or "polygon", shape.get("points"))  # LabelMe's default type
        xs, ys = polygon[0::2], polygon[1::2]
        box = [min(xs), min(ys), max(xs), max(ys)]
        instance = None if group is None else instances.get((label, group))
        if instance is None:
            if group is not None:
                instances[(label, group)] = len(boxes)
            boxes.append(box)
            names.append(label)
            polygons.append([polygon])
            refs.append(f"shapes[{k}]")
        else:  # another part of an object: its extent grows
            was = boxes[instance]
            boxes[instance] = [min(was[0], box[0]), min(was[1], box[1]), max(was[2], box[2]), max(was[3], box[3])]
            polygons[instance].append(polygon)
    return {"size": _size(path, data), "bbox": boxes, "text": names, "ref": refs, "segmentation": polygons}


def _polygon(path: str, k: int, label: str, kind: Any, points: Any) -> list[float]:
    """Shape ``k``'s outline in pixels as a flat COCO polygon (x1, y1, x2, y2, ...)."""
    if kind not in _SHAPES_READ:
        raise EntryError(path, 0, f"shapes[{k}] ({label}): {quoted(kind)} shapes are no objects (rectangle, polygon and circle are)")
    flat = _flat(points)
    if flat is None:
        raise EntryError(path, 0, f"shapes[{k}] ({label}): points: expected a list of points [x, y]")
    if kind == "polygon":
        if len(flat) < 6:
            raise EntryError(path, 0, f"shapes[{k}] ({label}): a polygon of {len(flat) // 2} points (three or more make one)")
        return flat
    if len(flat) != 4:
        raise EntryError(path, 0, f"shapes[{k}] ({label}): a {kind} of {len(flat) // 2} points (it has two)")
    x1, y1, x2, y2 = flat
    if kind == "rectangle":
        x1, x2, y1, y2 = min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)
        return [x1, y1, x2, y1, x2, y2, x1, y2]
    radius = math.hypot(x2 - x1, y2 - y1)
    if radius <= 0:
        raise EntryError(path, 0, f"shapes[{k}] ({label}): a circle of radius 0")
    n = 4 * max(3, math.ceil(math.pi * radius / 4))  # a vertex every 2 px of the rim, four on its extent
    return [v for i in range(n) for v in (x1 + radius * math.cos(2 * math.pi * i / n), y1 + radius * math.sin(2 * math.pi * i / n))]


def _flat(points: Any) -> list[float] | None:
    """``[[x, y], ...]`` as ``[x, y, ...]``; None where it is not a list of points (NaN and
    Infinity were refused by the parser)."""
    if type(points) is not list:
        return None
    flat: list[float] = []
    for point in points:
        if type(point) is not list or len(point) != 2:
            return None
        x, y = point
        if type(x) not in _NUMBER or type(y) not in _NUMBER:
            return None
        flat.append(x)
        flat.append(y)
    return flat


def _size(path: str, data: dict[str, Any]) -> list[int] | None:
    width: Any = data.get("imageWidth")
    height: Any = data.get("imageHeight")
    if width is None and height is None:
        return None
    for name, side in (("imageWidth", width), ("imageHeight", height)):
        if type(side) is not int or side <= 0:
            raise EntryError(path, 0, f"{name} {quoted(side)} is not a size in pixels")
    return [width, height]


LABELME = LabelMe("labelme")
