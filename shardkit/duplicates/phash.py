"""A record's fingerprints: the 64-bit DCT perceptual hash of its decoded pixels, bit for bit
``imagehash.phash``'s, and an exact digest of bytes.

The perceptual hash is imagehash's (``phash(image, hash_size=8, highfreq_factor=4)``): the picture
converted to grayscale by Pillow's ``"L"`` conversion, resized to 32x32 with Pillow's LANCZOS,
a 2-D DCT-II (``scipy.fftpack.dct`` along each axis, as imagehash calls it), the top-left 8x8
coefficients, and a bit per coefficient: greater than their median. Pillow and scipy are called
exactly as imagehash calls them, so even a picture whose coefficients tie (a blank one, where the
rounding of the transform decides the bits) hashes as imagehash hashes it. The bits are read row
by row, the first the most significant: ``f"{value:016x}"`` is ``str(imagehash.phash(...))``, and
the Hamming distance between two values is imagehash's ``h1 - h2``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.fftpack
from numpy.typing import NDArray
from PIL import Image

HASH_BITS = 64
_SIDE = 8  # hash_size
_RESIZED = _SIDE * 4  # hash_size * highfreq_factor
DIGEST_BYTES = 16
_CHANNEL_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
# Set bits of every byte value: the popcount where NumPy has no ``bitwise_count`` (before 2.0).
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def phash(pixels: NDArray[np.uint8]) -> int:
    """The 64-bit perceptual hash of a decoded picture: a uint8 array (H, W), (H, W, 1), (H, W, 3)
    (RGB) or (H, W, 4) (RGBA, the alpha ignored as Pillow's ``"L"`` conversion ignores it).
    A ValueError for any other shape or type."""
    gray = _grayscale(pixels)
    small = np.asarray(gray.resize((_RESIZED, _RESIZED), Image.Resampling.LANCZOS))
    dct = scipy.fftpack.dct(scipy.fftpack.dct(small, axis=0), axis=1)
    low = dct[:_SIDE, :_SIDE]
    bits = np.packbits((low > np.median(low)).ravel())
    return int.from_bytes(bits.tobytes(), "big")


def _grayscale(pixels: NDArray[np.uint8]) -> Image.Image:
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8:
        raise ValueError(f"a perceptual hash takes a uint8 array, not {getattr(pixels, 'dtype', type(pixels).__name__)}")
    shape = pixels.shape
    channels = 1 if pixels.ndim == 2 else shape[2] if pixels.ndim == 3 else 0
    if channels not in _CHANNEL_MODES or 0 in shape:
        raise ValueError(f"a perceptual hash takes an array (H, W) or (H, W, 1|3|4) with pixels, not {shape}")
    plane = pixels.reshape(shape[:2]) if channels == 1 else pixels
    picture = Image.fromarray(np.ascontiguousarray(plane), _CHANNEL_MODES[channels])
    return picture if channels == 1 else picture.convert("L")


def phash_hex(value: int) -> str:
    """The hash as imagehash writes it: 16 hex digits."""
    return f"{value:016x}"


def digest(data: bytes) -> bytes:
    """The exact fingerprint of some bytes (an image file's, or a whole record's): BLAKE2b, 16 bytes."""
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


def distances(a: NDArray[np.uint64], b: NDArray[np.uint64] | np.uint64) -> NDArray[np.uint8]:
    """The Hamming distances between hashes, element by element (broadcast), as a popcount of their XOR."""
    xor = np.bitwise_xor(a, b)
    if hasattr(np, "bitwise_count"):
        counted: NDArray[np.uint8] = np.bitwise_count(xor)
        return counted
    as_bytes = np.ascontiguousarray(xor).view(np.uint8).reshape(*np.shape(xor), 8)
    summed: NDArray[np.uint8] = _BYTE_BITS[as_bytes].sum(axis=-1, dtype=np.uint8)
    return summed


def distance(a: int, b: int) -> int:
    """The Hamming distance between two hashes."""
    return (a ^ b).bit_count()
