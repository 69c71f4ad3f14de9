#!/usr/bin/env python3
"""`shardkit preview`'s speed: what the sheet costs beyond making the records it shows, in one run.

    python scripts/bench_preview.py [--entries 6] [--copies 4] [--size 320x240] [--repeat 3]

A demo segmentation set (JPEG + PNG mask) with an augmenting config whose pipeline starts with
SmallestMaxSize(512). In one process, after a first call that pays albumentations' start-up:

(a) records:  the preview's records alone (inputs read and checked, the chosen entries' originals
              and copies made by the build's RecordMaker, decoded as thumbnails): the baseline
(b) sheet:    the whole `augmentation_sheet`, drawing included; the ratio (b)/(a)
(c) after:    a sheet of 16 records sampled from a build of the same set
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import shardkit
from shardkit import demo
from shardkit.view.augmentations import augmentation_records, augmentation_sheet
from shardkit.view.records import record_sheet

CONFIG = """\
features:
  image: {kind: image, column: 0, encoding: jpeg, quality: 90}
  mask: {kind: mask, column: 1}
augment:
  copies: 4
  keep_original: true
  pipeline:
    - {__class_fullname__: SmallestMaxSize, max_size: 512, p: 1.0}
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.9}
"""


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=6)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--size", default="320x240", help="WIDTHxHEIGHT of the demo photos (4032x3024: 12 megapixels)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="shardkit-bench-preview-"))
    try:
        data = demo.make_segmentation(work / "data", train=max(12, args.entries), val=4, width=width, height=height)
        (data / "config.yaml").write_text(CONFIG)
        options = {"config": str(data / "config.yaml"), "entries": args.entries, "copies": args.copies, "seed": 0}
        started = time.perf_counter()
        augmentation_sheet([str(data)], **options)  # type: ignore[arg-type]
        first = time.perf_counter() - started
        records = best_of(args.repeat, lambda: augmentation_records([str(data)], full=False, **options))  # type: ignore[arg-type]
        sheet = best_of(args.repeat, lambda: augmentation_sheet([str(data)], **options))  # type: ignore[arg-type]
        shardkit.build([data], work / "out", config=str(data / "config.yaml"), workers=1, progress=False)
        after = best_of(args.repeat, lambda: record_sheet([str(work / "out")], count=16, seed=0))
        tiles = args.entries * (1 + args.copies)
        print(f"{args.size} JPEG + PNG mask, {args.entries} entries x (original + {args.copies} copies) = {tiles} tiles", flush=True)
        print(f"first call (albumentations' start-up included)   {first:6.2f} s")
        print(f"(a) the records alone (baseline)                  {records:6.2f} s")
        ratio = f"{sheet / records:.2f}x (a): drawing {sheet - records:.2f} s"
        print(f"(b) the whole sheet                               {sheet:6.2f} s   {ratio}")
        print(f"(c) after a build: 16 sampled records             {after:6.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
