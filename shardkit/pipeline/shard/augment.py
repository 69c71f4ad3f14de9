"""Augmentation with albumentations: with ``reduced_decode``, the only modules that import it.

Pipelines travel as albumentations' own serialized dicts (``A.to_dict`` / ``A.from_dict``), so any
transform albumentations knows works, and a task stays a small picklable value; each worker builds
the pipeline itself. Every record's randomness comes from a seed derived from the data's identity.

An objects feature (``features.annotations.ObjectArrays``) rides as albumentations' boxes, instance
masks and keypoints, each box and keypoint carrying its index as a label field: a box that a
transform or ``augment.boxes`` drops takes its mask, keypoints and class with it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.errors import ConfigError
from shardkit.features.annotations import ObjectArrays, clipped

OBJECTS = "objects"  # the target an objects feature rides as: boxes, instance masks, keypoints
# Label fields that carry each box's and each keypoint's position in the input through the pipeline.
_BOX_INDEX, _POINT_INDEX = "object_index", "keypoint_index"


def normalize_pipeline(raw: object) -> dict[str, Any]:
    """Turn a config's ``augment.pipeline`` into ``A.to_dict`` form, validating every transform.

    Accepts the full ``A.to_dict`` output, its inner ``transform`` mapping, or a plain list of
    transforms (wrapped in ``Compose``). Errors carry a key-path suffix such as ``.transforms[2]``.
    """
    import albumentations as A

    if isinstance(raw, list):
        transform: Any = {"__class_fullname__": "Compose", "p": 1.0, "transforms": raw}
    elif isinstance(raw, Mapping):
        transform = raw.get("transform", raw)
    else:
        raise ConfigError("", "expected a list of transforms or albumentations' serialized dict")
    if not isinstance(transform, Mapping) or "__class_fullname__" not in transform:
        raise ConfigError("", "each transform is a mapping with __class_fullname__ (as A.to_dict writes it)")
    children = transform.get("transforms")
    if isinstance(children, list):
        for i, child in enumerate(children):
            try:
                A.from_dict({"transform": dict(child)} if isinstance(child, Mapping) else {"transform": child})
            except Exception as exc:  # albumentations raises ValueError, KeyError, TypeError, pydantic errors
                name = child.get("__class_fullname__", "?") if isinstance(child, Mapping) else repr(child)
                raise ConfigError(f".transforms[{i}]", f"{name}: {_short(exc)}") from None
    try:
        built = A.from_dict({"transform": dict(transform)})
    except Exception as exc:
        raise ConfigError("", _short(exc)) from None
    # Round-trip so the stored form is albumentations' canonical one (defaults filled in), as
    # plain JSON data (tuples become lists), exactly as the manifest will hold it.
    return dict(json.loads(json.dumps(A.to_dict(built))))


def check_for_objects(pipeline: Mapping[str, Any]) -> None:
    """Refuse box and keypoint parameters of the pipeline's own: for an objects feature shardkit
    sets them (its coordinates, its label fields); ``augment.boxes`` takes the filters."""
    transform = pipeline.get("transform", pipeline)
    for key in ("bbox_params", "keypoint_params"):
        if isinstance(transform, Mapping) and transform.get(key) is not None:
            reason = "shardkit sets these for the objects feature: give min_visibility and min_area under augment.boxes"
            raise ConfigError(f".{key}", reason)


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, KeyError):
        text = f"unknown transform or missing key {text}"
    return text.splitlines()[0]


class Augmenter:
    """A built pipeline applied to one input's images, masks and objects together, seeded per record."""

    def __init__(
        self,
        pipeline: Mapping[str, Any],
        targets: Sequence[tuple[str, str]],
        decode: str = "exact",
        min_visibility: float = 0.0,
        min_area: float = 0.0,
    ) -> None:
        """``targets``: (feature key, albumentations target: ``image``, ``mask`` or ``objects``) of
        each feature it moves, as its kind says. ``decode="reduced"``: when the pipeline begins with
        a deterministic downscale, that first transform is ``self.downscale``
        (``pipeline.shard.reduced_decode``), for the caller to apply to each input (shrunk at decode
        where it can) before calling this, which runs the rest. ``min_visibility``, ``min_area``:
        albumentations' box filters (``augment.boxes``)."""
        import albumentations as A

        from shardkit.pipeline.shard.reduced_decode import Downscale, split_leading_downscale

        self.downscale: Downscale | None = None
        split = split_leading_downscale(pipeline) if decode == "reduced" else None
        if split is not None:
            leading, pipeline = split
            self.downscale = Downscale(leading)
        self._objects = next((key for key, target in targets if target == OBJECTS), None)
        # albumentations filters boxes after every transform; the split-off downscale runs outside
        # it, so its filter runs here (a resize moves no box out: only min_area can drop one).
        self._min_area = min_area if self.downscale is not None else 0.0
        if self._objects is not None:
            pipeline = _with_object_params(pipeline, min_visibility, min_area)
        with warnings.catch_warnings():  # boxes with no geometric transform to move them are no mistake
            warnings.filterwarnings("ignore", message="Got processor for")
            compose = A.from_dict(dict(pipeline))
        if not isinstance(compose, A.BaseCompose):
            compose = A.Compose([compose])
        # The first picture of each target rides as albumentations' own ("image", "mask"); any
        # further ones as additional targets of that type, so geometric transforms move them all alike.
        self._targets: dict[str, str] = {}
        extra: dict[str, str] = {}
        seen: dict[str, int] = {}
        for key, target in targets:
            if target == OBJECTS:
                continue
            i = seen[target] = seen.get(target, -1) + 1
            self._targets[key] = target if i == 0 else f"{target}_{i}"
            if i:
                extra[self._targets[key]] = target
        if extra:
            compose.add_targets(extra)
        self._compose = compose

    def __call__(self, inputs: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """Each input moved: pictures as arrays, the objects feature's ``ObjectArrays`` as ones on
        the augmented picture (``keep`` still indexing the input's objects)."""
        self._compose.set_random_seed(seed)
        data = {self._targets[k]: v for k, v in inputs.items() if k != self._objects}
        if self._objects is not None:
            data.update(_object_data(inputs[self._objects], self._min_area))
        out = self._compose(**data)
        moved: dict[str, Any] = {k: np.ascontiguousarray(out[self._targets[k]]) for k in inputs if k != self._objects}
        if self._objects is not None:
            height, width = out["image"].shape[:2]  # the objects' picture: augmentation needs an image
            moved[self._objects] = _moved_objects(inputs[self._objects], out, width, height)
        return moved


def _with_object_params(pipeline: Mapping[str, Any], min_visibility: float, min_area: float) -> dict[str, Any]:
    """The serialized pipeline as a ``Compose`` that moves boxes (in pixels, clipped to the picture
    after each transform) and keypoints (none removed, so every object keeps its count)."""
    transform = dict(pipeline.get("transform", pipeline))
    if str(transform.get("__class_fullname__", "")).rsplit(".", 1)[-1] != "Compose":
        transform = {"__class_fullname__": "Compose", "p": 1.0, "transforms": [transform]}
    transform["bbox_params"] = {
        "format": "pascal_voc",
        "label_fields": [_BOX_INDEX],
        "min_visibility": min_visibility,
        "min_area": min_area,
        "clip": True,
    }
    transform["keypoint_params"] = {"format": "xy", "label_fields": [_POINT_INDEX], "remove_invisible": False}
    return {**pipeline, "transform": transform}


def _object_data(objects: ObjectArrays, min_area: float) -> dict[str, Any]:
    """albumentations' keyword arguments for ``objects``, less the boxes under ``min_area``."""
    count = len(objects.keep)
    boxes, index = objects.boxes, np.arange(count)
    if min_area:
        big = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) >= min_area - 1e-7  # albumentations' own tolerance
        boxes, index = boxes[big], index[big]
    points = objects.keypoints if objects.keypoints is not None else np.zeros((0, 0, 3))
    data: dict[str, Any] = {
        "bboxes": boxes,
        _BOX_INDEX: index,
        # Always given, if empty: the keypoint label field must be there whenever its params are.
        "keypoints": points[..., :2].reshape(-1, 2),
        _POINT_INDEX: np.arange(points.shape[0] * points.shape[1]),
    }
    if objects.masks is not None and count:
        data["masks"] = objects.masks
    return data


def _moved_objects(objects: ObjectArrays, out: Mapping[str, Any], width: int, height: int) -> ObjectArrays:
    """The objects that outlived the pipeline, on its ``width`` x ``height`` result: boxes clipped
    and those left with no area dropped once more, each survivor's mask and keypoints beside it.
    A keypoint that left the picture, or was never visible, is (0, 0) with visibility 0."""
    index = np.asarray(out[_BOX_INDEX], dtype=np.int64).reshape(-1)
    boxes, alive = clipped(np.asarray(out["bboxes"], dtype=np.float64).reshape(-1, 4), width, height)
    index, boxes = index[alive], boxes[alive]
    masks = None
    if objects.masks is not None:
        masks = np.ascontiguousarray(out["masks"][index]) if len(objects.keep) else np.zeros((0, height, width), np.uint8)
        if masks.size and masks.max() > 1:  # a transform's fill_mask pads every mask with it: no part of an object
            masks = (masks == 1).astype(np.uint8)
    points = None
    if objects.keypoints is not None:
        count, per_object = objects.keypoints.shape[:2]
        xy = np.zeros((count * per_object, 2))
        moved = np.asarray(out[_POINT_INDEX], dtype=np.int64).reshape(-1)
        if len(moved):
            xy[moved] = np.asarray(out["keypoints"], dtype=np.float64).reshape(len(moved), -1)[:, :2]
        visibility = np.zeros(count * per_object)
        visibility[moved] = objects.keypoints[..., 2].reshape(-1)[moved]
        x, y = xy[:, 0], xy[:, 1]
        # Inside as albumentations sees it: pixel positions 0 <= x < width (a flip maps x to width - 1 - x).
        visibility[(x < 0) | (x >= width) | (y < 0) | (y >= height)] = 0
        xy[visibility == 0] = 0
        points = np.concatenate([xy, visibility[:, None]], axis=1).reshape(count, per_object, 3)[index]
    return ObjectArrays(boxes, objects.keep[index], masks, points)


def pin_native_threads() -> Callable[[], None]:
    """Make OpenCV, OpenMP and BLAS single-threaded in this process; returns a function that undoes it.

    Several worker processes each running native thread pools fight over the cores (measured:
    OpenCV's threads inside albumentations cut about 210 -> 130 images/s on 2 cores), so every
    build worker pins them to one thread: the parallelism is the processes.
    """
    import cv2
    from threadpoolctl import threadpool_limits

    previous = int(cv2.getNumThreads())
    cv2.setNumThreads(1)
    limits = threadpool_limits(limits=1)

    def restore() -> None:
        cv2.setNumThreads(previous)
        limits.restore_original_limits()

    return restore
