#!/usr/bin/env python3
"""Planning a LabelMe folder against planning a Pascal VOC folder, per file: issue 31's target is a
LabelMe folder of 100,000 files read no slower per file than a VOC folder of 100,000 XMLs.

    python scripts/bench_labelme_plan.py [--files 100000] [--repeats 3] [--work DIR]

Both folders are written first, as their tools write them: a VOC folder with `Annotations/` (one
LabelImg XML an image, two objects each) beside an empty `JPEGImages/` and no `ImageSets` (all
`train`, read in name order), and a LabelMe folder (one JSON an image, as LabelMe saves it with
`indent=2`: a rectangle and a four-point polygon, `imageData` null). No image is written: reading
the rows opens annotation files alone (a worker opens the images, after planning).

Timed: every row of each folder, from the format's own `read_rows` (what a build's planning does
with it, twice: once for the fingerprint, once for the plan), each contender --repeats times,
alternating, the file cache warm (both were just written). Printed: a line per run, then per
format the best and median files/s, and the ratio LabelMe / VOC of the medians (above 1: LabelMe
is faster per file), with the load average (the machine may be shared).

At the default size the two folders take about 800 MB (200,000 files of a block each) and a
minute to write, and each pass of the two about 35 s on 2 cores; the folders go in a new folder
under --work (default: the temp dir), removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from shardkit.errors import EntryError
from shardkit.pipeline.inputs.formats.detection.labelme import LABELME
from shardkit.pipeline.inputs.formats.detection.voc import VOC
from shardkit.pipeline.inputs.formats.input_format import Piece

WIDTH, HEIGHT = 640, 480


def voc_xml(name: str, i: int) -> str:
    """A LabelImg annotation of two objects."""
    objects = "".join(
        f"\t<object>\n\t\t<name>{label}</name>\n\t\t<pose>Unspecified</pose>\n\t\t<truncated>0</truncated>\n"
        f"\t\t<difficult>0</difficult>\n\t\t<bndbox>\n\t\t\t<xmin>{x}</xmin>\n\t\t\t<ymin>{y}</ymin>\n"
        f"\t\t\t<xmax>{x + 50}</xmax>\n\t\t\t<ymax>{y + 40}</ymax>\n\t\t</bndbox>\n\t</object>\n"
        for label, x, y in (("car", 10 + i % 100, 20), ("person", 200, 100 + i % 50))
    )
    return (
        f"<annotation>\n\t<folder>JPEGImages</folder>\n\t<filename>{name}.jpg</filename>\n"
        f"\t<path>/home/user/JPEGImages/{name}.jpg</path>\n\t<source>\n\t\t<database>Unknown</database>\n\t</source>\n"
        f"\t<size>\n\t\t<width>{WIDTH}</width>\n\t\t<height>{HEIGHT}</height>\n\t\t<depth>3</depth>\n\t</size>\n"
        f"\t<segmented>0</segmented>\n{objects}</annotation>\n"
    )


def labelme_json(name: str, i: int) -> str:
    """A LabelMe file of a rectangle and a polygon, as LabelMe saves it."""
    x = 10.0 + i % 100
    shapes = [
        {"label": "car", "points": [[x, 20.0], [x + 50.0, 60.0]], "group_id": None, "description": "",
         "shape_type": "rectangle", "flags": {}, "mask": None},
        {"label": "person", "points": [[200.0, 100.0], [250.0, 102.5], [245.5, 140.0], [204.0, 138.0]], "group_id": None,
         "description": "", "shape_type": "polygon", "flags": {}, "mask": None},
    ]  # fmt: skip
    document = {"version": "5.5.0", "flags": {}, "shapes": shapes, "imagePath": f"{name}.jpg", "imageData": None,
                "imageHeight": HEIGHT, "imageWidth": WIDTH}  # fmt: skip
    return json.dumps(document, ensure_ascii=False, indent=2)


def write(root: Path, files: int) -> tuple[Path, Path]:
    voc, labelme = root / "VOC", root / "labelme"
    (voc / "Annotations").mkdir(parents=True)
    (voc / "JPEGImages").mkdir()
    labelme.mkdir()
    for i in range(files):
        name = f"{i:08d}"
        (voc / "Annotations" / f"{name}.xml").write_text(voc_xml(name, i))
        (labelme / f"{name}.json").write_text(labelme_json(name, i))
    return voc, labelme


def timed(read: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = read()
    return time.perf_counter() - started, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=tempfile.gettempdir())
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-labelme-", dir=args.work))
    try:
        started = time.perf_counter()
        voc, labelme = write(root, args.files)
        print(f"wrote {args.files:,} VOC XMLs and {args.files:,} LabelMe files in {time.perf_counter() - started:.0f} s", flush=True)
        [(_, voc_piece)] = VOC.folder_splits(str(voc))
        [(_, labelme_piece)] = LABELME.folder_splits(str(labelme))
        contenders: dict[str, tuple[Callable[[Piece], object], Piece]] = {
            "voc": (VOC.read_rows, voc_piece),
            "labelme": (LABELME.read_rows, labelme_piece),
        }
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        load = os.getloadavg()[0]
        for repeat in range(args.repeats):
            order = list(contenders) if repeat % 2 == 0 else list(reversed(contenders))
            for name in order:
                read, piece = contenders[name]

                def rows(read: Callable[[Piece], object] = read, piece: Piece = piece) -> int:
                    found = list(read(piece))  # type: ignore[call-overload]
                    errors = [r for r in found if isinstance(r, EntryError)]
                    assert not errors, errors[:3]
                    return len(found)

                took, count = timed(rows)
                assert count == args.files, (name, count)
                seconds[name].append(took)
                print(f"{name:8s} pass {repeat + 1}: {count:,} rows in {took:.2f} s ({count / took:,.0f} files/s)", flush=True)
        print(f"\nfiles: {args.files:,}   load average: {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
        print(f"{'format':8s} {'best files/s':>14s} {'median files/s':>16s}")
        medians = {}
        for name, runs in seconds.items():
            medians[name] = args.files / statistics.median(runs)
            print(f"{name:8s} {args.files / min(runs):14,.0f} {medians[name]:16,.0f}")
        print(f"labelme / voc (median files/s): {medians['labelme'] / medians['voc']:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
