"""Image headers: format, mode and size from the first bytes (PNG and JPEG parsed directly,
anything else through Pillow), and ``ImageProblem``, the error every image step raises.

The codecs (``image_codec``, ``fast_decode``) and the probing they start from live apart, so
neither imports the other's module back.
"""

from __future__ import annotations

import io
import struct
from typing import NamedTuple

from PIL import Image, UnidentifiedImageError

# The file names taken for pictures: an ImageFolder tree's images, an index column of image paths.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".jfif", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")  # .jfif: JPEG, as browsers save it


class ImageProblem(ValueError):
    """A file that is missing, unreadable or not an image Pillow can handle."""


class ImageInfo(NamedTuple):  # not a frozen dataclass: made once a record, its init cost a tiny file's record 1 us
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
        raise ImageProblem(f"not an image Pillow can read ({pillow_reason(exc)})") from None


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


# What TensorFlow's decode_image (shardkit.tfdata's decoder of a file stored as it is) reads right,
# by Pillow's format -> the modes it reads (None: all). Tried on TensorFlow 2.21: TIFF, PPM, ICO, TGA
# and JPEG 2000 fail inside DecodeImage; a palette BMP decodes to its indices, a 1-bit BMP fails.
# WEBP needs a recent TensorFlow (older releases' decode_image does not know it).
_TF_READS: dict[str, tuple[str, ...] | None] = {
    "JPEG": None,
    "MPO": None,  # a camera's JPEG with a second picture after the first
    "PNG": None,
    "GIF": None,
    "WEBP": None,
    "BMP": ("RGB", "RGBA", "L"),
}


def tf_problem(info: ImageInfo) -> str | None:
    """Why TensorFlow's image decoders would not read this image right; None where they do."""
    if info.format not in _TF_READS:
        return f"a {info.format or 'non-image'} file, which TensorFlow's image decoders cannot read"
    modes = _TF_READS[info.format]
    if modes is not None and info.mode not in modes:
        return f"a {info.mode}-mode {info.format} file, which TensorFlow's image decoder does not read right"
    return None


def image_format(path: str) -> str | None:
    """Pillow's name for the format of the image file ``path``, from its header alone; None where
    it is no image Pillow knows. Raises ``OSError`` where the file cannot be read."""
    with open(path, "rb") as f:
        try:
            with Image.open(f) as im:
                found: str | None = im.format
                return found
        except (UnidentifiedImageError, ValueError, Image.DecompressionBombError):
            return None


def pillow_reason(exc: BaseException) -> str:
    """The first line of a Pillow error, as a message says it."""
    if isinstance(exc, UnidentifiedImageError):
        return "unknown or damaged image format"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def decoded_size(data: bytes) -> tuple[int, int]:
    """(width, height) of an image decoded whole: proof that every byte of it decodes (``verify --deep``)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            return im.width, im.height
    except Exception as exc:  # Pillow raises many types for damaged data
        raise ImageProblem(f"does not decode ({type(exc).__name__}: {exc})") from None
