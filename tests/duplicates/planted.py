"""A test set with planted duplicates: distinct pictures that look like photos, and copies of some
of them changed the ways copies of a photo change on their way into a dataset.

The bases are scikit-image's bundled photos (each a different scene: ``cat`` is ``chelsea``, so
only one of them) and synthetic pictures: smooth random fields, and random shapes on gradients.
Every base has four planted copies, one of each change: re-encoded as JPEG q70, resized to 90 %, brightness-shifted, cropped
by 2 % (1 % off each side), each decoded back to the pixels a build would hash.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import skimage.data
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFilter

Picture = NDArray[np.uint8]

PHOTOS = (
    "astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "text", "clock",
    "hubble_deep_field", "immunohistochemistry", "colorwheel", "retina", "grass", "gravel", "brick", "cell", "logo",
)  # fmt: skip


def photos() -> dict[str, Picture]:
    """scikit-image's bundled photos as uint8 (H, W) or (H, W, 3|4), and the left view of its stereo pair."""
    found = {name: np.ascontiguousarray(getattr(skimage.data, name)()) for name in PHOTOS}
    found["motorcycle"] = np.ascontiguousarray(skimage.data.stereo_motorcycle()[0])
    return found


def smooth_field(seed: int, size: tuple[int, int] = (240, 320)) -> Picture:
    """Random noise blurred into blobs, coloured: a picture of nothing much, as photos often are."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (size[0] // 16 + 1, size[1] // 16 + 1, 3), dtype=np.uint8)
    field = Image.fromarray(coarse).resize(size[::-1], Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(3))
    grain = rng.normal(0, 6, (*size, 3))
    return np.clip(np.asarray(field, dtype=np.float64) + grain, 0, 255).astype(np.uint8)


def shapes(seed: int, size: tuple[int, int] = (240, 320)) -> Picture:
    """Random ellipses and rectangles on a gradient."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, size[1])[None, :, None] * rng.integers(0, 256, 3) + rng.integers(0, 128, 3)
    back = np.broadcast_to(np.clip(ramp, 0, 255), (*size, 3)).astype(np.uint8)
    picture = Image.fromarray(np.ascontiguousarray(back))
    draw = ImageDraw.Draw(picture)
    for _ in range(int(rng.integers(4, 9))):
        y0, x0 = int(rng.integers(0, size[0])), int(rng.integers(0, size[1]))
        box = (x0, y0, x0 + int(rng.integers(20, 140)), y0 + int(rng.integers(20, 140)))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    return np.asarray(picture)


def bases(synthetic: int = 40) -> dict[str, Picture]:
    """The distinct pictures: every photo, then ``synthetic`` fields and shapes, half each."""
    found = photos()
    for seed in range(synthetic):
        found[f"field-{seed}" if seed % 2 else f"shapes-{seed}"] = smooth_field(seed) if seed % 2 else shapes(seed)
    return found


def jpeg_q70(picture: Picture) -> Picture:
    image = Image.fromarray(picture)
    if image.mode == "RGBA":
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=70)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())))


def resized_90(picture: Picture) -> Picture:
    height, width = picture.shape[:2]
    return np.asarray(Image.fromarray(picture).resize((round(width * 0.9), round(height * 0.9)), Image.Resampling.BILINEAR))


def brighter(picture: Picture) -> Picture:
    return np.clip(picture.astype(np.int16) + 20, 0, 255).astype(np.uint8)


def cropped_2(picture: Picture) -> Picture:
    height, width = picture.shape[:2]
    dy, dx = max(1, round(height * 0.01)), max(1, round(width * 0.01))
    return np.ascontiguousarray(picture[dy : height - dy, dx : width - dx])


CHANGES: dict[str, Callable[[Picture], Picture]] = {
    "jpeg-q70": jpeg_q70,
    "resized-90": resized_90,
    "brighter": brighter,
    "cropped-2": cropped_2,
}


@dataclass(frozen=True)
class Record:
    """One record of the planted set: its picture, split, source id, and the base it was made from."""

    picture: Picture
    split: str
    source_id: str
    base: str


def planted_records(synthetic: int = 40, seed: int = 0) -> list[Record]:
    """Every base once, in a split drawn at random (train 70 %, val 15 %, test 15 %), and each change
    of it once, each copy in a split of its own draw: twins across and within splits, in random order."""
    rng = np.random.default_rng(seed)
    draw = lambda: str(rng.choice(["train", "val", "test"], p=[0.7, 0.15, 0.15]))  # noqa: E731
    records = []
    for name, picture in bases(synthetic).items():
        records.append(Record(picture, draw(), name, name))
        records.extend(Record(change(picture), draw(), f"{name}+{what}", name) for what, change in CHANGES.items())
    order = rng.permutation(len(records))
    return [records[i] for i in order]
