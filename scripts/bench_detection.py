#!/usr/bin/env python3
"""COCO with instance masks into TFRecords: shardkit against TensorFlow Model Garden's converter, same data, one run.

    python scripts/bench_detection.py [--images 2000] [--rounds 3] [--keep DIR]

A COCO set in the standard layout (annotations/instances_train2017.json beside train2017/):
photo-like 640x480 JPEGs (smooth colour fields, the objects painted on, sensor-like noise; q90,
50-100 kB each) with 1-5 objects each, polygon segmentations (one in ten in two parts, one in
fifty a crowd as an uncompressed RLE), every box inside its image. Each round times, as whole
processes started the way a user starts them, in alternating order:

(a) Model Garden: `create_coco_tf_record.py --include_masks` (tf-models-official, run through
    tests/model_garden.py, which imports it without its package __init__s), its default process
    count (a Pool of os.cpu_count()), --num_shards as many as shardkit writes
(b) shardkit:     `shardkit build ANN -c configs/coco-instance-masks.yaml -o OUT`, default workers

Printed: each round's wall times, then per contender the median wall time, records/s, CPU
seconds of all its processes and the bytes of its shards; and shardkit's wall time as a
fraction of Model Garden's (target: <= 0.5x). Both write the images as they are, boxes, classes
and one PNG mask per object; tests/features/test_model_garden.py checks they agree. Needs Model
Garden: pip install --no-deps tf-models-official==2.20.0 (scripts/test.sh does).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "coco-instance-masks.yaml"
SPLIT = "train2017"
WIDTH, HEIGHT = 640, 480
CATEGORIES = [
    {"id": i, "name": name, "supercategory": "thing"}
    for i, name in ((1, "person"), (2, "bicycle"), (3, "car"), (4, "motorcycle"), (6, "bus"), (8, "truck"), (9, "boat"),
                    (16, "bird"), (18, "dog"), (44, "bottle"))
]  # fmt: skip


def model_garden_runner() -> Path:
    """tests/model_garden.py of the checkout shardkit runs from: Model Garden's converter command line."""
    import shardkit

    return Path(shardkit.__file__).resolve().parent.parent / "tests" / "model_garden.py"


# ----------------------------------------------------------------------------- data
def _field(rng: np.random.Generator) -> np.ndarray:
    """A smooth colour field: random colours at three scales, enlarged bicubically and summed."""
    field = np.full((HEIGHT, WIDTH, 3), 128.0, dtype=np.float32)
    for across, amplitude in ((4, 90.0), (16, 30.0), (80, 12.0)):
        small = rng.normal(0.0, amplitude, (max(2, across * HEIGHT // WIDTH), across, 3)).astype(np.float32)
        channels = [Image.fromarray(small[..., c]).resize((WIDTH, HEIGHT), Image.Resampling.BICUBIC) for c in range(3)]
        field += np.stack([np.asarray(channel) for channel in channels], -1)
    return field


def _polygon(rng: np.random.Generator, cx: float, cy: float, radius: float) -> list[float]:
    """A star-shaped polygon around (cx, cy), kept inside the image, COCO's 2 decimals."""
    corners = int(rng.integers(8, 25))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    radii = radius * rng.uniform(0.55, 1.0, corners)
    xs = np.clip(cx + radii * np.cos(angles), 0, WIDTH - 1)
    ys = np.clip(cy + radii * np.sin(angles), 0, HEIGHT - 1)
    return [round(float(v), 2) for xy in zip(xs, ys, strict=True) for v in xy]


def _polygon_area(points: list[float]) -> float:
    xs, ys = np.array(points[0::2]), np.array(points[1::2])
    return float(abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1))) / 2)


def _uncompressed_rle(mask: np.ndarray) -> dict[str, Any]:
    """A 0/1 mask as COCO's uncompressed RLE (the crowds' form): column-major runs, zeros first."""
    flat = mask.flatten(order="F")
    changes = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], changes, [flat.size]]))
    counts = ([0] if flat[0] else []) + runs.tolist()
    return {"counts": counts, "size": [int(mask.shape[0]), int(mask.shape[1])]}


def _make_image(root: str, i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rng = np.random.default_rng(i)
    canvas = Image.fromarray(np.clip(_field(rng), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    annotations = []
    for _ in range(int(rng.integers(1, 6))):
        radius = float(rng.uniform(15, 160))
        cx, cy = float(rng.uniform(0, WIDTH)), float(rng.uniform(0, HEIGHT))
        parts = [_polygon(rng, cx, cy, radius)]
        if rng.random() < 0.1:  # occluded: a second part beside the first
            parts.append(_polygon(rng, cx + radius * 1.2, cy, radius * 0.5))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        for part in parts:
            draw.polygon(part, fill=colour)
        xs = [v for part in parts for v in part[0::2]]
        ys = [v for part in parts for v in part[1::2]]
        x, y = min(xs), min(ys)
        annotation: dict[str, Any] = {
            "segmentation": parts,
            "area": round(sum(_polygon_area(part) for part in parts), 2),
            "iscrowd": 0,
            "bbox": [x, y, round(max(xs) - x, 2), round(max(ys) - y, 2)],
            "category_id": CATEGORIES[int(rng.integers(0, len(CATEGORIES)))]["id"],
        }
        if rng.random() < 0.02:  # a crowd: its pixels as an uncompressed RLE, as COCO writes crowds
            mask = Image.new("L", (WIDTH, HEIGHT))
            for part in parts:
                ImageDraw.Draw(mask).polygon(part, fill=1)
            annotation["segmentation"] = _uncompressed_rle(np.asarray(mask))
            annotation["iscrowd"] = 1
        annotations.append(annotation)
    pixels = np.asarray(canvas, dtype=np.float32) + rng.normal(0.0, rng.uniform(2.5, 6.0), (HEIGHT, WIDTH, 3)).astype(np.float32)
    name = f"{i:012d}.jpg"
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(os.path.join(root, SPLIT, name), quality=90)
    image = {"id": i + 1, "file_name": name, "width": WIDTH, "height": HEIGHT, "license": 1, "coco_url": "", "date_captured": ""}
    return image, annotations


def make_coco(root: Path, count: int) -> Path:
    """The COCO set under ``root`` (made once per count; a later run with the same count reuses it)."""
    annotations_file = root / "annotations" / f"instances_{SPLIT}.json"
    marker = root / f".complete-{count}"
    if marker.exists():
        return annotations_file
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / SPLIT).mkdir(exist_ok=True)
    with get_context("fork").Pool() as pool:
        made = pool.starmap(_make_image, [(str(root), i) for i in range(count)], chunksize=16)
    images, annotations = [], []
    for image, objects in made:
        images.append(image)
        for obj in objects:
            annotations.append({**obj, "image_id": image["id"], "id": len(annotations) + 1})
    document = {"info": {"description": "bench_detection"}, "licenses": [{"id": 1, "name": "-", "url": ""}],
                "images": images, "annotations": annotations, "categories": CATEGORIES}  # fmt: skip
    annotations_file.write_text(json.dumps(document))
    marker.write_text("ok")
    return annotations_file


# ----------------------------------------------------------------------------- runs
def timed(name: str, command: list[str], log: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, every process it started) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with log.open("ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{name} failed (exit {done.returncode}): see {log}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def shard_totals(folder: Path) -> tuple[int, int, int]:
    """Records, bytes and files of the TFRecord shards in ``folder``, by walking their framing."""
    import shardkit

    found = shardkit.count_records([str(p) for p in sorted(folder.glob("*.tfrecord"))])
    return sum(f["records"] for f in found), sum(f["bytes"] for f in found), len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="each contender runs this many times, alternating; medians are printed")
    parser.add_argument("--keep", type=Path, help="work in this folder and leave the data and outputs there (the data is reused)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="shardkit-bench-detection-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        load = os.getloadavg()
        annotations = make_coco(work / "coco", args.images)
        document = json.loads(annotations.read_text())
        objects = document["annotations"]
        jpeg_kb = statistics.mean(p.stat().st_size for p in (work / "coco" / SPLIT).glob("*.jpg")) / 1e3
        two_parts = sum(1 for a in objects if not a["iscrowd"] and len(a["segmentation"]) > 1)
        crowds = sum(1 for a in objects if a["iscrowd"])
        print(f"COCO: {args.images} images {WIDTH}x{HEIGHT} JPEG q90 (mean {jpeg_kb:.1f} kB), {len(objects)} objects "
              f"({two_parts} polygons in two parts, {crowds} crowds as RLE); {os.cpu_count()} cores", flush=True)  # fmt: skip
        print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)

        outputs = {"mg": work / "out-model-garden", "sk": work / "out-shardkit"}
        log = work / "log.txt"
        shardkit_command = [sys.executable, "-m", "shardkit.cli", "build", str(annotations), "-c", str(CONFIG), "-o", str(outputs["sk"])]

        def model_garden_command(shards: int) -> list[str]:
            return [sys.executable, str(model_garden_runner()), f"--image_dir={work / 'coco' / SPLIT}",
                    f"--object_annotations_file={annotations}", f"--output_file_prefix={outputs['mg'] / 'train'}",
                    f"--num_shards={shards}", "--include_masks"]  # fmt: skip

        names = {"mg": "(a) Model Garden create_coco_tf_record --include_masks", "sk": "(b) shardkit build, coco-instance-masks.yaml"}
        walls: dict[str, list[float]] = {"mg": [], "sk": []}
        cpus: dict[str, list[float]] = {"mg": [], "sk": []}
        shards = 0
        for round_ in range(args.rounds):
            order = ("sk", "mg") if round_ % 2 == 0 else ("mg", "sk")  # shardkit first in round 1: Model Garden gets its shard count
            for who in order:
                shutil.rmtree(outputs[who], ignore_errors=True)
                wall, cpu = timed(names[who], shardkit_command if who == "sk" else model_garden_command(shards), log)
                walls[who].append(wall)
                cpus[who].append(cpu)
                if who == "sk":
                    shards = shard_totals(outputs["sk"])[2]
            print(f"round {round_ + 1}: shardkit {walls['sk'][-1]:6.2f} s   Model Garden {walls['mg'][-1]:6.2f} s", flush=True)

        print(f"\n{'':56} {'wall s':>8} {'records/s':>10} {'CPU s':>8} {'shards MB':>10} {'files':>6}")
        for who in ("mg", "sk"):
            records, size, files = shard_totals(outputs[who])
            if records != args.images:
                sys.exit(f"{names[who]} wrote {records} records, not {args.images}")
            wall = statistics.median(walls[who])
            print(f"{names[who]:56} {wall:8.2f} {records / wall:10.1f} {statistics.median(cpus[who]):8.2f} {size / 1e6:10.1f} {files:6d}")
        ratio = statistics.median(walls["sk"]) / statistics.median(walls["mg"])
        print(f"\nshardkit's wall time / Model Garden's: {ratio:.2f}x (target <= 0.5x), median of {args.rounds}")
        load = os.getloadavg()
        print(f"load average after:  {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
