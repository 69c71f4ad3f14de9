"""An image's annotated objects: the value a detection row gives (``Objects``), and the objects
on the pixels of their picture (``ObjectArrays``: boxes clipped, those left with no area
dropped, instance masks drawn), which augmentation moves and ``features.objects`` writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from shardkit.errors import quoted
from shardkit.features.base import BadValue
from shardkit.formats.image_headers import ImageProblem

# The per-object lists a raw value may hold beside its boxes (``bbox``) and class names (``text``).
OPTIONAL = ("label", "ref", "is_crowd", "area", "segmentation", "keypoints", "difficult", "truncated", "occluded", "truncation")
# The per-object attributes written where the input has them, with their Example list type.
ATTRIBUTES = (("difficult", "int64"), ("truncated", "int64"), ("occluded", "int64"), ("truncation", "float"))


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
    truncated: np.ndarray | None = None  # (N,) int64: 0 or 1 (Pascal VOC, a CVAT checkbox)
    occluded: np.ndarray | None = None  # (N,) int64: 0 or 1 (CVAT), 0 to 3 (KITTI's occlusion state)
    truncation: np.ndarray | None = None  # (N,) float64: the fraction outside the image, 0 to 1 (KITTI)
    # What the input's reader left out of this image (KITTI's DontCare regions, CVAT shapes that are
    # no box, polygon or mask), one name each: counted, never silently gone.
    left_out: tuple[str, ...] = ()

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
        unknown = set(raw) - {"bbox", "text", "units", "size", "points", "left_out", *OPTIONAL}
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
        left_out = raw.get("left_out", [])
        if not isinstance(left_out, list) or not all(isinstance(t, str) and t for t in left_out):
            raise BadValue("left_out: expected a name for each annotation left out")
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
            occluded=_optional(raw, "occluded", n, np.int64),
            truncation=_optional(raw, "truncation", n, np.float64),
            left_out=tuple(left_out),
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
    problem = segmentation_problem(segmentation, width, height)
    if problem is not None:
        raise ImageProblem(f"{objects.ref(i)}: {problem}")
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


# -- what pycocotools is handed, checked first ---------------------------------------------------
# pycocotools trusts its input: a polygon coordinate of 1e8 (or NaN) makes it allocate an outline
# of that many points, and RLE counts that add up past the image write past its buffer. Either
# kills the process (SIGSEGV, or the OOM killer) with nothing said; checked here, either is an
# entry error, which --on-error skip lists.

# How long a polygon's outline may be, in widths + heights of its image: pycocotools draws it at 5x
# with about 24 bytes a point (64 x (640 + 480): 9 MB). Real outlines are a few times the image's.
OUTLINE_SIZES = 64


def segmentation_problem(segmentation: Any, width: int, height: int) -> str | None:
    """What is wrong with a COCO segmentation (polygons, or an RLE) for a ``width`` x ``height``
    image, that pycocotools would crash on or run out of memory for; None where it may draw it."""
    if isinstance(segmentation, list):
        return _polygons_problem(segmentation, width, height)
    if not isinstance(segmentation, Mapping):
        return None  # pycocotools refuses it with an exception: the caller's message
    size = segmentation.get("size")
    if size != [height, width] and size != (height, width):
        shown = f"{size[1]}x{size[0]}" if isinstance(size, list | tuple) and len(size) == 2 else quoted(size)
        return f"its RLE is {shown}, the image {width}x{height}"
    counts = segmentation.get("counts")
    if isinstance(counts, list):
        if not all(type(c) is int and c >= 0 for c in counts):
            return "its RLE counts are not whole numbers of pixels"
        total = sum(counts)
    elif isinstance(counts, str | bytes):
        decoded = _compressed_counts(counts.encode("latin-1", "replace") if isinstance(counts, str) else counts)
        if decoded is None:
            return f"its RLE counts {quoted(counts)} are not a compressed RLE"
        total = int(decoded.sum())
    else:
        return None
    if total != width * height:
        return f"its RLE counts add up to {total:,} pixels, the {width}x{height} image has {width * height:,}"
    return None


def _polygons_problem(polygons: list[Any], width: int, height: int) -> str | None:
    outline = 0.0
    for polygon in polygons:
        try:
            xy = np.asarray(polygon, dtype=np.float64)
        except (TypeError, ValueError):
            return f"polygon {quoted(polygon)} is not a list of numbers"
        if xy.ndim != 1:
            return f"polygon {quoted(polygon)} is not a list of numbers"
        if not np.isfinite(xy).all():
            return f"polygon coordinate {xy[~np.isfinite(xy)][0]} is not finite"
        x, y = xy[0 : len(xy) // 2 * 2 : 2], xy[1 : len(xy) // 2 * 2 : 2]
        far = (x < -width) | (x > 2 * width)
        if far.any() or ((y < -height) | (y > 2 * height)).any():
            value = x[far][0] if far.any() else y[(y < -height) | (y > 2 * height)][0]
            return f"polygon coordinate {value:g} is far outside the {width}x{height} image (more than its size past a border)"
        if len(x):
            outline += float(np.maximum(np.abs(np.diff(x, append=x[:1])), np.abs(np.diff(y, append=y[:1]))).sum())
    if outline > OUTLINE_SIZES * (width + height):
        return f"its polygons' outline is {outline:,.0f} px long, over {OUTLINE_SIZES} times the {width}x{height} image's width + height"
    return None


_CHUNK_BITS = np.int64(0x1F)


def _compressed_counts(text: bytes) -> np.ndarray | None:
    """The runs of a compressed COCO RLE, decoded as pycocotools' ``rleFrString`` does (5 bits a
    byte from "0", a run's last byte with 0x20 clear, 0x10 its sign, runs past the second stored
    as differences to the run two before); None where they are not runs of pixels."""
    codes = np.frombuffer(text, dtype=np.uint8).astype(np.int64) - 48
    if not codes.size:
        return codes
    if ((codes < 0) | (codes > 63)).any():
        return None
    ends = (codes & 0x20) == 0
    if not ends[-1]:
        return None
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    place = np.arange(codes.size) - np.repeat(starts, np.diff(np.append(starts, codes.size)))
    if place.max() > 11:  # past 60 bits: no count of pixels
        return None
    values = np.add.reduceat((codes & _CHUNK_BITS) << (5 * place), starts)
    negative = (codes[ends] & 0x10) != 0
    values[negative] |= np.int64(-1) << (5 * (place[ends][negative] + 1))
    runs = values.copy()
    runs[1::2] = np.cumsum(values[1::2])
    runs[2::2] = np.cumsum(values[2::2])
    return None if (runs < 0).any() else runs
