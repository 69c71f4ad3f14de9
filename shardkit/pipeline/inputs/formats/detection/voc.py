"""Pascal VOC folders (``VOCdevkit/VOC2012``, or what LabelImg writes): ``Annotations/<id>.xml``
beside ``JPEGImages/``, the splits listed in ``ImageSets/Main/<split>.txt``.

Each split file (``train.txt``, ``val.txt``, ``trainval.txt``, ``test.txt``: a name with no ``_``;
``aeroplane_train.txt`` and the other per-class lists are not splits) is one split's source, one
row per image id, numbered by its line; with no ``ImageSets/Main`` every annotation is split
``train``, numbered in name order, the ``Annotations`` folder its source. An image is
``JPEGImages/`` + the XML's ``filename`` (``<id>.jpg`` where it names none, or names it without
its suffix as early LabelImg did), so ``--image-root`` names another folder of them. An id a split
file lists with no XML is an image with no objects where ``JPEGImages/<id>`` + an image suffix
exists (datumaro's VOC export writes no XML for an image without boxes), else a bad entry.

An object's ``name``, its ``bndbox`` corners in pixels as written (as the OD API's
``create_pascal_tf_record`` reads them), ``difficult`` and ``truncated`` (0 where absent) and the
annotation's ``size`` are read. Classes are names alone: the label map is the sorted names found,
unless the config's ``classes`` fixes it. Local folders only.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage.boundary import Boundary

ANNOTATIONS, IMAGES, SPLITS = "Annotations", "JPEGImages", os.path.join("ImageSets", "Main")
_CORNERS = ("xmin", "ymin", "xmax", "ymax")
# Where an id has no XML: VOC's own .jpg first, then the other image suffixes, as written or upper case.
_SUFFIXES = tuple(dict.fromkeys(s for lower in (".jpg", *IMAGE_SUFFIXES) for s in (lower, lower.upper())))
_WHERE = re.compile(r": line \d+, column \d+$")  # ElementTree's own position, told as line:column instead


@dataclasses.dataclass(frozen=True)
class Voc(DetectionFormat):
    def claims_folder(self, root: str) -> bool:
        return os.path.isdir(os.path.join(root, ANNOTATIONS)) and os.path.isdir(os.path.join(root, IMAGES))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        lists = os.path.join(root, SPLITS)
        if not os.path.isdir(lists):
            return [("train", Piece(os.path.join(root, ANNOTATIONS)))]
        # A split's name has no "_": aeroplane_train.txt and the other per-class lists are no splits.
        names = sorted(
            n for n in os.listdir(lists) if fnmatch.fnmatch(n, "*.txt") and "_" not in n and os.path.isfile(os.path.join(lists, n))
        )
        if not names:
            raise ShardkitError(f"{lists}: no split files (train.txt, val.txt, trainval.txt, test.txt)")
        return [(os.path.splitext(n)[0], Piece(os.path.join(lists, n))) for n in names]

    def folder_of(self, path: str) -> str:
        """``JPEGImages`` of the VOC folder the split file or ``Annotations`` folder ``path`` is in."""
        return os.path.join(_root(os.path.abspath(path)), IMAGES)

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        root = _root(os.path.abspath(source))
        annotations, images = os.path.join(root, ANNOTATIONS), os.path.join(root, IMAGES)
        rule = Boundary() if piece.confined else None  # a split file's id may not lead out of Annotations/
        for line, image_id in _ids(source):
            if "\0" in image_id:
                yield EntryError(source, line, f"{image_id!r}: not an image id (it holds a NUL byte)")
                continue
            xml = os.path.join(annotations, f"{image_id}.xml")
            refused = None
            if rule is not None:
                xml = os.path.realpath(xml)  # as the OS reads it (a link, then ".."): what is checked is what is read
                refused = rule.outside(xml, annotations)
            if refused is not None:
                yield EntryError(source, line, f"{image_id}: annotation {refused}")
                continue
            found: Row | EntryError
            try:
                found = _row(source, line, image_id, xml)
            except FileNotFoundError:
                found = _negative(source, line, image_id, xml, images, rule)
            except EntryError as exc:
                found = exc
            yield found


def _root(path: str) -> str:
    """The VOC folder of a split file (``ROOT/ImageSets/Main/train.txt``) or of ``ROOT/Annotations``."""
    return os.path.dirname(path) if os.path.basename(path) == ANNOTATIONS else os.path.dirname(os.path.dirname(os.path.dirname(path)))


def _ids(source: str) -> Iterator[tuple[int, str]]:
    """(line, image id) of each image a split file lists, or (0, id) of each XML in ``Annotations``."""
    if os.path.isdir(source):
        names = sorted(n for n in os.listdir(source) if n.lower().endswith(".xml"))
        yield from ((0, os.path.splitext(n)[0]) for n in names)  # 0: a folder has no lines; the XML names itself
        return
    try:
        with open(source, encoding="utf-8-sig") as f:
            for line, text in enumerate(f, start=1):
                words = text.split()
                if words:  # a main split file lists ids alone; a blank line is nothing
                    yield line, words[0]
    except OSError as exc:
        raise ShardkitError(f"{source}: cannot read split file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {exc.start})") from None


def _row(source: str, line: int, image_id: str, xml: str) -> Row:
    """The image ``image_id`` of the split file ``source`` (at ``line``), from its annotation ``xml``."""
    if os.path.exists(xml) and not os.path.isfile(xml):  # a FIFO would be waited on forever
        raise EntryError(source, line, f"{image_id}: {xml} is not a file")
    try:
        tree = ET.parse(xml)
    except FileNotFoundError:
        raise  # the caller looks for an image with no objects
    except OSError as exc:
        raise EntryError(source, line, f"{xml}: cannot read: {exc.strerror or exc}") from None
    except ET.ParseError as exc:
        at, column = exc.position
        raise EntryError(source, line, f"{xml}:{at}:{column + 1}: not valid XML: {_WHERE.sub('', str(exc))}") from None
    annotation = tree.getroot()
    filename = _text(annotation, "filename") or image_id
    if not os.path.splitext(filename)[1]:
        filename += ".jpg"  # VOC's images are JPEGs; early LabelImg wrote the name without its suffix
    try:
        found = objects(annotation)
    except ValueError as exc:
        raise EntryError(source, line, f"{xml}: {exc}") from None
    return detection_row(source, line, filename, filename, os.path.splitext(os.path.basename(filename))[0], found, filename)


def _negative(source: str, line: int, image_id: str, xml: str, images: str, rule: Boundary | None) -> Row | EntryError:
    """The id ``image_id`` with no annotation ``xml``: an image with no objects where ``images``
    holds ``<id>`` with an image suffix (``.jpg`` first, VOC's own), as datumaro exports one; else
    the entry's error. Where the split file's paths are confined, the image must resolve in ``images``."""
    for suffix in _SUFFIXES:
        filename = f"{image_id}{suffix}"
        image = os.path.join(images, filename)
        if not os.path.isfile(image):
            continue
        refused = None if rule is None else rule.outside(image, images)  # names the link it follows
        if refused is not None:
            return EntryError(source, line, f"{image_id}: image {refused}")
        found: dict[str, Any] = {"size": None, "bbox": [], "text": [], "difficult": [], "truncated": []}
        return detection_row(source, line, filename, filename, os.path.basename(image_id), found, filename)
    shown = f"{os.path.join(images, image_id)}.jpg (or {', '.join(IMAGE_SUFFIXES[1:])})"
    return EntryError(source, line, f"{image_id}: no annotation {xml} and no image {shown}")


def objects(annotation: ET.Element) -> dict[str, Any]:
    """One VOC ``<annotation>`` as a row's ``objects`` value; raises ``ValueError`` naming what is wrong."""
    boxes, names, difficult, truncated = [], [], [], []
    for i, obj in enumerate(annotation.findall("object"), start=1):
        name = _text(obj, "name")
        if not name:
            raise ValueError(f"object {i} has no name")
        box = obj.find("bndbox")
        if box is None:
            raise ValueError(f"object {i} ({name}) has no bndbox")
        boxes.append([_number(box, corner, f"object {i} ({name}): bndbox {corner}") for corner in _CORNERS])
        names.append(name)
        difficult.append(_flag(obj, "difficult", i, name))
        truncated.append(_flag(obj, "truncated", i, name))
    return {"size": _size(annotation), "bbox": boxes, "text": names, "difficult": difficult, "truncated": truncated}


def _size(annotation: ET.Element) -> list[int] | None:
    size = annotation.find("size")
    if size is None:
        return None
    width, height = (_number(size, side, f"size {side}") for side in ("width", "height"))
    if not (width.is_integer() and height.is_integer() and width > 0 and height > 0):
        raise ValueError(f"size: {width:g}x{height:g} is no image size")
    return [int(width), int(height)]


def _text(element: ET.Element, tag: str) -> str:
    return (element.findtext(tag) or "").strip()


def _number(element: ET.Element, tag: str, what: str) -> float:
    text = _text(element, tag)
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number" if text else f"{what} is missing") from None


def _flag(obj: ET.Element, tag: str, i: int, name: str) -> int:
    text = _text(obj, tag) or "0"
    if text not in ("0", "1"):
        raise ValueError(f"object {i} ({name}): {tag} {text!r} is not 0 or 1")
    return int(text)


VOC = Voc("voc")
