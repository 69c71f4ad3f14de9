"""Synthetic datasets for the demo, the tests and the benchmark: real JPEG/PNG files on disk.

A segmentation set (CamVid-style: photo-like JPEG + PNG class-index mask, index files split
into ``train_*.txt`` / ``val.txt``) and an ImageFolder classification set. Images are noisy
gradients with drawn shapes, so JPEG sizes and decode costs are like real photos.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("background", "circle", "box")


def _scene(rng: np.random.Generator, width: int, height: int) -> tuple[Image.Image, Image.Image]:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(40, 200, size=3)
    tilt = rng.uniform(-0.15, 0.15, size=(2, 3))
    pixels = base + xx[..., None] * tilt[0] + yy[..., None] * tilt[1] + rng.normal(0, 12, size=(height, width, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    mask = Image.new("L", (width, height), 0)
    draw, mdraw = ImageDraw.Draw(image), ImageDraw.Draw(mask)
    for _ in range(int(rng.integers(2, 6))):
        cls = int(rng.integers(1, len(CLASSES)))
        x0, y0 = int(rng.integers(0, width - 20)), int(rng.integers(0, height - 20))
        x1 = min(width - 1, x0 + int(rng.integers(15, max(16, width // 3))))
        y1 = min(height - 1, y0 + int(rng.integers(15, max(16, height // 3))))
        color = tuple(int(c) for c in rng.integers(0, 256, size=3))
        if cls == 1:
            draw.ellipse((x0, y0, x1, y1), fill=color)
            mdraw.ellipse((x0, y0, x1, y1), fill=cls)
        else:
            draw.rectangle((x0, y0, x1, y1), fill=color)
            mdraw.rectangle((x0, y0, x1, y1), fill=cls)
    return image, mask


def make_segmentation(
    root: str | Path, train: int = 200, val: int = 50, width: int = 320, height: int = 240, seed: int = 0, train_files: int = 2
) -> Path:
    """Write ``images/``, ``masks/`` and index files ``train_0.txt``.. and ``val.txt`` under ``root``."""
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines: dict[str, list[str]] = {}
    for split, count in (("train", train), ("val", val)):
        for i in range(count):
            image, mask = _scene(rng, width, height)
            stem = f"{split}_{i:05d}"
            image.save(root / "images" / f"{stem}.jpg", quality=90)
            mask.save(root / "masks" / f"{stem}.png")
            part = f"train_{i % train_files}" if split == "train" else "val"
            lines.setdefault(part, []).append(f"images/{stem}.jpg masks/{stem}.png")
    for name, rows in lines.items():
        (root / f"{name}.txt").write_text("# image mask\n" + "\n".join(rows) + "\n")
    return root


def make_classification(root: str | Path, per_class: int = 20, width: int = 96, height: int = 96, seed: int = 0) -> Path:
    """Write an ImageFolder tree ``root/{train,val}/{class}/*.jpg``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    for split, count in (("train", per_class), ("val", max(1, per_class // 4))):
        for cls in ("cat", "dog", "fox"):
            folder = root / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                image, _ = _scene(rng, width, height)
                image.save(folder / f"{cls}_{i:04d}.jpg", quality=90)
    return root
