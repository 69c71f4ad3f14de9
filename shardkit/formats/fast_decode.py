"""Faster decoders for the common files, giving exactly the pixels Pillow gives, or None to use Pillow.

- JPEG (8-bit greyscale or YCbCr/RGB, decoded to its own mode): ``simplejpeg``, the same
  libjpeg-turbo Pillow uses, decoding straight into a numpy array (Pillow's decode, ``convert``
  and ``np.asarray`` copy the pixels twice more), and able to decode at 1/2, 1/4 or 1/8 scale
  (libjpeg-turbo's DCT scaling) for ``pipeline.reduced_decode``.
- PNG (8-bit greyscale, RGB or RGBA, decoded to its own mode): OpenCV's ``imdecode`` (libpng),
  about 1.6x Pillow's decode on large masks; OpenCV comes with albumentations.

Anything else (palettes, 16-bit, CMYK, colour conversions) returns None and goes through Pillow.
A file these decoders reject also returns None, so Pillow gives the error message (or decodes a
JPEG with harmless warnings, as it always has).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from shardkit.formats.image_codec import ImageInfo

SCALES = (1, 2, 4, 8)  # the DCT scale denominators libjpeg-turbo decodes fastest


def jpeg(data: bytes, info: ImageInfo, mode: str, scale: int = 1) -> np.ndarray | None:
    """``data`` decoded at 1/``scale`` of its size (each side rounded up, as libjpeg does), or None."""
    if info.format != "JPEG" or info.mode != mode or mode not in ("L", "RGB") or scale not in SCALES:
        return None
    import simplejpeg

    want_h, want_w = -(-info.height // scale), -(-info.width // scale)
    try:
        array = simplejpeg.decode_jpeg(data, colorspace="GRAY" if mode == "L" else "RGB", min_height=want_h, min_width=want_w)
    except ValueError:  # damaged, or a warning libjpeg recovers from: Pillow decides
        return None
    if not isinstance(array, np.ndarray) or array.shape[:2] != (want_h, want_w):
        return None
    return array[:, :, 0] if mode == "L" else array


def scaled_size(info: ImageInfo, scale: int) -> tuple[int, int]:
    """(height, width) that ``jpeg(..., scale)`` decodes to."""
    return -(-info.height // scale), -(-info.width // scale)


def png(data: bytes, info: ImageInfo, mode: str) -> np.ndarray | None:
    """An 8-bit PNG in its own mode (L, RGB, RGBA), decoded by OpenCV, or None."""
    if info.format != "PNG" or info.mode != mode or mode not in ("L", "RGB", "RGBA"):
        return None
    import cv2

    array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    if array is None or array.dtype != np.uint8 or array.shape[:2] != (info.height, info.width):
        return None
    if (array.shape[2] if array.ndim == 3 else 1) != channels:  # e.g. a transparency chunk made alpha
        return None
    if channels == 3:
        return cv2.cvtColor(array, cv2.COLOR_BGR2RGB)
    if channels == 4:
        return cv2.cvtColor(array, cv2.COLOR_BGRA2RGBA)
    return array
