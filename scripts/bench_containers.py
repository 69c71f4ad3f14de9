#!/usr/bin/env python3
"""Cost of the container (issue 33): the same build with --format tfrecord, arrayrecord and both, same run.

    python scripts/bench_containers.py [--images 2000] [--rows 1000000] [--only augment|rows]
                                       [--rounds 3] [--workers 2] [--data /tmp/shardkit-bench-containers]

Two workloads, each built three ways from the same plan:
  augment: scripts/bench.py's seed-like augmented build: --images ~640x480 JPEGs with PNG masks, the
           classic train/val/test index files, flip + random sized crop + brightness/contrast, JPEG q95
           out, the mask as PNG (records of about 86 KB).
  rows:    --rows rows of f0..f7 (float64), label (int64) and name (`item-0000042`) in train.parquet
           (scripts/bench_tables.py's table; records of about 212 bytes).
Each is `shardkit build INPUT -o OUT -c CONFIG -w W -q --format F` for F in tfrecord, arrayrecord and
tfrecord,arrayrecord, run as a user runs it (a child process; the defaults: shuffled shards, source_id,
.idx sidecars beside TFRecord shards, each shard fsynced). A round runs the three once each, the order
reversed every other round; each run's wall time, CPU seconds of all its processes and largest
process's peak RSS are measured (scripts/process_tree.py). The data is made once under --data and
kept (the images take about 2 minutes to make, the table a few seconds).

Printed per workload: each round's wall times; a table of min and median wall time, median CPU
seconds, the largest process's peak RSS and the output's size (the shards of each container, and
sidecars: TFRecord's .idx); then the ratios arrayrecord / tfrecord (target <= 1.10x) and both /
tfrecord (target <= 1.30x), each as the ratio of the medians and as the median of the rounds' own
ratios (a round's runs are seconds apart: that ratio holds when the machine's load drifts). Then a
check: every output holds the same record count, and the records of the first shard of each split
are the same bytes in the same order in all four files (tfrecord, arrayrecord, and both of the
two-format build). The load average is printed before and after: on a busy machine the ratios
carry more weight than the seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from bench_common import largest_mb, rounds
from process_tree import ROOT

FORMATS = {"tfrecord": "tfrecord", "arrayrecord": "arrayrecord", "both": "tfrecord,arrayrecord"}
TARGETS = {"arrayrecord": 1.10, "both": 1.30}
AUGMENT_CONFIG = """features:
  image: {kind: image, column: 0, encoding: jpeg, quality: 95}
  mask: {kind: mask, column: 1}
augment:
  copies: 1
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomSizedCrop, min_max_height: [320, 480], size: [480, 640], p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.8}
"""


def augment_input(data: Path, images: int) -> tuple[Path, Path, int]:
    """(the folder of index files, the config, the record count) of bench.py's augmented build."""
    import bench

    root = bench.make_data(data / "images", images)
    config = data / "augment.yaml"
    config.write_text(AUGMENT_CONFIG)
    return root / "classic", config, images


def rows_input(data: Path, rows: int) -> tuple[Path, Path, int]:
    import bench_tables

    folder = data / f"rows-{rows}"
    bench_tables.make_table(folder, rows)  # train.csv and train.jsonl too: the same helper as bench_tables.py
    return folder / "train.parquet", folder / "table.yaml", rows


def sizes(folder: Path) -> dict[str, int]:
    """Bytes of the TFRecord shards, their .idx files and the ArrayRecord shards in ``folder``."""
    found = {"tfrecord": 0, "idx": 0, "arrayrecord": 0}
    for kind, pattern in (("tfrecord", "*.tfrecord"), ("idx", "*.tfrecord.idx"), ("arrayrecord", "*.array_record")):
        found[kind] = sum(path.stat().st_size for path in folder.glob(pattern))
    return found


def first_shards(folder: Path) -> dict[str, list[bytes]]:
    """The records of the first shard of each split, per container, read by shardkit's adapters."""
    from shardkit.formats.containers.arrayrecord_shards import ArrayRecordShards
    from shardkit.formats.containers.tfrecord_shards import TFRecordShards

    found: dict[str, list[bytes]] = {}
    for name, container in (("tfrecord", TFRecordShards()), ("arrayrecord", ArrayRecordShards())):
        records: list[bytes] = []

        def keep(index: int, offset: int, payload: memoryview, records: list[bytes] = records) -> None:
            records.append(bytes(payload))

        for path in sorted(folder.glob(f"*-00000-of-*{container.suffix()}")):
            scan = container.walk(str(path), keep)
            if not scan.ok:
                sys.exit(f"{path}: {scan.describe_error()}")
        if records:
            found[name] = records
    return found


def check(outputs: dict[str, Path], expected: int) -> str:
    import json

    for who, folder in outputs.items():
        total = json.loads((folder / "manifest.json").read_text())["totals"]["records"]
        if total != expected:
            sys.exit(f"--format {FORMATS[who]} wrote {total:,} records, not {expected:,}")
    files = {f"{who}/{name}": records for who, folder in outputs.items() for name, records in first_shards(folder).items()}
    reference = files["tfrecord/tfrecord"]
    for name, records in files.items():
        if records != reference:
            sys.exit(f"the first shards' records differ: {name} against tfrecord/tfrecord")
    return f"check: {expected:,} records in each output; the first shards' {len(reference):,} records the same bytes in {', '.join(files)}"


def report(title: str, runs: dict[str, list[dict[str, Any]]], size: dict[str, dict[str, int]], items: int) -> dict[str, float]:
    print(f"\n{title}")
    print(f"{'--format':22} {'min s':>8} {'median s':>9} {'CPU s':>8} {'us/record':>10} {'largest MB':>11}  "
          f"{'shards MB (sidecars MB)':>24}")  # fmt: skip
    medians = {}
    for who, fmt in FORMATS.items():
        walls = [r["seconds"] for r in runs[who]]
        medians[who] = statistics.median(walls)
        cpu = statistics.median(r["cpu_seconds"] for r in runs[who])
        peak = max(largest_mb(r) for r in runs[who])
        out = size[who]
        shards = " + ".join(f"{out[k] / 1e6:.1f}" for k in ("tfrecord", "arrayrecord") if out[k])
        side = f" ({out['idx'] / 1e6:.1f})" if out["idx"] else ""
        print(f"{fmt:22} {min(walls):8.2f} {medians[who]:9.2f} {cpu:8.2f} {medians[who] / items * 1e6:10.1f} {peak:11.0f}  "
              f"{shards + side:>24}")  # fmt: skip
    for who, target in TARGETS.items():
        paired = statistics.median(a["seconds"] / b["seconds"] for a, b in zip(runs[who], runs["tfrecord"], strict=True))
        cpu = statistics.median(r["cpu_seconds"] for r in runs[who]) / statistics.median(r["cpu_seconds"] for r in runs["tfrecord"])
        verdict = "within" if medians[who] / medians["tfrecord"] <= target else "MISSES"
        print(f"{FORMATS[who]} / tfrecord wall time: {medians[who] / medians['tfrecord']:.3f}x of the medians, "
              f"{paired:.3f}x the rounds' median; CPU {cpu:.3f}x (target <= {target:.2f}x: {verdict})")  # fmt: skip
    return medians


def bench(name: str, source: Path, config: Path, items: int, args: argparse.Namespace) -> None:
    outputs = {who: args.out / f"{name}-{who}" for who in FORMATS}
    commands = {
        who: [sys.executable, "-m", "shardkit.cli", "build", str(source), "-o", str(outputs[who]), "-c", str(config),
              "-w", str(args.workers), "-q", "--format", fmt]
        for who, fmt in FORMATS.items()
    }  # fmt: skip
    print(f"\n# {name}: {source} ({items:,} records), -w {args.workers}", flush=True)
    runs = rounds(commands, outputs, args.rounds)  # a failed build stops the script with its output
    size = {who: sizes(folder) for who, folder in outputs.items()}
    report(f"{name}: {items:,} records, median of {args.rounds} rounds", runs, size, items)
    print(check(outputs, items))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000, help="augment: images (bench.py's default)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows: table rows (the issue: 1,000,000; fewer for a quick run)")
    parser.add_argument("--only", choices=("augment", "rows"), help="run one of the two workloads")
    parser.add_argument("--rounds", type=int, default=3, help="each format runs this many times, interleaved")
    parser.add_argument("--workers", type=int, default=2, help="shardkit's -w")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardkit-bench-containers"), help="where the data is made and kept")
    args = parser.parse_args()
    args.data = args.data.resolve()  # the builds run in the repository's root
    args.data.mkdir(parents=True, exist_ok=True)
    args.out = args.data / f"out-{os.getpid()}"  # this run's: another run may share the data folder
    sys.path.insert(0, str(ROOT))
    load = os.getloadavg()
    print(f"# {os.cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    try:
        if args.only in (None, "augment"):
            bench("augment", *augment_input(args.data, args.images), args)
        if args.only in (None, "rows"):
            bench("rows", *rows_input(args.data, args.rows), args)
    finally:
        shutil.rmtree(args.out, ignore_errors=True)  # outputs are a run's, the data is kept
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
