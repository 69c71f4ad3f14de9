"""Decode less: a pipeline that begins by shrinking the image lets a JPEG be decoded shrunk.

libjpeg-turbo decodes a JPEG at 1/2, 1/4 or 1/8 of its size for much less work than whole (DCT
scaling: a 12-megapixel photo in about a quarter of the time). When an augmentation pipeline
begins with a deterministic downscale albumentations expresses (``SmallestMaxSize``,
``LongestMaxSize`` with one ``max_size``, or ``Resize``, at ``p`` 1), each JPEG image is decoded at
the smallest such scale that keeps enough pixels, resized to exactly the size that transform
gives the full image, and the rest of the pipeline runs on it with the same random draws.

How much is enough is chosen so that the result stays within 38 dB PSNR of decoding whole,
measured on scikit-image's photos enlarged to 12 megapixels with sensor-like noise
(``tests/pipeline/shard/test_reduced_decode.py``; ``docs/performance.md`` has the figures):

- an area-averaging downscale (``INTER_AREA``, or ``area_for_downscale``): any scale that keeps
  at least twice the target size, then an area resize (43-51 dB; at 1.5x it fell to 34 dB);
- a linear one (albumentations' default): half scale at most, keeping at least twice the target
  size, then the transform's own linear resize (40 dB). A linear downscale samples few pixels of
  the full image, so it keeps some of the noise and fine texture that a shrunk decode averages
  away, the more so the more is decoded away (1/4 scale: 33-35 dB);
- cubic, Lanczos and nearest-neighbour: never. Their kernels keep even more of that aliased
  detail (37.2-37.6 dB however little is decoded away), and nearest keeps single pixels.

Masks, other images and other formats get the leading transform applied by albumentations itself
at full size, so a mask is exactly what decoding whole gives; it is applied once per input and
shared by every augmented copy. ``augment.decode: exact`` in the config turns all this off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from shardkit.formats import fast_decode
from shardkit.formats.image_headers import ImageInfo

DOWNSCALES = ("SmallestMaxSize", "LongestMaxSize", "Resize")


def split_leading_downscale(pipeline: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the pipeline cut to its first transform, the pipeline without it), both serialized as
    ``pipeline`` is, when it begins with a deterministic downscale; None otherwise."""
    compose = pipeline.get("transform", pipeline)
    if not isinstance(compose, Mapping) or _name(compose) != "Compose" or float(compose.get("p", 1.0)) < 1.0:
        return None
    children = compose.get("transforms")
    if not isinstance(children, list) or not children or not isinstance(children[0], Mapping):
        return None
    first = children[0]
    if _name(first) not in DOWNSCALES or float(first.get("p", 1.0)) < 1.0:
        return None
    if _name(first) != "Resize" and first.get("max_size") is not None and not isinstance(first.get("max_size"), int):
        return None  # a list of sizes is a random choice, not one size
    leading = {**pipeline, "transform": {**compose, "transforms": [dict(first)]}}
    rest = {**pipeline, "transform": {**compose, "transforms": list(children[1:])}}
    return leading, rest


def _name(transform: Mapping[str, Any]) -> str:
    return str(transform.get("__class_fullname__", "")).rsplit(".", 1)[-1]


# albumentations' ``area_for_downscale`` values that make a shrinking transform use INTER_AREA on images.
_AREA_FOR_IMAGES = frozenset({"image", "image_mask"})


class Downscale:
    """The leading transform of a pipeline, applied on its own to full-size or reduced arrays."""

    def __init__(self, leading: Mapping[str, Any]) -> None:
        import albumentations as A
        import cv2

        # Built through the Compose, so a Compose-wide mask_interpolation reaches the transform.
        self._transform: Any = A.from_dict(dict(leading)).transforms[0]
        self._area = int(cv2.INTER_AREA)
        # Per interpolation that allows a reduced decode: how many times the target size it keeps,
        # and the largest DCT scale.
        self._margins = {self._area: (2.0, 8), int(cv2.INTER_LINEAR): (2.0, 2), int(cv2.INTER_LINEAR_EXACT): (2.0, 2)}

    def _params(self, height: int, width: int) -> dict[str, Any]:
        if type(self._transform).__name__ == "Resize":
            return {}
        return dict(self._transform.get_params_dependent_on_data({"shape": (height, width)}, {}))

    def target(self, height: int, width: int) -> tuple[int, int, bool]:
        """(height, width) the transform gives a ``height`` x ``width`` image, and whether it shrinks."""
        params = self._params(height, width)
        if "scale" in params:
            scale = float(params["scale"])
            return max(1, round(height * scale)), max(1, round(width * scale)), scale < 1.0
        th, tw = int(self._transform.height), int(self._transform.width)
        return th, tw, th < height or tw < width

    def _interpolation(self, shrinks: bool) -> int:
        if shrinks and self._transform.area_for_downscale in _AREA_FOR_IMAGES:
            return self._area
        return int(self._transform.interpolation)

    def decode_scale(self, info: ImageInfo) -> int:
        """The DCT scale (1, 2, 4, 8) to decode this image at: 1 for anything but a JPEG that keeps
        enough pixels for the target (see the module's docstring)."""
        if info.format != "JPEG":
            return 1
        th, tw, shrinks = self.target(info.height, info.width)
        margin, most = self._margins.get(self._interpolation(shrinks), (0.0, 1)) if shrinks else (0.0, 1)
        for scale in (s for s in reversed(fast_decode.SCALES) if 1 < s <= most):
            h, w = fast_decode.scaled_size(info, scale)
            if h >= margin * th and w >= margin * tw:
                return scale
        return 1

    def from_reduced(self, reduced: np.ndarray, height: int, width: int) -> np.ndarray:
        """A reduced decode of a ``height`` x ``width`` image resized to the transform's target."""
        import cv2

        th, tw, shrinks = self.target(height, width)
        return np.asarray(cv2.resize(reduced, (tw, th), interpolation=self._interpolation(shrinks)))

    def image(self, array: np.ndarray) -> np.ndarray:
        """The transform applied to a full-size image, by albumentations."""
        return np.asarray(self._transform.apply(array, **self._params(*array.shape[:2])))

    def mask(self, array: np.ndarray) -> np.ndarray:
        """The transform applied to a full-size mask, by albumentations (its mask interpolation)."""
        return np.asarray(self._transform.apply_to_mask(array, **self._params(*array.shape[:2])))
