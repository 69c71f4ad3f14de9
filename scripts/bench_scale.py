#!/usr/bin/env python3
"""shardkit at scale: planning, memory and small-record throughput for millions of entries, one run.

    python scripts/bench_scale.py [--sizes 1000000,10000000] [--naive-up-to 1000000] [--workers 2]

Index files of N entries point at a few hundred small real JPEGs (~3 KB, from scikit-image's
photographs), with a class name per line. For each N, in child processes:

(a) plan:      `shardkit build` planning alone (check, key, spool, sort, write the plan files, with
               --workers processes on pieces of the index): seconds and the parent's peak RSS
(b) build:     the pass-through build (raw JPEG bytes + class + source_id), --workers W: time to the
               first task, total seconds, records/s, peak RSS of the parent and of the largest worker
(c) naive:     one plain Python process that reads each file, frames it with masked CRC32C and writes
               it (no Example, no shuffle, no checks), records/s; the ratio (b)/(c)
(d) resume:    the same command again on the finished build (nothing to do): seconds
(e) augment:   with --augment, an augmenting config (flip + brightness, 1 copy) on the first 100,000 entries

The output of (b) needs about 3.3 KB per entry on disk (33 GB at 10M); (c) is run only up to
--naive-up-to entries and its output is removed at once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
CLASSES = ("ant", "bee", "cat", "dog", "elk", "fox", "gnu", "hen")
IMAGES = 400


def make_images(folder: Path) -> list[str]:
    """A few hundred ~3 KB JPEG crops of real photographs (80x80, quality 90)."""
    from skimage import data as samples

    photos = [np.asarray(getattr(samples, name)()) for name in ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry")]
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = []
    for i in range(IMAGES):
        photo = photos[i % len(photos)]
        y, x = rng.integers(0, photo.shape[0] - 128), rng.integers(0, photo.shape[1] - 128)
        crop = Image.fromarray(photo[y : y + 128, x : x + 128]).resize((80, 80))
        name = f"img_{i:04d}.jpg"
        crop.save(folder / name, quality=90)
        names.append(name)
    return names


def make_index(path: Path, count: int, images: list[str]) -> None:
    """``images/img_NNNN.jpg class`` lines, sorted by class as `ls` or `find` would give them."""
    per_class = -(-count // len(CLASSES))
    with path.open("w") as f:
        written = 0
        for label in CLASSES:
            block = min(per_class, count - written)
            for start in range(0, block, 100_000):  # streamed: this process stays small, and so do the children it forks
                f.writelines(f"images/{images[(written + i) % len(images)]} {label}\n" for i in range(start, min(block, start + 100_000)))
            written += block


CONFIG = {
    "columns": ["image", "label"],
    "features": {"image": {"kind": "image", "column": "image", "encoding": "raw"}, "label": {"kind": "class_name", "column": "label"}},
}
AUGMENT = {
    "columns": ["image", "label"],
    "features": {"image": {"kind": "image", "column": "image", "encoding": "jpeg", "quality": 90}, "label": {"kind": "class_name"}},
    "augment": {
        "copies": 1,
        "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 0.5}, {"__class_fullname__": "RandomBrightnessContrast", "p": 0.8}],
    },
}

# Peak RSS from /proc (VmHWM): ru_maxrss keeps the high-water mark of the process that exec'd the child.
PEAK = """
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
"""

CHILD_PLAN = (
    PEAK
    + r"""
import json, sys, time, os
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.inputs.splits import rows_by_split, resolve_config
from shardkit.pipeline.plan.planner import make_plan
index, config, folder, processes = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
started = time.perf_counter()
splits, inputs = rows_by_split([index], None, None, ())
cfg = resolve_config(parse_config(config), splits).with_source_id()
plan = make_plan(splits, cfg, folder, seed=0, shuffle=True, records_per_shard=None, on_error="fail", processes=processes)
print(json.dumps({"seconds": time.perf_counter() - started, "rss_mb": peak_mb(),
                  "shards": sum(p.num_shards for p in plan.splits.values())}))
"""
)

CHILD_BUILD = (
    PEAK
    + r"""
import json, resource, sys, time
import shardkit
import shardkit.pipeline.builder as builder
from shardkit.pipeline.config import parse_config
index, config, out, workers = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
started = time.perf_counter()
first_task = []
execute = builder._execute
def timed(*args, **kwargs):
    first_task.append(time.perf_counter() - started)
    return execute(*args, **kwargs)
builder._execute = timed
result = shardkit.build([index], out, config=parse_config(config), workers=workers, progress=False)
print(json.dumps({"seconds": time.perf_counter() - started, "first_task": first_task[0] if first_task else None,
                  "records": result.records_built, "built": result.shards_built,
                  "parent_rss_mb": peak_mb(),
                  "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""
)

CHILD_NAIVE = r"""
import json, os, struct, sys, time
import crc32c
def masked(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
index, out = sys.argv[1], sys.argv[2]
folder = os.path.dirname(os.path.abspath(index))
started = time.perf_counter()
n = 0
with open(index) as lines, open(out, "wb") as f:
    for line in lines:
        path = line.split()[0]
        with open(os.path.join(folder, path), "rb") as image:
            data = image.read()
        length = struct.pack("<Q", len(data))
        f.write(length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data)))
        n += 1
print(json.dumps({"seconds": time.perf_counter() - started, "records": n}))
"""


def child(code: str, *args: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--naive-up-to", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--augment", action="store_true", help="also build 100,000 entries with an augmenting config")
    parser.add_argument("--skip-build-over", type=int, default=10**9, help="plan only (no build) above this many entries")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp dir, removed after)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-scale-"))
    images = make_images(work / "images")
    image_kb = os.path.getsize(work / "images" / images[0]) / 1e3
    print(f"# {os.cpu_count()} cores, {args.workers} workers, {IMAGES} JPEGs of ~{image_kb:.1f} KB")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        index = work / "train.txt"
        make_index(index, size, images)
        print(f"\n## {size:,} entries ({index.stat().st_size / 1e6:.0f} MB index)", flush=True)
        plan_dir = work / "plan"
        plan_dir.mkdir()
        plan = child(CHILD_PLAN, str(index), json.dumps(CONFIG), str(plan_dir), str(args.workers))
        shutil.rmtree(plan_dir)
        print(f"plan: {plan['seconds']:.1f} s, peak RSS {plan['rss_mb']:.0f} MB, {plan['shards']} shards", flush=True)
        row: dict[str, Any] = {"entries": size, "plan_s": plan["seconds"], "plan_rss_mb": plan["rss_mb"]}
        if size <= args.skip_build_over:
            out = work / "out"
            build = child(CHILD_BUILD, str(index), json.dumps(CONFIG), str(out), str(args.workers))
            rate = build["records"] / build["seconds"]
            print(
                f"build: {build['seconds']:.1f} s, first task at {build['first_task']:.1f} s, {rate:,.0f} records/s; "
                f"peak RSS parent {build['parent_rss_mb']:.0f} MB, largest worker {build['worker_rss_mb']:.0f} MB",
                flush=True,
            )
            resume = child(CHILD_BUILD, str(index), json.dumps(CONFIG), str(out), str(args.workers))
            print(f"no-op resume: {resume['seconds']:.1f} s (built {resume['built']} shards)", flush=True)
            shutil.rmtree(out)
            row.update(build_s=build["seconds"], rate=rate, first_task_s=build["first_task"], resume_s=resume["seconds"])
            row.update(parent_rss_mb=build["parent_rss_mb"], worker_rss_mb=build["worker_rss_mb"])
            if size <= args.naive_up_to:
                naive = child(CHILD_NAIVE, str(index), str(work / "naive.tfrecord"))
                os.remove(work / "naive.tfrecord")
                naive_rate = naive["records"] / naive["seconds"]
                print(f"naive loop: {naive['seconds']:.1f} s, {naive_rate:,.0f} records/s; shardkit / naive = {rate / naive_rate:.2f}x")
                row.update(naive_s=naive["seconds"], ratio=rate / naive_rate)
        rows.append(row)
    if args.augment:
        index = work / "train.txt"
        make_index(index, 100_000, images)
        out = work / "out-augment"
        build = child(CHILD_BUILD, str(index), json.dumps(AUGMENT), str(out), str(args.workers))
        print(
            f"\n## augmenting 100,000 entries: {build['seconds']:.1f} s, {build['records'] / build['seconds']:,.0f} records/s, "
            f"peak RSS parent {build['parent_rss_mb']:.0f} MB, largest worker {build['worker_rss_mb']:.0f} MB"
        )
        shutil.rmtree(out)
    print("\n" + json.dumps(rows))
    if not args.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
