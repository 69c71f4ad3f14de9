"""The perceptual hash is imagehash's, bit for bit, on photos, their changed copies and degenerate pictures."""

from __future__ import annotations

import hashlib

import imagehash
import numpy as np
import pytest
from PIL import Image

from shardkit.duplicates.phash import digest, distance, distances, phash, phash_hex
from tests.duplicates.planted import CHANGES, Picture, bases


def imagehash_of(picture: Picture) -> imagehash.ImageHash:
    """imagehash on the PIL image a user would open for these pixels."""
    plane = picture[..., 0] if picture.ndim == 3 and picture.shape[2] == 1 else picture
    return imagehash.phash(Image.fromarray(plane))


def degenerate() -> list[Picture]:
    """Pictures whose DCT coefficients tie (the transform's rounding decides their bits), and tiny ones."""
    rng = np.random.default_rng(7)
    found: list[Picture] = [np.full((40, 30), v, np.uint8) for v in (0, 1, 128, 255)]
    found += [np.full((16, 16, 3), (10, 200, 30), np.uint8), np.zeros((1, 1), np.uint8), np.full((3, 5, 4), 99, np.uint8)]
    halves = np.zeros((64, 64), np.uint8)
    halves[:, 32:] = 255
    found += [halves, halves.T.copy(), np.kron(np.indices((8, 8)).sum(0) % 2, np.ones((8, 8))).astype(np.uint8) * 255]
    found += [rng.integers(0, 256, (h, w, c), dtype=np.uint8) for h, w, c in ((7, 9, 3), (33, 31, 1), (100, 80, 4))]
    return found


def test_the_hash_is_imagehash_phash_bit_for_bit() -> None:
    pictures = [p for base in bases(20).values() for p in (base, *(change(base) for change in CHANGES.values()))]
    pictures += degenerate()
    checked = 0
    for picture in pictures:
        ours, theirs = phash(picture), imagehash_of(picture)
        assert phash_hex(ours) == str(theirs), picture.shape
        checked += 1
    assert checked > 200
    # Distances are imagehash's ``h1 - h2``, one pair at a time and a column at once.
    values = [phash(p) for p in pictures[:40]]
    theirs_all = [imagehash_of(p) for p in pictures[:40]]
    column = distances(np.array(values, dtype=np.uint64), np.uint64(values[0]))
    for value, theirs, apart in zip(values, theirs_all, column, strict=True):
        assert distance(value, values[0]) == theirs - theirs_all[0] == apart


def test_a_grey_picture_hashes_alike_in_every_shape_and_alpha_is_ignored() -> None:
    picture = bases(0)["camera"]
    assert phash(picture) == phash(picture[..., None]) == phash(np.asfortranarray(picture))
    rgb = bases(0)["astronaut"]
    rgba = np.dstack([rgb, np.random.default_rng(1).integers(0, 256, rgb.shape[:2], dtype=np.uint8)])
    assert phash(rgba) == phash(rgb)
    assert phash(rgb[:, ::-1]) == int(str(imagehash.phash(Image.fromarray(np.ascontiguousarray(rgb[:, ::-1])))), 16)


NOT_PICTURES = {
    "float": np.zeros((8, 8), np.float32),
    "uint16": np.zeros((8, 8), np.uint16),
    "two-channels": np.zeros((8, 8, 2), np.uint8),
    "empty": np.zeros((0, 8), np.uint8),
    "flat": np.zeros(8, np.uint8),
}


@pytest.mark.parametrize("bad", NOT_PICTURES.values(), ids=NOT_PICTURES.keys())
def test_what_is_not_a_picture_is_a_value_error(bad: Picture) -> None:
    with pytest.raises(ValueError, match="perceptual hash takes"):
        phash(bad)


def test_the_digest_is_blake2b_of_16_bytes() -> None:
    assert digest(b"abc") == hashlib.blake2b(b"abc", digest_size=16).digest()
    assert len(digest(b"")) == 16 and digest(b"abc") != digest(b"abd")
