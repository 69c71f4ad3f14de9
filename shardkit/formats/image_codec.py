"""Pillow decode and encode (with ``fast_decode`` for common files), and the rule for passing original bytes through untouched.

Original file bytes are stored as they are whenever nothing changes the pixels and the file is
already in the target format: re-encoding a JPEG only loses quality and costs time.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct

import numpy as np
from PIL import Image, UnidentifiedImageError

from shardkit.formats import fast_decode

# Image modes shardkit stores, per feature kind, for each mode a file may come in with.
# Palette masks keep their indices (TensorFlow's decode_png would expand a palette to RGB).
_IMAGE_MODE = {"1": "L", "L": "L", "LA": "RGBA", "P": "RGB", "RGB": "RGB", "RGBA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB"}
_MASK_MODE = {"1": "L", "L": "L", "P": "L", "RGB": "RGB", "RGBA": "RGBA", "I;16": "I;16"}
_CHANNEL_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
_MODE_CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4, "I;16": 1, "LA": 2, "1": 1, "P": 3, "CMYK": 4, "YCbCr": 3}
_FORMAT = {"jpeg": "JPEG", "png": "PNG"}


class ImageProblem(ValueError):
    """A file that is missing, unreadable or not an image Pillow can handle."""


@dataclasses.dataclass(frozen=True)
class ImageInfo:
    format: str  # Pillow's name: JPEG, PNG, ...
    mode: str
    width: int
    height: int


def probe(data: bytes) -> ImageInfo:
    """Read only the header: format, mode and size (parsed directly for common PNG and JPEG files)."""
    fast = _probe_png(data) if data[:8] == _PNG_SIGNATURE else _probe_jpeg(data) if data[:2] == b"\xff\xd8" else None
    if fast is not None:
        if fast.width * fast.height > 2 * (Image.MAX_IMAGE_PIXELS or 1 << 62):
            raise ImageProblem(f"{fast.width}x{fast.height} pixels: over Pillow's decompression-bomb limit")
        return fast
    try:
        with Image.open(io.BytesIO(data)) as im:
            return ImageInfo(format=im.format or "", mode=im.mode, width=im.width, height=im.height)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageProblem(f"not an image Pillow can read ({_reason(exc)})") from None


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# 8-bit PNG colour types -> Pillow's mode; other bit depths go through Pillow itself.
_PNG_MODES = {0: "L", 2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}
_JPEG_MODES = {1: "L", 3: "RGB"}
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _probe_png(data: bytes) -> ImageInfo | None:
    """IHDR is the first chunk at a fixed offset: width, height, bit depth, colour type."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    mode = _PNG_MODES.get(colour)
    if depth != 8 or mode is None or not width or not height:
        return None
    return ImageInfo("PNG", mode, width, height)


def _probe_jpeg(data: bytes) -> ImageInfo | None:
    """Walk the marker segments to the first start-of-frame: height, width, component count."""
    pos, end = 2, len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _JPEG_SOF:
            if pos + 10 > end:
                return None
            height, width = (data[pos + 5] << 8) | data[pos + 6], (data[pos + 7] << 8) | data[pos + 8]
            mode = _JPEG_MODES.get(data[pos + 9])
            if mode is None or not width or not height:
                return None
            return ImageInfo("JPEG", mode, width, height)
        pos += 2 + ((data[pos + 2] << 8) | data[pos + 3])  # the segment's length, big-endian
    return None


def stored_mode(info: ImageInfo, kind: str, channels: int | None, encoding: str) -> str:
    """The Pillow mode the stored image has after any conversion."""
    if encoding == "raw":
        return info.mode
    if channels is not None:
        return _CHANNEL_MODE[channels]
    table = _MASK_MODE if kind == "mask" else _IMAGE_MODE
    mode = table.get(info.mode)
    if mode is None:
        raise ImageProblem(f"unsupported image mode {info.mode!r} for a {kind} feature")
    if encoding == "jpeg" and mode == "RGBA":
        return "RGB"  # JPEG has no alpha channel
    return mode


def channels_of(mode: str) -> int:
    return _MODE_CHANNELS.get(mode, 3)


def can_pass_through(info: ImageInfo, encoding: str, target_mode: str) -> bool:
    """True when the original bytes already are what re-encoding unchanged pixels would give."""
    if encoding == "raw":
        return True
    return info.format == _FORMAT[encoding] and info.mode == target_mode


def decode(data: bytes, mode: str, class_values: bool = False, info: ImageInfo | None = None, scale: int = 1) -> np.ndarray:
    """Decode to an HxW (one channel) or HxWxC array in ``mode``.

    ``class_values`` (masks) keeps a palette image's indices and a 1-bit image's 0/1 as they are,
    where a colour conversion would turn them into grey levels. ``scale`` (2, 4 or 8) asks a JPEG
    for 1/``scale`` of its size where ``fast_decode`` can (check the result's shape): what that
    costs in fidelity is ``pipeline.reduced_decode``'s business. ``info`` saves probing again.
    """
    info = info if info is not None else probe(data)
    fast = fast_decode.jpeg(data, info, mode, scale) if info.format == "JPEG" else fast_decode.png(data, info, mode)
    if fast is not None:
        return fast
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if class_values and mode == "L" and im.mode in ("P", "1"):
                return np.asarray(im).astype(np.uint8)
            if im.mode == "P" and mode in ("RGB", "RGBA") and "transparency" in im.info:
                im = im.convert("RGBA")
            converted = im if im.mode == mode else im.convert(mode)
            return np.asarray(converted)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageProblem(f"cannot decode image ({_reason(exc)})") from None


def encode(array: np.ndarray, encoding: str, quality: int, png_level: int = 1, mask: bool = False) -> bytes:
    """JPEG at ``quality``, or lossless PNG at zlib level ``png_level``.

    An 8-bit mask is written with no row filter and zlib's run-length strategy, which suits class
    maps: on the benchmark's masks about 3x faster to write than Pillow's adaptive row filters at
    the same level, and a quarter smaller (``scripts/bench_stages.py``).
    """
    options = _mask_png_encoder() if mask and encoding == "png" and array.dtype == np.uint8 and array.ndim in (2, 3) else None
    if options is not None:
        import cv2

        if array.ndim == 3:
            array = cv2.cvtColor(array, cv2.COLOR_RGB2BGR if array.shape[2] == 3 else cv2.COLOR_RGBA2BGRA)
        ok, out = cv2.imencode(".png", array, [cv2.IMWRITE_PNG_COMPRESSION, png_level, *options])
        if ok:
            return bytes(out)
    buf = io.BytesIO()
    sixteen_bit = array.dtype == np.uint16 and array.ndim == 2  # 16-bit masks stay 16-bit (mode I;16)
    image = Image.fromarray(array if sixteen_bit else array.astype(np.uint8, copy=False))
    if encoding == "jpeg":
        image.save(buf, format="JPEG", quality=quality)
    else:
        image.save(buf, format="PNG", compress_level=png_level)
    return buf.getvalue()


@functools.cache
def _mask_png_encoder() -> tuple[int, ...] | None:
    """OpenCV's PNG options for no row filter and run-length zlib, where this OpenCV has them."""
    try:
        import cv2
    except ImportError:
        return None
    if not hasattr(cv2, "IMWRITE_PNG_FILTER") or not hasattr(cv2, "IMWRITE_PNG_STRATEGY_RLE"):
        return None
    return (cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnidentifiedImageError):
        return "unknown or damaged image format"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
