"""Label Studio's JSON export (Export > JSON): a top-level array of tasks, each with its ``data``
(the image), its ``annotations`` (each a ``result`` list of regions) and ``predictions``.

One row per task, in the array's order, with no line (a task is no line of the file; messages name
it ``tasks[i]``). Its objects are one annotation:
of those not cancelled (``was_cancelled``, or the older ``skipped``), the one marked
``ground_truth``, else the most recently created (as Label Studio's own converter orders them), the
last listed where ``created_at`` ties. ``predictions`` are a model's output, never ground truth:
they are not read. A task with no annotation (an empty list, or none) is an image without objects;
a task whose every annotation was cancelled was never labelled: an entry error, never a silent
negative. ``completions``, the name before Label Studio 1.0, is read as ``annotations``.

Regions: ``rectanglelabels`` (``x``, ``y``, ``width``, ``height`` in percent of the image, made
pixels by the region's ``original_width`` and ``original_height``) and ``polygonlabels`` (its
``points`` in percent: a COCO polygon in pixels, its extent the box). A rotated rectangle
(``rotation`` not 0) or a rotated image (``image_rotation``) is an entry error: oriented boxes
are not read. Other region types (brushes, keypoints, ellipses...) are entry errors too; results
that are no region (``choices``, ``textarea``, ``rating``, ``relation``...) carry no object and are
passed over. A region has one label. The label map is the names found, sorted (or the config's
``classes``), as for VOC.

The image is ``data.image`` (else the task's only string in ``data``), as Label Studio writes it:
``/data/upload/<project>/<hash>-<name>`` is the file ``<hash>-<name>`` (the name as uploaded,
hash prefix and all) in the JSON's folder or ``--image-root``; ``/data/local-files/?d=<path>``
is ``<path>`` under that folder (Label Studio's ``LOCAL_FILES_DOCUMENT_ROOT``); the same on
``http(s)://<host>/data/...``; other URLs (``s3://``, ``https://``) stay URLs, which the read rule
refuses unless allowed (``storage.boundary``). The split is the file name's first word where it
is one (``train``, ``val``, ``valid``, ``test``), else ``train`` (Label Studio names its exports
``project-3-at-...json``). Read with ijson in bounded memory, checked by ``bounded_json`` first.
The JSON-MIN export (flat items, no ``data``) is recognized and refused in one line.
"""

from __future__ import annotations

import dataclasses
import math
import os
import posixpath
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import ijson

from shardkit.errors import EntryError, ShardkitError, quoted
from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.detection import streamed_json
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, split_name
from shardkit.storage import location

_PEEK = 1 << 20
_ARRAY = re.compile(rb"\s*\[")
_TASK = re.compile(rb'"data"\s*:\s*\{')
_ANNOTATED = re.compile(rb'"(annotations|completions|predictions)"\s*:\s*\[')
_MINIMAL = re.compile(rb'"(annotation_id|annotator)"\s*:')
_SPLITS = ("train", "val", "valid", "test")
_REGIONS = ("rectanglelabels", "polygonlabels")
# Results that describe the task, not a region of its image: no object to read.
_NOT_REGIONS = frozenset({"choices", "textarea", "rating", "relation", "taxonomy", "number", "datetime", "pairwise", "ranker"})
_NUMBER = (int, float)
_UPLOAD, _LOCAL = "/data/upload/", "/data/local-files/"


@dataclasses.dataclass(frozen=True)
class LabelStudio(DetectionFormat):
    def claims(self, path: str) -> bool:
        head = _head(path)
        return head is not None and bool(_ARRAY.match(head)) and (_minimal(head) or bool(_TASK.search(head) and _ANNOTATED.search(head)))

    def file_splits(self, path: str) -> list[tuple[str, Piece]] | None:
        head = _head(path)
        if head is not None and _minimal(head):
            raise ShardkitError(
                f"{path}: a Label Studio JSON-MIN export: not read (it leaves out which annotation is whose); "
                "export the project as JSON (Export > JSON) and build that"
            )
        return None

    def split_name(self, path: str) -> str:
        first = split_name(os.path.basename(path)).lower()
        return first if first in _SPLITS else "train"

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        with streamed_json.parsing(source) as f:
            for position, task in enumerate(ijson.items(f, "item", use_float=True), start=1):
                try:
                    yield _row(source, position, task)
                except EntryError as exc:
                    yield exc


def _head(path: str) -> bytes | None:
    if not path.lower().endswith(".json"):
        return None
    try:
        head = location.read_bytes(path, 0, _PEEK)
    except (OSError, ValueError):
        return None
    return head[len(bounded_json.BOM) :] if head.startswith(bounded_json.BOM) else head


def _minimal(head: bytes) -> bool:
    return not _TASK.search(head) and bool(_MINIMAL.search(head))


def _row(source: str, position: int, task: Any) -> Row:
    where = f"tasks[{position - 1}]"
    if type(task) is not dict:
        raise EntryError(source, 0, f"{where}: expected a task (an object), got {_kind(task)}")
    task_id = task.get("id")
    raw = _image(task.get("data"))
    if type(task_id) in (int, str):
        where += f" (id {task_id}{', ' + raw if raw else ''})"
    if not raw:
        raise EntryError(source, 0, f"{where}: data has no image (expected data.image, or one string in data)")
    image = image_path(raw)
    annotation = _chosen(source, where, task.get("annotations", task.get("completions")))
    found = _objects(source, where, [] if annotation is None else annotation.get("result"))
    name = posixpath.basename(image.split("://", 1)[-1]) or image
    source_id = str(task_id) if type(task_id) in (int, str) else os.path.splitext(name)[0]
    return detection_row(source, 0, image, name, source_id, found, raw)  # 0: a task has no line of its own


def _image(data: Any) -> str:
    """The image a task's ``data`` names: ``image``, else its only string; "" where neither."""
    if type(data) is not dict:
        return ""
    given = data.get("image")
    if type(given) is str:
        return given
    strings = [v for v in data.values() if type(v) is str]
    return strings[0] if len(strings) == 1 else ""


def image_path(raw: str) -> str:
    """Where an image Label Studio names is, relative to the JSON's folder (or ``--image-root``)
    for the files Label Studio serves itself; other URLs and paths as written."""
    parts = urlsplit(raw)
    served = parts.scheme in ("http", "https") or not parts.scheme
    if served and parts.path.startswith(_UPLOAD):
        return posixpath.basename(unquote(parts.path))
    if served and parts.path.startswith(_LOCAL):
        given = parse_qs(parts.query).get("d")
        if given:
            return given[0].lstrip("/")
    return raw


def _chosen(source: str, where: str, annotations: Any) -> dict[str, Any] | None:
    """The annotation a task's objects come from (see the module's rule); None: none at all."""
    if annotations is None:
        return None
    if type(annotations) is not list or not all(type(a) is dict for a in annotations):
        raise EntryError(source, 0, f"{where}: annotations: expected a list of annotations (objects)")
    kept = [a for a in annotations if not (a.get("was_cancelled") or a.get("skipped"))]
    if annotations and not kept:
        raise EntryError(source, 0, f"{where}: every annotation was cancelled (skipped in Label Studio): the image was never labelled")
    if not kept:
        return None
    pool = [a for a in kept if a.get("ground_truth") is True] or kept
    latest = max(range(len(pool)), key=lambda i: (str(pool[i].get("created_at") or ""), i))
    chosen: dict[str, Any] = pool[latest]
    return chosen


def _objects(source: str, where: str, result: Any) -> dict[str, Any]:
    if type(result) is not list:
        raise EntryError(source, 0, f"{where}: result: expected a list of regions, got {_kind(result)}")
    boxes: list[list[float]] = []
    names: list[str] = []
    polygons: list[list[list[float]] | None] = []
    refs: list[str] = []
    size: list[int] | None = None
    for k, region in enumerate(result):
        ref = f"result[{k}]"
        if type(region) is not dict:
            raise EntryError(source, 0, f"{where}: {ref}: expected a region (an object), got {_kind(region)}")
        if type(region.get("id")) is str:
            ref += f" (id {region['id']})"
        at = f"{where}: {ref}"
        kind = region.get("type")
        if type(kind) is str and kind in _NOT_REGIONS:
            continue
        if kind not in _REGIONS:
            raise EntryError(source, 0, f"{at}: {quoted(kind)} regions are not read (rectanglelabels and polygonlabels are)")
        width, height = _size(source, at, region)
        if size is None:
            size = [width, height]
        elif size != [width, height]:
            raise EntryError(source, 0, f"{at}: original size {width}x{height}, but {size[0]}x{size[1]} in an earlier region")
        value = region.get("value")
        if type(value) is not dict:
            raise EntryError(source, 0, f"{at}: no value")
        labels = value.get(kind)
        if type(labels) is not list or len(labels) != 1 or type(labels[0]) is not str or not labels[0]:
            raise EntryError(source, 0, f"{at}: {kind}: expected one label, got {quoted(labels)}")
        if kind == "rectanglelabels":
            boxes.append(_rectangle(source, at, value, width, height))
            polygons.append(None)
        else:
            polygon = _polygon(source, at, value, width, height)
            boxes.append([min(polygon[0::2]), min(polygon[1::2]), max(polygon[0::2]), max(polygon[1::2])])
            polygons.append([polygon])
        names.append(labels[0])
        refs.append(ref)
    found: dict[str, Any] = {"size": size, "bbox": boxes, "text": names, "ref": refs}
    if any(p is not None for p in polygons):
        found["segmentation"] = polygons
    return found


def _size(source: str, at: str, region: dict[str, Any]) -> tuple[int, int]:
    rotation = region.get("image_rotation", 0)
    if rotation not in (0, None):
        raise EntryError(source, 0, f"{at}: image_rotation {quoted(rotation)}: regions on a rotated image are not read")
    width: Any = region.get("original_width")
    height: Any = region.get("original_height")
    for name, side in (("original_width", width), ("original_height", height)):
        if type(side) not in _NUMBER or not float(side).is_integer() or side <= 0:
            raise EntryError(source, 0, f"{at}: {name} {quoted(side)} is not a size in pixels")
    return int(width), int(height)  # type: ignore[arg-type]


def _percent(source: str, at: str, value: dict[str, Any], key: str) -> float:
    number: Any = value.get(key)
    if type(number) not in _NUMBER or not math.isfinite(number):
        raise EntryError(source, 0, f"{at}: {key} {quoted(number)} is not a number")
    return float(number)


def _rectangle(source: str, at: str, value: dict[str, Any], width: int, height: int) -> list[float]:
    x, y, w, h = (_percent(source, at, value, key) for key in ("x", "y", "width", "height"))
    rotation = value.get("rotation", 0)
    if rotation not in (0, None):
        raise EntryError(source, 0, f"{at}: rotation {quoted(rotation)}: rotated rectangles (oriented boxes) are not read")
    if w < 0 or h < 0:
        raise EntryError(source, 0, f"{at}: a negative width or height")
    return [x * width / 100, y * height / 100, (x + w) * width / 100, (y + h) * height / 100]


def _polygon(source: str, at: str, value: dict[str, Any], width: int, height: int) -> list[float]:
    points = value.get("points")
    if type(points) is not list or len(points) < 3:
        raise EntryError(source, 0, f"{at}: points: expected a polygon of three points or more, got {quoted(points)}")
    flat: list[float] = []
    for point in points:
        if type(point) is not list or len(point) != 2 or not all(type(v) in _NUMBER and math.isfinite(v) for v in point):
            raise EntryError(source, 0, f"{at}: points: {quoted(point)} is not a point [x, y]")
        flat += [point[0] * width / 100, point[1] * height / 100]
    return flat


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


LABEL_STUDIO = LabelStudio("label-studio")
