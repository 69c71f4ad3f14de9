"""CVAT for images 1.1 XML (``annotations.xml``, as CVAT exports a task, a job or a project in
"CVAT for images 1.1"): one row per ``<image>``, with its boxes, polygons and masks.

The labels in ``<meta>`` (a task's, job's or project's ``<labels>``; a skeleton's point labels,
which name a ``<parent>``, are no classes) are the label map, ids 1, 2, ... in their order. An
``<image>`` gives the file (``name``), its ``width`` and ``height`` (checked against the image),
its ``id`` (the ``source_id``) and, in a project export, its ``subset``. A ``<box>`` (``xtl ytl
xbr ybr``, pixels) is an object whose mask (``masks: true``) is its rectangle; a ``<polygon>``
(``points="x1,y1;x2,y2;..."``) one whose box is its extent and whose mask that polygon (COCO-style
``segmentation``); a ``<mask>`` (CVAT's ``rle`` over its ``left top width height`` rectangle, row
by row, runs of 0 and 1 alternating, 0 first) one whose mask is those pixels, its box their
extent. ``occluded`` is kept for every object (``P/occluded``); a checkbox attribute named
``difficult`` or ``truncated`` (as CVAT's Pascal VOC export reads them) where a label declares
it, 0 where an object has none; other attributes are not kept. A rotated box is an entry error
(its extent is no box the annotator drew). Polylines, points, ellipses, cuboids, skeletons and
tags are no objects to train a detector on: each is counted by kind under ``P/left_out``
(``features.objects``), never silently gone. ``<track>`` (CVAT for video) is refused in one line.

Splits: a project export's ``subset`` (``Train``, ``Validation``, ``Test``, lower-cased), one
split each; else the file's name (``val.xml`` -> ``val``), ``annotations.xml`` being ``train``.
Images are where CVAT's export zip puts them: ``images/<subset>/<name>`` in a project export,
``images/<name>`` in a task's, beside the XML where there is no ``images/``. The export's folder
is an input too (``shardkit build EXPORT``). Names stay inside the XML's folder (``storage.boundary``).

The file is streamed through expat, an image at a time (memory is one image's shapes); a DTD
that declares an entity is refused (a CVAT export declares none; entities expand a kilobyte into
gigabytes), and so is a token (an attribute, a text) of 16 MiB. A row's line is its ``<image>``'s
line in the XML; an error names the shape's line.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterator
from typing import Any
from xml.parsers import expat

import numpy as np

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, split_name

NAME, IMAGES, _PEEK = "annotations.xml", "images", 4096
# CVAT's root; a DOCTYPE naming it is claimed too, so that its refusal says why (a CVAT export has none).
_ROOT = re.compile(rb"^\s*(<\?xml[^>]*\?>\s*)?(<!--.*?-->\s*)*(<!DOCTYPE\s+annotations\b|<annotations>\s*<(version|meta)>)", re.DOTALL)
_CHUNK, _MAX_CHUNK = 1 << 16, 4 << 20
# No element starts or ends in this much of the file: a token (an attribute, a text) no annotation
# has (a polygon of 100,000 points is 1.5 MiB), refused before expat's buffer for it takes the memory.
TOKEN_BYTES = 16 << 20
_TEXT = ("name", "parent", "attribute")  # the elements whose text is read
_IMAGE, _OBJECTS = "image", ("box", "polygon", "mask")  # XML tags: an image, the shapes that are objects
_LEFT_OUT = ("polyline", "points", "ellipse", "cuboid", "skeleton", "tag")
_BOX, _FLAGS = ("xtl", "ytl", "xbr", "ybr"), ("difficult", "truncated")


@dataclasses.dataclass(frozen=True)
class Cvat(DetectionFormat):
    def claims(self, path: str) -> bool:
        if not path.lower().endswith(".xml") or not os.path.isfile(path):
            return False
        try:
            with open(path, "rb") as f:
                head = f.read(_PEEK)
        except OSError:
            return False
        return _ROOT.match(head.removeprefix(b"\xef\xbb\xbf")) is not None

    def claims_folder(self, root: str) -> bool:  # an export's folder
        return self.claims(os.path.join(root, NAME))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        path = os.path.join(root, NAME)
        return self.file_splits(path) or [(self.split_name(path), Piece(path))]

    def file_splits(self, path: str) -> list[tuple[str, Piece]] | None:
        subsets = _subsets(path)
        if not any(subsets):
            return None  # a task's export: the split is told by the file's name
        named: dict[str, str] = {}
        for subset in subsets:
            split = subset.lower() if subset else self.split_name(path)
            if split in named and named[split] != subset:
                raise ShardkitError(f"{path}: the subsets {named[split]!r} and {subset!r} are both split {split!r}: rename one in CVAT")
            named[split] = subset
        return [(split, Piece(path, context=subset)) for split, subset in named.items()]

    def split_name(self, path: str) -> str:
        return "train" if os.path.basename(path).lower() == NAME else split_name(os.path.basename(path))

    def folder_of(self, path: str) -> str:
        """``images/`` beside the XML (CVAT's export zip), else the XML's own folder."""
        here = os.path.dirname(os.path.abspath(path))
        images = os.path.join(here, IMAGES)
        return images if os.path.isdir(images) else here

    def root_of(self, path: str, image_root: str | None) -> str:
        return image_root or os.path.dirname(os.path.abspath(path))

    def label_map(self, path: str) -> tuple[tuple[int, str], ...] | None:
        labels, _ = _meta(path)
        return tuple(enumerate(labels, start=1)) if labels else None

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        wanted: str | None = piece.context  # a project export's subset: its images alone ("": those with none)
        # A project export's images are in images/<subset>/.
        prefix = f"{wanted}/" if wanted and os.path.isdir(os.path.join(self.folder_of(source), wanted)) else ""
        labels: list[str] = []
        flags: set[str] = set()
        image: _Image | None = None
        for kind, tag, attrs, line, text, depth in _Events(source):
            if image is None:
                if kind == "start" and tag == _IMAGE and depth == 1:
                    image = _Image(line, dict(attrs), [], set(labels) if labels else None, flags)  # None: any name
                elif kind == "start" and tag == "track" and depth == 1:
                    raise ShardkitError(f"{source}:{line}: <track> is CVAT for video: export the task as 'CVAT for images 1.1'")
                elif kind == "meta":
                    labels, flags = attrs["labels"], attrs["flags"]
                continue
            if kind == "end" and depth == 1:  # </image>
                found, image = image, None
                if wanted is not None and found.attrs.get("subset", "") != wanted:
                    continue
                yield _row(source, found, prefix)
            else:
                image.add(kind, tag, attrs, line, text, depth)


@dataclasses.dataclass
class _Image:
    """One ``<image>`` as its shapes are read."""

    line: int
    attrs: dict[str, str]
    shapes: list[tuple[str, dict[str, str], int, dict[str, str]]]  # kind, attributes, line, named attributes
    known: set[str] | None
    flags: set[str]
    left_out: list[str] = dataclasses.field(default_factory=list)
    _open: tuple[str, dict[str, str], int, dict[str, str]] | None = None
    _attribute: str = ""

    def add(self, kind: str, tag: str, attrs: Any, line: int, text: str, depth: int) -> None:
        """One event inside the image (``depth`` 2: a shape; 3: a shape's ``<attribute>``)."""
        if kind == "start" and depth == 2:
            self._open = (tag, dict(attrs), line, {})
        elif kind == "start" and depth == 3 and tag == "attribute" and self._open is not None:
            self._attribute = attrs.get("name", "")
        elif kind == "end" and depth == 3 and tag == "attribute" and self._open is not None:
            self._open[3][self._attribute] = text.strip()
        elif kind == "end" and depth == 2 and self._open is not None:
            shape, self._open = self._open, None
            if shape[0] in _OBJECTS:
                self.shapes.append(shape)
            else:  # counted by kind: a tag the format does not know by its <name>
                self.left_out.append(shape[0] if shape[0] in _LEFT_OUT else f"<{shape[0]}>")


def _row(source: str, image: _Image, prefix: str) -> Row | EntryError:
    name, where = image.attrs.get("name", ""), f"image {image.attrs.get('id', '?')}"
    if not name or "\0" in name:
        return EntryError(source, image.line, f"{where}: " + ("no name" if not name else f"name {name!r} holds a NUL byte"))
    try:
        size = [_whole(image.attrs, side) for side in ("width", "height")]
    except ValueError as exc:
        return EntryError(source, image.line, f"{where} ({name}): {exc}")
    boxes: list[list[float]] = []
    names: list[str] = []
    segmentations: list[Any] = []
    occluded: list[int] = []
    flags: dict[str, list[int]] = {flag: [] for flag in sorted(image.flags)}
    for kind, attrs, line, named in image.shapes:
        label = attrs.get("label", "")
        try:
            if not label:
                raise ValueError("no label")
            if image.known is not None and label not in image.known:
                raise ValueError(f"label {label!r} is not in <meta>'s labels")
            box, segmentation = _shape(kind, attrs, size)
            occluded.append(_flag(attrs.get("occluded", "0"), "occluded"))
            for flag, values in flags.items():
                values.append(_flag(named.get(flag, "false"), flag))
        except ValueError as exc:
            return EntryError(source, line, f"{where} ({name}): <{kind} label={label!r}>: {exc}")
        boxes.append(box)
        names.append(label)
        segmentations.append(segmentation)
    found: dict[str, Any] = {"size": size, "bbox": boxes, "text": names, "occluded": occluded, **flags}
    if segmentations:
        found["segmentation"] = segmentations
    if image.left_out:
        found["left_out"] = image.left_out
    source_id = image.attrs.get("id") or os.path.splitext(os.path.basename(name))[0]
    return detection_row(source, image.line, prefix + name, name, source_id, found, f"{prefix}{name}")


def _shape(kind: str, attrs: dict[str, str], size: list[int]) -> tuple[list[float], Any]:
    """A box, polygon or mask's box in pixels, and its COCO segmentation."""
    if kind == "box":
        box = [_number(attrs, corner) for corner in _BOX]
        rotation = _number(attrs, "rotation") if "rotation" in attrs else 0.0
        if rotation % 360:
            raise ValueError(f"rotated by {rotation:g} degrees: rotated boxes are not read (their extent is no box drawn)")
        x0, y0, x1, y1 = box
        return box, [[x0, y0, x1, y0, x1, y1, x0, y1]]  # with masks: true, a box's mask is its rectangle
    if kind == "polygon":
        try:
            xy = [float(v) for pair in attrs.get("points", "").split(";") for v in pair.split(",")]
        except ValueError:
            raise ValueError(f"points {attrs.get('points', '')[:40]!r} are not x1,y1;x2,y2;...") from None
        if len(xy) < 6 or len(xy) % 2 or not all(math.isfinite(v) for v in xy):
            raise ValueError("points: a polygon needs three points or more, each x,y finite")
        return [min(xy[0::2]), min(xy[1::2]), max(xy[0::2]), max(xy[1::2])], [xy]
    return _mask(attrs, size)


def _mask(attrs: dict[str, str], size: list[int]) -> tuple[list[float], Any]:
    """A ``<mask>``: CVAT's runs over its rectangle, row by row, as a COCO RLE of the image."""
    from pycocotools import mask as coco_mask

    left, top, width, height = (_whole(attrs, side, zero=side in ("left", "top")) for side in ("left", "top", "width", "height"))
    if left + width > size[0] or top + height > size[1]:
        raise ValueError(f"its {width}x{height} rectangle at {left},{top} is not inside the {size[0]}x{size[1]} image")
    try:
        runs = np.array([int(v) for v in attrs.get("rle", "").split(",")], dtype=np.int64)
    except ValueError:
        raise ValueError("rle: expected whole numbers separated by commas") from None
    if (runs < 0).any() or int(runs.sum()) != width * height:
        raise ValueError(f"rle: its runs add up to {int(runs.sum()):,} pixels, the {width}x{height} mask has {width * height:,}")
    values = np.arange(len(runs), dtype=np.int64) % 2  # 0 first, then 1, alternating
    whole = np.zeros((size[1], size[0]), dtype=np.uint8)
    whole[top : top + height, left : left + width] = np.repeat(values, runs).astype(np.uint8).reshape(height, width)
    ys, xs = np.nonzero(whole)
    box = [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)] if len(xs) else [float(left), float(top)] * 2
    rle = coco_mask.encode(np.asfortranarray(whole))
    return box, {"size": [size[1], size[0]], "counts": rle["counts"].decode("ascii")}


def _number(attrs: dict[str, str], name: str) -> float:
    text = attrs.get(name)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        raise ValueError(f"{name} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} {text!r} is not a finite number" if text is not None else f"no {name}")
    return value


def _whole(attrs: dict[str, str], name: str, zero: bool = False) -> int:
    text = attrs.get(name, "")
    if not text.isdigit() or (not zero and int(text) == 0):
        raise ValueError(f"{name} {text!r} is not a " + ("whole number" if zero else "positive whole number") + " of pixels")
    return int(text)


def _flag(text: str, name: str) -> int:
    value = {"0": 0, "1": 1, "false": 0, "true": 1}.get(text.lower())
    if value is None:
        raise ValueError(f"{name} {text!r} is not 0, 1, true or false")
    return value


# -- the XML as a stream of events -----------------------------------------------------------------


class _Events:
    """The file's elements as (kind, tag, attributes, line, text, depth): ``start`` and ``end``
    of each element inside ``<annotations>`` (``depth``: how deep below it, an ``<image>`` 1;
    ``text``: of an end, for the elements in ``_TEXT``), and in place of ``<meta>`` one ``meta``
    event whose attributes are the labels (``labels``: names in order) and the checkbox flags they
    declare (``flags``)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._pending: list[tuple[str, str, Any, int, str, int]] = []
        self._moved = False  # an element started or ended in the last chunk
        self._path: list[str] = []
        self._text: list[str] | None = None
        self._labels: list[str] = []
        self._flags: set[str] = set()
        self._label: dict[str, str] | None = None
        self._parser = expat.ParserCreate()
        self._parser.buffer_text = True
        self._parser.StartElementHandler = self._start
        self._parser.EndElementHandler = self._end
        self._parser.CharacterDataHandler = self._characters
        self._parser.EntityDeclHandler = self._entity

    def __iter__(self) -> Iterator[tuple[str, str, Any, int, str, int]]:
        if os.path.exists(self.source) and not os.path.isfile(self.source):  # a FIFO would be waited on forever
            raise ShardkitError(f"{self.source}: not a file")
        try:
            f = open(self.source, "rb")  # noqa: SIM115 - closed by the with below, also when the caller stops early
        except OSError as exc:
            raise ShardkitError(f"{self.source}: cannot read: {exc.strerror or exc}") from None
        with f:
            seen, last_event, size = 0, 0, _CHUNK
            while True:
                try:
                    chunk = f.read(size)
                except OSError as exc:
                    raise ShardkitError(f"{self.source}: cannot read: {exc.strerror or exc}") from None
                seen += len(chunk)
                try:
                    self._parser.Parse(chunk, not chunk)
                except expat.ExpatError as exc:
                    reason = expat.errors.messages.get(exc.code, str(exc))
                    raise ShardkitError(f"{self.source}:{exc.lineno}:{exc.offset + 1}: not valid XML: {reason}") from None
                if self._moved:
                    last_event, size, self._moved = seen, _CHUNK, False
                else:
                    # Expat before 2.6 scans a token that is not complete again at each call: chunks
                    # that double while no element ends keep a long token's scans linear, not quadratic.
                    size = min(size * 2, _MAX_CHUNK)
                yield from self._pending
                self._pending.clear()
                if seen - last_event >= TOKEN_BYTES:
                    raise ShardkitError(
                        f"{self.source}:{self._parser.CurrentLineNumber}: no element starts or ends in {TOKEN_BYTES >> 20} MiB "
                        "(an attribute or a text that long is no annotation's): refused"
                    )
                if not chunk:
                    return

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        line, self._moved = self._parser.CurrentLineNumber, True
        if not self._path and tag != "annotations":
            raise ShardkitError(f"{self.source}:{line}: not a CVAT XML: its root is <{tag}>, not <annotations>")
        self._path.append(tag)
        self._text = [] if tag in _TEXT else None
        if len(self._path) == 1:
            return
        top = self._path[1]
        if top == "meta":
            if tag == "label" and self._path[-2] == "labels" and len(self._path) == 5:  # meta/<task|project|job>/labels/label
                self._label = {}
            return
        self._pending.append(("start", tag, attrs, line, "", len(self._path) - 1))

    def _end(self, tag: str) -> None:
        line, self._moved = self._parser.CurrentLineNumber, True
        text = "".join(self._text) if self._text is not None else ""
        self._text = None
        self._path.pop()
        if len(self._path) >= 1 and (self._path[1:2] == ["meta"] or tag == "meta"):
            self._meta_end(tag, text)
            return
        if self._path:
            self._pending.append(("end", tag, {}, line, text, len(self._path)))

    def _meta_end(self, tag: str, text: str) -> None:
        label = self._label
        if tag == "meta":
            self._pending.append(("meta", "meta", {"labels": self._labels, "flags": self._flags}, 0, "", 1))
        elif label is not None and tag in ("name", "parent") and self._path[-1] == "label":
            label[tag] = text.strip()
        elif label is not None and tag == "name" and self._path[-1] == "attribute" and text.strip() in _FLAGS:
            label["flags"] = label.get("flags", "") + text.strip() + " "
        elif label is not None and tag == "label" and len(self._path) == 4:
            self._label = None
            if label.get("name") and not label.get("parent") and label["name"] not in self._labels:
                self._labels.append(label["name"])
                self._flags.update(label.get("flags", "").split())

    def _characters(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def _entity(self, name: str, *_: Any) -> None:
        raise ShardkitError(
            f"{self.source}:{self._parser.CurrentLineNumber}: declares the XML entity {name!r}: refused "
            "(a CVAT export declares none; entities can expand a small file into gigabytes)"
        )


def _subsets(path: str) -> list[str]:
    """The ``subset`` of the file's images, each once, in the order they first appear ("" for none)."""
    found: dict[str, None] = {}
    for kind, tag, attrs, _, _, depth in _Events(path):
        if kind == "start" and tag == _IMAGE and depth == 1:
            found.setdefault(attrs.get("subset", ""), None)
    return list(found)


def _meta(path: str) -> tuple[list[str], set[str]]:
    """The labels of ``<meta>``, in order, and the checkbox flags they declare."""
    for kind, tag, attrs, _, _, depth in _Events(path):
        if kind == "meta":
            return attrs["labels"], attrs["flags"]
        if kind == "start" and depth == 1 and tag != "version":
            break  # no <meta> before the images
    return [], set()


CVAT = Cvat("cvat")
