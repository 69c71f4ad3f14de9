"""An image's annotated objects: the value a detection row gives (``Objects``), and the objects
on the pixels of their picture (``ObjectArrays``: boxes clipped, those left with no area
dropped, instance masks drawn), which augmentation moves and ``features.objects`` writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from shardkit.features.base import BadValue
from shardkit.formats.image_headers import ImageProblem

# The per-object lists a raw value may hold beside its boxes (``bbox``) and class names (``text``).
OPTIONAL = ("label", "ref", "is_crowd", "area", "segmentation", "keypoints", "difficult", "truncated")


@dataclasses.dataclass(slots=True)
class Objects:
    """One image's objects as its input gives them, checked; ``N`` objects."""

    boxes: np.ndarray  # (N, 4) float64 xmin, ymin, xmax, ymax: pixels, or fractions of the image with ``normalized``
    text: tuple[str, ...]  # class names
    normalized: bool = False
    size: tuple[int, int] | None = None  # (width, height) the annotation says the image has
    label: np.ndarray | None = None  # (N,) int64: the dataset's own class ids, where it has them
    refs: tuple[str, ...] = ()  # what a message calls each object ("annotation 1234", "object 2")
    is_crowd: np.ndarray | None = None  # (N,) int64
    area: np.ndarray | None = None  # (N,) float64, pixels; NaN where the input gives none
    segmentation: tuple[Any, ...] | None = None  # per object: COCO polygons, a COCO RLE, or None
    keypoints: np.ndarray | None = None  # (N, K, 3) float64 x, y (as the boxes), visibility 0/1/2
    difficult: np.ndarray | None = None  # (N,) int64
    truncated: np.ndarray | None = None  # (N,) int64

    def __len__(self) -> int:
        return len(self.text)

    def ref(self, i: int) -> str:
        return self.refs[i] if self.refs else f"object {i + 1}"

    @classmethod
    def from_raw(cls, raw: Any) -> Objects:
        """A row's ``objects`` value: a mapping with ``bbox`` (``[[xmin, ymin, xmax, ymax], ...]``)
        and ``text`` (class names), optionally ``units`` (``pixels``, the default, or
        ``normalized``), ``size`` ([width, height] the annotation states), and the per-object
        lists in ``OPTIONAL``, with ``points``, the number of keypoints of every object of the
        dataset, where ``keypoints`` may be empty (an image without objects); raises ``BadValue``."""
        if not isinstance(raw, Mapping):
            raise BadValue(f"expected the objects of an image, got {type(raw).__name__}")
        unknown = set(raw) - {"bbox", "text", "units", "size", "points", *OPTIONAL}
        if unknown:
            raise BadValue(f"unknown object fields: {', '.join(sorted(unknown))}")
        text = raw.get("text")
        if not isinstance(text, list) or not all(isinstance(t, str) and t for t in text):
            raise BadValue("text: expected a class name for each object")
        n = len(text)
        boxes = _numbers(raw.get("bbox"), "bbox", n, (4,), np.float64)
        units = raw.get("units", "pixels")
        if units not in ("pixels", "normalized"):
            raise BadValue(f"units: expected pixels or normalized, got {units!r}")
        size = raw.get("size")
        if size is not None:
            if not (isinstance(size, list) and len(size) == 2 and all(isinstance(s, int) and s > 0 for s in size)):
                raise BadValue(f"size: expected [width, height], got {size!r}")
            size = (size[0], size[1])
        refs = raw.get("ref")
        if refs is not None and (not isinstance(refs, list) or len(refs) != n):
            raise BadValue(f"ref: expected one for each of the {n} objects")
        segmentation = raw.get("segmentation")
        if segmentation is not None and (not isinstance(segmentation, list) or len(segmentation) != n):
            raise BadValue(f"segmentation: expected one for each of the {n} objects")
        keypoints = raw.get("keypoints")
        if keypoints is not None:
            if not isinstance(keypoints, list) or len(keypoints) != n:
                raise BadValue(f"keypoints: expected one list for each of the {n} objects")
            points = raw.get("points")
            if points is None:
                points = len(keypoints[0]) // 3 if n and isinstance(keypoints[0], list) else 0
            if isinstance(points, bool) or not isinstance(points, int) or points < 0:
                raise BadValue(f"points: expected the number of keypoints an object has, got {points!r}")
            keypoints = _numbers(keypoints, "keypoints", n, (points * 3,), np.float64).reshape(n, points, 3)
        label = raw.get("label")
        found = cls(
            boxes=boxes,
            text=tuple(text),
            normalized=units == "normalized",
            size=size,
            label=None if label is None else _numbers(label, "label", n, (), np.int64),
            refs=tuple(str(r) for r in refs) if refs is not None else (),
            is_crowd=_optional(raw, "is_crowd", n, np.int64),
            area=_optional(raw, "area", n, np.float64),
            segmentation=tuple(segmentation) if segmentation is not None else None,
            keypoints=keypoints,
            difficult=_optional(raw, "difficult", n, np.int64),
            truncated=_optional(raw, "truncated", n, np.int64),
        )
        if n and not np.isfinite(boxes).all():
            i = int(np.argwhere(~np.isfinite(boxes))[0][0])
            raise BadValue(f"{found.ref(i)}: box {boxes[i].tolist()} is not finite")
        return found


def _numbers(value: Any, name: str, n: int, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    try:
        array: np.ndarray = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise BadValue(f"{name}: expected numbers for each object") from None
    if array.shape != (n, *shape) and not (n == 0 and array.size == 0):
        raise BadValue(f"{name}: expected {n} objects of shape {list(shape)}, got shape {list(array.shape)}")
    return array.reshape(n, *shape)


def _optional(raw: Mapping[str, Any], name: str, n: int, dtype: type) -> np.ndarray | None:
    return None if raw.get(name) is None else _numbers(raw[name], name, n, (), dtype)


@dataclasses.dataclass
class ObjectArrays:
    """One record's objects on the picture they sit on, in its pixels: what augmentation moves,
    and what is written. Every box has a positive width and height."""

    boxes: np.ndarray  # (M, 4) float64 xmin, ymin, xmax, ymax in pixels, within the picture
    keep: np.ndarray  # (M,) int64: which of the input's objects each one is
    masks: np.ndarray | None = None  # (M, H, W) uint8 0/1
    keypoints: np.ndarray | None = None  # (M, K, 3) float64 x, y in pixels, visibility


def clipped(boxes: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes clipped to a ``width`` x ``height`` picture, and which of them keep an area."""
    out = boxes.copy()
    np.clip(out[:, 0::2], 0, width, out=out[:, 0::2])
    np.clip(out[:, 1::2], 0, height, out=out[:, 1::2])
    return out, (out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])


def on_image(objects: Objects, width: int, height: int, masks: bool) -> ObjectArrays:
    """``objects`` on their ``width`` x ``height`` image: boxes (and keypoints) in its pixels and
    clipped to it, those left with no area dropped (``keep`` says which stay), masks drawn."""
    scale = np.array([width, height, width, height], dtype=np.float64) if objects.normalized else None
    boxes = objects.boxes * scale if scale is not None else objects.boxes
    boxes, alive = clipped(boxes, width, height)
    keep = np.flatnonzero(alive).astype(np.int64)
    keypoints = None
    if objects.keypoints is not None:
        keypoints = objects.keypoints[keep].copy()
        if objects.normalized:
            keypoints[..., 0] *= width
            keypoints[..., 1] *= height
    drawn = None
    if masks:
        drawn = np.zeros((len(keep), height, width), dtype=np.uint8)
        for j, i in enumerate(keep):
            drawn[j] = instance_mask(objects, int(i), width, height)
    return ObjectArrays(boxes[keep], keep, drawn, keypoints)


def resized(
    arrays: ObjectArrays, size: tuple[int, int], new_size: tuple[int, int], shrink_mask: Callable[[np.ndarray], np.ndarray]
) -> ObjectArrays:
    """``arrays`` on their (width, height) ``size`` picture, resized to ``new_size`` as a resize
    moves them: boxes and keypoints scaled by the same factors as the picture, each mask shrunk
    by ``shrink_mask`` (the resize as it applies to masks)."""
    (width, height), (new_width, new_height) = size, new_size
    sx, sy = new_width / width, new_height / height
    boxes, alive = clipped(arrays.boxes * np.array([sx, sy, sx, sy]), new_width, new_height)
    keypoints = None
    if arrays.keypoints is not None:
        keypoints = arrays.keypoints.copy()
        keypoints[..., 0] *= sx
        keypoints[..., 1] *= sy
    masks = None
    if arrays.masks is not None:
        masks = np.zeros((len(arrays.keep), new_height, new_width), dtype=np.uint8)
        for j, mask in enumerate(arrays.masks):
            masks[j] = shrink_mask(mask)
    if alive.all():  # a resize keeps a box's area positive, short of a box far under a pixel
        return ObjectArrays(boxes, arrays.keep, masks, keypoints)
    return ObjectArrays(
        boxes[alive], arrays.keep[alive], None if masks is None else masks[alive], None if keypoints is None else keypoints[alive]
    )


def instance_mask(objects: Objects, i: int, width: int, height: int) -> np.ndarray:
    """Object ``i``'s mask, 0/1, from its COCO polygons or RLE (as pycocotools draws them)."""
    segmentation = objects.segmentation[i] if objects.segmentation is not None else None
    if not segmentation:
        raise ImageProblem(f"{objects.ref(i)}: has no segmentation to draw its mask from (masks: true)")
    from pycocotools import mask as coco_mask

    try:
        if isinstance(segmentation, list):  # polygons: one object, maybe in several parts
            rle = coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
        elif isinstance(segmentation.get("counts"), list):  # uncompressed RLE (crowds)
            rle = coco_mask.frPyObjects(segmentation, height, width)
        else:
            rle = dict(segmentation)
            if isinstance(rle["counts"], str):
                rle["counts"] = rle["counts"].encode("ascii")
        mask = coco_mask.decode(rle)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise ImageProblem(f"{objects.ref(i)}: cannot draw its segmentation: {exc}") from None
    if mask.shape[:2] != (height, width):
        raise ImageProblem(f"{objects.ref(i)}: its RLE is {mask.shape[1]}x{mask.shape[0]}, the image {width}x{height}")
    out: np.ndarray = mask.reshape(height, width).astype(np.uint8)
    return out
