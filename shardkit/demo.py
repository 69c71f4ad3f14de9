"""Synthetic datasets for the demo, the tests and the benchmark: real JPEG/PNG files on disk.

A segmentation set (CamVid-style: photo-like JPEG + PNG class-index mask, index files split
into ``train_*.txt`` / ``val.txt``), an ImageFolder classification set, and a COCO detection
set (the standard layout, with a polygon per object), and Parquet: an image-classification set
as the Hugging Face Hub stores one, and a table of measurements. Images are noisy gradients
with drawn shapes, so JPEG sizes and decode costs are like real photos.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("background", "circle", "box")


def _scene(rng: np.random.Generator, width: int, height: int, shapes: bool = True) -> tuple[Image.Image, Image.Image]:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(40, 200, size=3)
    tilt = rng.uniform(-0.15, 0.15, size=(2, 3))
    pixels = base + xx[..., None] * tilt[0] + yy[..., None] * tilt[1] + rng.normal(0, 12, size=(height, width, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    mask = Image.new("L", (width, height), 0)
    draw, mdraw = ImageDraw.Draw(image), ImageDraw.Draw(mask)
    for _ in range(int(rng.integers(2, 6)) if shapes else 0):
        cls = int(rng.integers(1, len(CLASSES)))
        # A shape starts 20 pixels from the far edges where there is room; in a small picture
        # (make_hub_export(size=16)), in its first half. Larger pictures draw as they always did.
        x0, y0 = int(rng.integers(0, _room(width))), int(rng.integers(0, _room(height)))
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


def _room(extent: int) -> int:
    return extent - 20 if extent > 20 else max(1, extent // 2)


def _sized(**sizes: int) -> None:
    bad = next((f"{name} is {value}" for name, value in sizes.items() if value < 1), None)
    if bad is not None:
        raise ValueError(f"{bad}: a demo picture is at least 1x1 pixels")


def make_segmentation(
    root: str | Path, train: int = 200, val: int = 50, width: int = 320, height: int = 240, seed: int = 0, train_files: int = 2
) -> Path:
    """Write ``images/``, ``masks/`` and index files ``train_0.txt``.. and ``val.txt`` under ``root``."""
    _sized(width=width, height=height)
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


DETECTION_CLASSES = {1: "circle", 3: "box"}  # COCO ids need not be contiguous


def _objects(rng: np.random.Generator, image: Image.Image) -> list[tuple[int, list[float]]]:
    """Draw 1-5 shapes on ``image``; returns each one's class id and polygon (COCO's flat x, y list)."""
    width, height = image.size
    draw = ImageDraw.Draw(image)
    shapes = []
    for _ in range(int(rng.integers(1, 6))):
        # At least a pixel wide and inside the picture (a 10-pixel or larger picture draws as it always did).
        w, h = int(rng.integers(max(1, width // 10), max(2, width // 3))), int(rng.integers(max(1, height // 10), max(2, height // 3)))
        x0, y0 = int(rng.integers(0, max(1, width - w))), int(rng.integers(0, max(1, height - h)))
        color = tuple(int(c) for c in rng.integers(0, 256, size=3))
        if rng.random() < 0.5:
            cx, cy = x0 + w / 2, y0 + h / 2
            polygon = [v for t in range(24) for v in (cx + w / 2 * math.cos(t * math.pi / 12), cy + h / 2 * math.sin(t * math.pi / 12))]
            draw.polygon(polygon, fill=color)
            shapes.append((1, [round(v, 2) for v in polygon]))
        else:
            draw.rectangle((x0, y0, x0 + w, y0 + h), fill=color)
            shapes.append((3, [x0, y0, x0 + w, y0, x0 + w, y0 + h, x0, y0 + h]))
    return shapes


def make_detection(root: str | Path, train: int = 160, val: int = 40, width: int = 320, height: int = 240, seed: int = 0) -> Path:
    """Write a COCO set under ``root``: ``annotations/instances_{train,val}2017.json`` beside
    ``train2017/`` and ``val2017/``, each image with 1-5 shapes annotated as polygons."""
    _sized(width=width, height=height)
    root = Path(root)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    next_id = 1
    for split, count in (("train2017", train), ("val2017", val)):
        (root / split).mkdir(exist_ok=True)
        images, annotations = [], []
        for i in range(count):
            image, _ = _scene(rng, width, height, shapes=False)  # every shape on it is an annotated object
            image_id = 1000 * (split == "val2017") + i + 1
            for category, polygon in _objects(rng, image):
                xs, ys = polygon[0::2], polygon[1::2]
                x, y, w, h = min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)
                area = 0.5 * abs(sum(xs[k] * ys[k - 1] - xs[k - 1] * ys[k] for k in range(len(xs))))
                box = [round(v, 2) for v in (x, y, w, h)]
                annotations.append(
                    {"id": next_id, "image_id": image_id, "category_id": category, "segmentation": [polygon], "area": round(area, 2),
                     "bbox": box, "iscrowd": 0}
                )  # fmt: skip
                next_id += 1
            name = f"{image_id:012d}.jpg"
            image.save(root / split / name, quality=90)
            images.append({"id": image_id, "file_name": name, "width": width, "height": height})
        categories = [{"id": i, "name": name, "supercategory": "shape"} for i, name in DETECTION_CLASSES.items()]
        document = {
            "info": {"description": "shardkit demo"},
            "licenses": [],
            "images": images,
            "annotations": annotations,
            "categories": categories,
        }
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(document))
    return root


def make_classification(root: str | Path, per_class: int = 20, width: int = 96, height: int = 96, seed: int = 0) -> Path:
    """Write an ImageFolder tree ``root/{train,val}/{class}/*.jpg``."""
    _sized(width=width, height=height)
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


def make_hub_export(root: str | Path, train: int = 60, test: int = 20, size: int = 64, seed: int = 0) -> Path:
    """Write an image-classification set as the Hugging Face Hub stores one: ``root/data/
    {train,test}-00000-of-00001.parquet``, an ``image`` struct of PNG ``bytes`` and ``path`` and a
    ``label`` ``ClassLabel``, their types in the schema's ``huggingface`` metadata as ``datasets``
    writes it."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    _sized(size=size)
    root = Path(root)
    (root / "data").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    features = {"image": {"_type": "Image"}, "label": {"names": list(("cat", "dog", "fox")), "_type": "ClassLabel"}}
    schema = pa.schema(
        [("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("label", pa.int64())],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )
    for split, count in (("train", train), ("test", test)):
        images, labels = [], []
        for i in range(count):
            buffer = io.BytesIO()
            _scene(rng, size, size)[0].save(buffer, format="PNG")
            images.append({"bytes": buffer.getvalue(), "path": f"{split}_{i:05d}.png"})
            labels.append(int(rng.integers(0, 3)))
        pq.write_table(pa.table({"image": images, "label": labels}, schema=schema), root / "data" / f"{split}-00000-of-00001.parquet")
    return root


def make_table(root: str | Path, rows: int = 1000, seed: int = 0) -> Path:
    """Write ``root/train.parquet`` and ``root/test.parquet``: rows of eight float64 measurements
    ``f0``..``f7``, an int64 ``label`` (0-9), a ``name`` and a list of ``tags``, a few labels null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, count in (("train", rows), ("test", max(1, rows // 4))):
        columns: dict[str, Any] = {f"f{i}": rng.normal(size=count) for i in range(8)}
        labels = rng.integers(0, 10, count)
        columns["label"] = pa.array(labels, mask=rng.random(count) < 0.01)
        columns["name"] = [f"item-{i:07d}" for i in range(count)]
        columns["tags"] = [[f"t{j}" for j in range(int(k))] for k in rng.integers(0, 4, count)]
        pq.write_table(pa.table(columns), root / f"{split}.parquet", row_group_size=max(1, count // 4))
    return root


def make_photos(
    root: str | Path, count: int, width: int = 4032, height: int = 3024, noise: float = 6.0, quality: int = 90, seed: int = 0
) -> Path:
    """Write ``count`` camera-sized photos and masks, and ``train.txt``, under ``root``.

    scikit-image's bundled photographs (``pip install scikit-image``), enlarged to ``width`` x
    ``height`` (every other one upright), with sensor-like noise so they carry real
    high-frequency content (a 12-megapixel one is 2.4-2.8 MB at q90, like a phone's), and a
    5-class PNG mask cut from each photo's smooth brightness.
    """
    sample: Any = importlib.import_module("skimage.data")  # untyped
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    grey = [sample.camera(), sample.brick(), sample.grass(), sample.gravel()]
    photos = [sample.astronaut(), sample.chelsea(), sample.coffee(), sample.rocket(), *(np.stack([g] * 3, -1) for g in grey)]
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        size = (width, height) if i % 2 == 0 else (height, width)
        clean = Image.fromarray(photos[i % len(photos)]).resize(size, Image.Resampling.BICUBIC)
        pixels = np.asarray(clean, dtype=np.float32) + rng.normal(0, noise, (size[1], size[0], 3)).astype(np.float32)
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(root / "images" / f"{i:05d}.jpg", quality=quality)
        Image.fromarray((np.asarray(clean.convert("L")) // 52).astype(np.uint8)).save(root / "masks" / f"{i:05d}.png")
        rows.append(f"images/{i:05d}.jpg masks/{i:05d}.png")
    (root / "train.txt").write_text("\n".join(rows) + "\n")
    return root
