"""Pillow decode and encode (with ``fast_decode`` for common files), and the rule for passing original bytes through untouched.

Original file bytes are stored as they are whenever nothing changes the pixels and the file is
already in the target format: re-encoding a JPEG only loses quality and costs time.
"""

from __future__ import annotations

import functools
import io

import numpy as np
from PIL import Image, UnidentifiedImageError

from shardkit.formats import fast_decode
from shardkit.formats.image_headers import ImageInfo, ImageProblem, pillow_reason, probe, tf_problem

# Image modes shardkit stores, per feature kind, for each mode a file may come in with.
# Palette masks keep their indices (TensorFlow's decode_png would expand a palette to RGB).
_IMAGE_MODE = {"1": "L", "L": "L", "LA": "RGBA", "P": "RGB", "RGB": "RGB", "RGBA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB"}
_MASK_MODE = {"1": "L", "L": "L", "P": "L", "RGB": "RGB", "RGBA": "RGBA", "I;16": "I;16"}
_CHANNEL_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
_MODE_CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4, "I;16": 1, "LA": 2, "1": 1, "P": 3, "CMYK": 4, "YCbCr": 3}
_FORMAT = {"jpeg": "JPEG", "png": "PNG"}


def stored_mode(info: ImageInfo, class_values: bool, what: str, channels: int | None, encoding: str) -> str:
    """The Pillow mode the stored image has after any conversion. ``class_values``: the pixels are
    class ids (a mask), so a palette keeps its indices; ``what`` names the feature's kind in errors."""
    if encoding == "raw":
        problem = tf_problem(info)  # the file's bytes go into the shard: tf.data must decode them
        if problem is not None:
            raise ImageProblem(f"{problem}, stored as it is (encoding: raw): set the feature's encoding: png or jpeg to re-encode it")
        return info.mode
    if channels is not None:
        return _CHANNEL_MODE[channels]
    table = _MASK_MODE if class_values else _IMAGE_MODE
    mode = table.get(info.mode)
    if mode is None:
        raise ImageProblem(f"unsupported image mode {info.mode!r} for a {what} feature")
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


def copy_encoding(info: ImageInfo) -> str:
    """How an augmented copy of a picture stored ``raw`` is encoded: in its source's own format
    where shardkit encodes it (a JPEG as JPEG, at the feature's ``quality``), else as lossless PNG
    (PNG, and BMP, GIF, TIFF, WebP sources)."""
    return "jpeg" if info.format == "JPEG" else "png"


def decode(data: bytes, mode: str, class_values: bool = False, info: ImageInfo | None = None, scale: int = 1) -> np.ndarray:
    """Decode to an HxW (one channel) or HxWxC array in ``mode``.

    ``class_values`` (masks) keeps a palette image's indices and a 1-bit image's 0/1 as they are,
    where a colour conversion would turn them into grey levels. ``scale`` (2, 4 or 8) asks a JPEG
    for 1/``scale`` of its size where ``fast_decode`` can (check the result's shape): what that
    costs in fidelity is ``pipeline.reduced_decode``'s business. ``info`` saves probing again.
    """
    if not class_values:
        # A picture stored raw keeps its file's own mode (P, LA, CMYK, ...); where its pixels are
        # worked on (an augmented copy) they are those a re-encode would keep. L, RGB, RGBA stay.
        mode = _IMAGE_MODE.get(mode, mode)
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
        raise ImageProblem(f"cannot decode image ({pillow_reason(exc)})") from None


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
