#!/usr/bin/env python3
"""Building a train2017-sized COCO file: peak memory of every process, against `json.load`.

    python scripts/bench_coco_memory.py [--images 118287] [--annotations 860001] [--workers 2] [--work DIR] [--keep]

Writes a COCO file with train2017's counts (118,287 images, 860,001 annotations with polygons of
about 25 points, about 1 % crowds as uncompressed RLE, the annotations interleaved across images:
about 450 MB, as the real one) in the standard layout, and its images: one small real JPEG per
distinct size (COCO's mix: mostly 640 on the long side), hard-linked under every image's name, so
each image has the size its annotation states. Then, each in a child process:

(a) build:     `shardkit build FILE -o OUT -w W` (boxes only: no config, the images passed
               through): wall time and the peak RSS (VmHWM) of the parent and of the largest of
               the processes it starts, polled from /proc over the whole process tree
(b) json.load: `json.load` of the same file, as a naive reader starts: seconds and peak RSS

and the ratios. The data goes in a new folder under --work (default: the temp dir), removed after;
with --keep, in WORK/bench-coco, kept and reused by the next run with --keep.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from process_tree import measured

# COCO's category ids (1..90 with gaps) and names.
NAMES = [
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light", "fire hydrant",
    "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe",
    "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat",
    "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl",
    "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone", "microwave",
    "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
]  # fmt: skip
IDS = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]
# The most common sizes of train2017 and about how often each comes; the rest are 640 on one side.
COMMON = {(640, 480): 0.30, (640, 427): 0.17, (480, 640): 0.07, (427, 640): 0.04, (640, 426): 0.05, (640, 428): 0.03, (500, 375): 0.02}


def sizes_for(count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    common = list(COMMON)
    weights = np.array([*COMMON.values(), 1 - sum(COMMON.values())])
    picks = rng.choice(len(weights), size=count, p=weights)
    other = rng.integers(240, 640, size=count)
    portrait = rng.random(count) < 0.25
    return [
        common[p] if p < len(common) else ((int(o), 640) if q else (640, int(o)))
        for p, o, q in zip(picks.tolist(), other.tolist(), portrait.tolist(), strict=True)
    ]


def jpeg(width: int, height: int, quality: int) -> bytes:
    """A smooth picture (a few KB): the size is what matters, not the content."""
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], axis=-1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def polygon(rng: np.random.Generator, x: float, y: float, w: float, h: float) -> str:
    """About 25 points (at least 3) on an ellipse in the box, two decimals, as COCO writes them."""
    n = max(3, int(rng.poisson(25)))
    t = np.sort(rng.random(n)) * 2 * np.pi
    r = 0.7 + 0.3 * rng.random(n)
    xs = x + w / 2 * (1 + r * np.cos(t))
    ys = y + h / 2 * (1 + r * np.sin(t))
    return ",".join(f"{v:.2f}" for v in np.stack([xs, ys], axis=1).ravel().tolist())


def crowd_rle(rng: np.random.Generator, width: int, height: int) -> str:
    """An uncompressed RLE of a few hundred runs over the image, as COCO's crowds have."""
    runs = rng.integers(1, 2 * height, size=int(rng.integers(100, 400)))
    total = width * height
    runs = runs[np.cumsum(runs) < total]
    counts = [*runs.tolist(), total - int(runs.sum())]
    return '{"counts":[' + ",".join(map(str, counts)) + f'],"size":[{height},{width}]}}'


def write_dataset(root: Path, images: int, annotations: int, quality: int, seed: int = 0) -> Path:
    """The COCO set under ``root`` (``annotations/instances_train2017.json`` beside ``train2017/``); returns the file."""
    rng = np.random.default_rng(seed)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    folder, sizes_folder = root / "train2017", root / "sizes"
    folder.mkdir(exist_ok=True)
    sizes_folder.mkdir(exist_ok=True)
    sizes = sizes_for(images, rng)
    for width, height in set(sizes):
        (sizes_folder / f"{width}x{height}.jpg").write_bytes(jpeg(width, height, quality))
    ids = rng.choice(600_000, size=images, replace=False) + 1  # COCO's ids are sparse, its images not in id order
    for image_id, (width, height) in zip(ids.tolist(), sizes, strict=True):
        os.link(sizes_folder / f"{width}x{height}.jpg", folder / f"{image_id:012d}.jpg")
    # About 1 % of images have none, the rest a geometric count around the mean; then exactly
    # ``annotations``: the shortfall spread over images that have some, or a random excess left out.
    per_image = rng.geometric(1 / (annotations / images), size=images) * (rng.random(images) > 0.01)
    owners = np.repeat(np.arange(images), per_image)
    if len(owners) < annotations:
        owners = np.concatenate([owners, rng.choice(np.flatnonzero(per_image), annotations - len(owners))])
    else:
        owners = rng.choice(owners, annotations, replace=False)
    order = rng.permutation(annotations)  # written interleaved across images, as real files are
    path = root / "annotations" / "instances_train2017.json"
    with path.open("w") as f:
        f.write('{"info":{"description":"bench_coco_memory","version":"1.0","year":2017},')
        f.write('"licenses":[{"url":"","id":1,"name":"bench"}],"images":[')
        entries = (
            {"license": 1, "file_name": f"{i:012d}.jpg", "coco_url": "", "height": h, "width": w, "date_captured": "", "id": i}
            for i, (w, h) in zip(ids.tolist(), sizes, strict=True)
        )
        f.write(",".join(map(json.dumps, entries)))
        f.write('],"annotations":[')
        for n, a in enumerate(order.tolist()):
            owner = int(owners[a])
            width, height = sizes[owner]
            w, h = float(rng.uniform(4, width / 2)), float(rng.uniform(4, height / 2))
            x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
            crowd = rng.random() < 0.01
            segmentation = crowd_rle(rng, width, height) if crowd else f"[[{polygon(rng, x, y, w, h)}]]"
            f.write(
                ("," if n else "")
                + f'{{"segmentation":{segmentation},"area":{w * h * 0.7:.4f},"iscrowd":{int(crowd)},"image_id":{ids[owner]},'
                f'"bbox":[{x:.2f},{y:.2f},{w:.2f},{h:.2f}],"category_id":{IDS[int(rng.integers(len(IDS)))]},"id":{a + 1}}}'
            )
        f.write('],"categories":[')
        f.write(",".join(json.dumps({"supercategory": "thing", "id": i, "name": n}) for i, n in zip(IDS, NAMES, strict=True)))
        f.write("]}")
    return path


JSON_LOAD = r"""
import json, sys, time
started = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    data = json.load(f)
seconds = time.perf_counter() - started
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rss_mb": peak / 1024, "annotations": len(data["annotations"])}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=118_287)
    parser.add_argument("--annotations", type=int, default=860_001)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quality", type=int, default=75, help="JPEG quality of the images (smaller files: more images a shard)")
    parser.add_argument("--work", default=None, help="the folder the data and the output go under (default: the temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data in WORK/bench-coco (and reuse it when it is there)")
    args = parser.parse_args()
    if args.keep:
        work = Path(args.work or tempfile.gettempdir()) / "bench-coco"
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="bench-coco-", dir=args.work))
    try:
        data = work / "coco"
        path = data / "annotations" / "instances_train2017.json"
        if not (args.keep and path.exists()):
            shutil.rmtree(data, ignore_errors=True)
            started = time.perf_counter()
            path = write_dataset(data, args.images, args.annotations, args.quality)
            seconds = time.perf_counter() - started
            print(f"# wrote {path} ({path.stat().st_size / 1e6:.0f} MB) and its images in {seconds:.0f} s", flush=True)
        distinct = len(list((data / "sizes").iterdir()))
        print(f"# {os.cpu_count()} cores; {args.images:,} images ({distinct} distinct sizes), {args.annotations:,} annotations, "
              f"{path.stat().st_size / 1e6:.0f} MB", flush=True)  # fmt: skip
        out = work / "out"
        shutil.rmtree(out, ignore_errors=True)
        build = measured([sys.executable, "-m", "shardkit.cli", "build", str(path), "-o", str(out), "-w", str(args.workers), "-q"])
        shards = len(list(out.glob("*.tfrecord")))
        shutil.rmtree(out)
        print(
            f"build -w {args.workers}: {build['seconds']:.1f} s, {shards} shards; peak RSS parent {build['parent_mb']:.0f} MB, "
            f"largest of its {len(build['children_mb'])} processes {build['child_mb']:.0f} MB",
            flush=True,
        )
        done = subprocess.run([sys.executable, "-c", JSON_LOAD, str(path)], capture_output=True, text=True, check=True)
        naive = json.loads(done.stdout)
        print(f"json.load: {naive['seconds']:.1f} s, peak RSS {naive['rss_mb']:.0f} MB")
        largest = max(build["parent_mb"], build["child_mb"])
        print(
            f"peak RSS, largest build process / json.load: {largest / naive['rss_mb']:.3f}x; "
            f"the whole build's wall time is {build['seconds'] / naive['seconds']:.1f}x one json.load's"
        )
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in build.items() if k != "output"} | {"json_load": naive}))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
