"""COCO JSON (``instances_*.json``, or any JSON with ``images``, ``annotations`` and
``categories``): one row per image with all of its annotations.

Boxes ``[x, y, w, h]`` become corners in pixels; ``category_id`` is kept as the class id (the
dataset's own, not necessarily contiguous); ``iscrowd``, ``area``, polygon or RLE
``segmentation`` and ``keypoints`` ride along. Every image is a row, with or without objects. The
split is told by the file name (``instances_val2017.json`` -> ``val``); images are found in the
standard layout (``annotations/instances_val2017.json`` beside ``val2017/``), else beside the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage import location

_TASK_PREFIX = re.compile(r"^(instances|person_keypoints|captions|panoptic)_", re.IGNORECASE)
_YEAR = re.compile(r"\d{4}$")
_KEYS = re.compile(rb'"(images|annotations|categories)"\s*:\s*\[')
_PEEK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Coco(DetectionFormat):
    def claims(self, path: str) -> bool:
        if not path.lower().endswith(".json"):
            return False
        try:
            head = location.read_bytes(path, 0, _PEEK)
        except (OSError, ValueError):
            return False
        return len({m.group(1) for m in _KEYS.finditer(head)}) >= 1 and head.lstrip()[:1] == b"{"

    def split_name(self, file_name: str) -> str:
        stem = _TASK_PREFIX.sub("", os.path.splitext(file_name)[0])
        return _YEAR.sub("", stem) or stem

    def folder_of(self, path: str) -> str:
        """The standard layout's image folder (``annotations/instances_val2017.json`` ->
        ``val2017/`` beside ``annotations/``) where it exists, else the file's own folder."""
        folder = location.dirname(location.absolute(path))
        stem = _TASK_PREFIX.sub("", os.path.splitext(os.path.basename(path))[0])
        if stem and stem != os.path.splitext(os.path.basename(path))[0] and not location.is_url(folder):
            for candidate in (os.path.join(os.path.dirname(folder), stem), os.path.join(folder, stem)):
                if os.path.isdir(candidate):
                    return candidate
        return folder

    def label_map(self, path: str) -> tuple[tuple[int, str], ...] | None:
        categories = _load(path).get("categories") or []
        return tuple(sorted((int(c["id"]), str(c["name"])) for c in categories))

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        data = _load(source)
        categories = {int(c["id"]): c for c in data.get("categories") or []}
        points = max((len(c.get("keypoints") or []) for c in categories.values()), default=0)
        images = data.get("images") or []
        by_image: dict[Any, list[dict[str, Any]]] = {image["id"]: [] for image in images}
        for ann in data.get("annotations") or []:
            if ann.get("image_id") not in by_image:
                yield EntryError(source, 0, f"annotation {ann.get('id')}: image_id {ann.get('image_id')!r} names no image")
                continue
            by_image[ann["image_id"]].append(ann)
        for position, image in enumerate(images, start=1):
            anns = by_image[image["id"]]
            bad = next((a for a in anns if a.get("category_id") not in categories), None)
            if bad is not None:
                yield EntryError(source, position, f"annotation {bad.get('id')}: category_id {bad.get('category_id')!r} is no category")
                continue
            yield detection_row(
                source,
                position,
                image["file_name"],
                image["file_name"],
                str(image["id"]),
                objects(image, anns, categories, points),
                image["file_name"],
            )


def objects(image: dict[str, Any], anns: list[dict[str, Any]], categories: dict[int, Any], points: int) -> dict[str, Any]:
    """One image's annotations as a row's ``objects`` value."""
    out: dict[str, Any] = {
        "size": [image["width"], image["height"]] if "width" in image and "height" in image else None,
        "bbox": [[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)],
        "label": [int(a["category_id"]) for a in anns],
        "text": [str(categories[int(a["category_id"])]["name"]) for a in anns],
        "ref": [f"annotation {a.get('id')}" for a in anns],
        "is_crowd": [int(a.get("iscrowd", 0)) for a in anns],
        "area": [float(a.get("area", 0.0)) for a in anns],
    }
    if any("segmentation" in a for a in anns):
        out["segmentation"] = [a.get("segmentation") for a in anns]
    if points:  # also for an image without objects: every record of the set has the keypoint keys
        out["keypoints"] = [_padded(a.get("keypoints") or [], points) for a in anns]
        out["points"] = points
    return out


def _padded(keypoints: list[float], points: int) -> list[float]:
    """An object's keypoints as ``points`` (x, y, v) triples: a class with fewer has invisible ones."""
    return list(keypoints[: points * 3]) + [0.0] * (points * 3 - min(len(keypoints), points * 3))


def _load(path: str) -> dict[str, Any]:
    try:
        with location.open_read(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ShardkitError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise ShardkitError(f"{path}: not a COCO file (expected an object with images, annotations and categories)")
    return data


COCO = Coco("coco")
