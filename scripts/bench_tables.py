#!/usr/bin/env python3
"""Tables and tiny records (issue 25): shardkit against the one-process loop a user writes, same data, one run.

    python scripts/bench_tables.py [--rows 1000000] [--tiny 2000000] [--input parquet|csv] [--only rows|tiny]
                                   [--rounds 3] [--workers 2] [--data /tmp/shardkit-bench-tables]

The defaults are the issue's sizes (1,000,000 rows; 2,000,000 tiny files). At them the data takes
about 8.5 GB of disk and 2M inodes (each tiny file fills a 4 kB block) and a few minutes to make
once; it is kept under --data and reused by later runs (the tiny files grow to the largest --tiny
asked for). Small sizes flatter shardkit: each baseline's time includes TensorFlow's import (about
3 s here), most of the baseline's time at 50,000 tiny files. Each round runs both contenders as
child processes started as a user starts them, in alternating order; every process of each is
polled for its peak RSS (VmHWM; a poll every 50 ms costs this process about 3 % of a core, in
both contenders' runs), and its CPU seconds are those of all its processes.

rows: --rows rows of f0..f7 (float64, normal), label (int64, 0..9) and name (`item-0000042`),
      as train.parquet (pyarrow, row groups of 64k rows) and the same table as train.csv.
  (a) baseline: `pyarrow.parquet.read_table` (`pyarrow.csv.read_csv` with --input csv), then per
      row of `to_pylist()` a `tf.train.Example` (floats as FloatList, label Int64List, name
      BytesList) written by `tf.io.TFRecordWriter`; TensorFlow's import included.
  (b) `shardkit build train.parquet -o OUT -c table.yaml -w W` (train.csv with --input csv),
      the config mapping each column to a float, int64 or string feature.
  Targets: baseline / shardkit wall time >= 5x; shardkit's largest process <= 250 MB.
tiny: --tiny 5x5 RGB noise PNGs (about 150 bytes), 10,000 to a folder, and train_index.txt of
      `images/0004/0042042.png 2` lines.
  (a) baseline: per index line, read the file and write a `tf.train.Example` (image bytes + label)
      with `tf.io.TFRecordWriter`; TensorFlow's import included.
  (b) `shardkit build train_index.txt -o OUT -c configs/passthrough.yaml -w W` (the bytes untouched).
  Target: shardkit's records/s >= 1.5x the baseline's.

shardkit runs with its defaults (shuffled shards, a source_id feature, .idx sidecars, each shard
fsynced); the baselines write one file and do none of that. The outputs are checked after the
rounds: the same record count, and a few records of each decoded with TensorFlow equal their
source row (floats as float32) or file. Printed, per benchmark (medians of the rounds; largest
MB: the peak RSS of the contender's largest process, the largest of the rounds):

    round 1: shardkit    5.46 s   baseline    5.71 s
    rows: 1,000,000 rows x 10 columns, train.parquet, median of 3     wall s    CPU s     rows/s  largest MB
    (a) read_table + tf.train.Example loop, 1 process                    ...      ...        ...         ...
    (b) shardkit build -c table.yaml -w 2                                ...      ...        ...         ...
    shardkit's peak RSS: parent ... MB, its 4 processes ..., ... MB (the round with the largest)
    baseline / shardkit wall time: ...x (target >= 5x); shardkit's largest process ... MB (target <= 250 MB)
    check: 1,000,000 records in each output; 9 records decoded with TensorFlow match their source

and the same for tiny (`tiny: 2,000,000 PNGs of 148 bytes on average`, records/s), ending with
`shardkit / baseline records/s: ...x (target >= 1.5x)`.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from process_tree import ROOT, measured

PASSTHROUGH = ROOT / "configs" / "passthrough.yaml"
FLOATS = [f"f{i}" for i in range(8)]
PER_FOLDER = 10_000  # tiny files to a folder: large folders slow every lookup in them

BASELINE_ROWS = r"""
import sys
import pyarrow.csv
import pyarrow.parquet as pq
import tensorflow as tf

source, out = sys.argv[1:]
table = pq.read_table(source) if source.endswith(".parquet") else pyarrow.csv.read_csv(source)
floats = [f"f{i}" for i in range(8)]
with tf.io.TFRecordWriter(out) as writer:
    for row in table.to_pylist():
        feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=[row[k]])) for k in floats}
        feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[row["label"]]))
        feature["name"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["name"].encode()]))
        writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
"""

BASELINE_TINY = r"""
import os
import sys
import tensorflow as tf

index, out = sys.argv[1:]
folder = os.path.dirname(index)
with open(index) as lines, tf.io.TFRecordWriter(out) as writer:
    for line in lines:
        path, label = line.split()
        with open(os.path.join(folder, path), "rb") as f:
            image = f.read()
        feature = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        }
        writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
"""


# ----------------------------------------------------------------------------- data
def make_table(folder: Path, rows: int) -> None:
    """train.parquet, the same table as train.csv, and the config mapping its columns (once per size)."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    if (folder / ".complete").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    columns: dict[str, Any] = {name: rng.standard_normal(rows) for name in FLOATS}
    columns["label"] = rng.integers(0, 10, rows)
    columns["name"] = pa.array([f"item-{i:07d}" for i in range(rows)])
    table = pa.table(columns)
    pq.write_table(table, folder / "train.parquet", row_group_size=64 * 1024)
    pyarrow.csv.write_csv(table, folder / "train.csv")  # floats as their shortest round-tripping text
    features = [f"  {name}: {{kind: float, column: {name}}}" for name in FLOATS]
    features += ["  label: {kind: int64, column: label}", "  name: {kind: string, column: name}"]
    (folder / "table.yaml").write_text("features:\n" + "\n".join(features) + "\n")
    (folder / ".complete").write_text("ok")


def tiny_path(i: int) -> str:
    return f"images/{i // PER_FOLDER:04d}/{i:07d}.png"


def _write_tiny(folder: str, start: int, stop: int) -> None:
    rng = np.random.default_rng(start)
    for i in range(start, stop):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).save(buffer, format="PNG")
        path = os.path.join(folder, tiny_path(i))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(buffer.getvalue())


def make_tiny(folder: Path, count: int, workers: int) -> Path:
    """At least ``count`` tiny PNGs under ``folder`` (adding to those made before) and an index of the first ``count``."""
    folder.mkdir(parents=True, exist_ok=True)
    made_file, indexed_file, index = folder / ".made", folder / ".indexed", folder / "train_index.txt"
    made = int(made_file.read_text()) if made_file.exists() else 0
    if made < count:
        cuts = [made, *range((made // PER_FOLDER + 1) * PER_FOLDER, count, PER_FOLDER), count]
        with get_context("fork").Pool(workers) as pool:
            pool.starmap(_write_tiny, [(str(folder), a, b) for a, b in itertools.pairwise(cuts)])
        made_file.write_text(str(count))
    if not (indexed_file.exists() and int(indexed_file.read_text()) == count):
        with index.open("w") as f:
            f.writelines(f"{tiny_path(i)} {i % 10}\n" for i in range(count))
        indexed_file.write_text(str(count))
    return index


# ----------------------------------------------------------------------------- runs
def rounds(commands: dict[str, list[str]], outputs: dict[str, Path], count: int) -> dict[str, list[dict[str, Any]]]:
    """Each command ``count`` times, alternating which goes first, each output folder emptied before its run."""
    runs: dict[str, list[dict[str, Any]]] = {who: [] for who in commands}
    for round_ in range(count):
        for who in list(commands)[:: -1 if round_ % 2 else 1]:  # shardkit first in round 1
            shutil.rmtree(outputs[who], ignore_errors=True)
            outputs[who].mkdir(parents=True)
            runs[who].append(measured(commands[who]))
        walls = "   ".join(f"{who} {runs[who][-1]['seconds']:7.2f} s" for who in commands)
        print(f"round {round_ + 1}: {walls}", flush=True)
    return runs


def largest_mb(run: dict[str, Any]) -> float:
    return float(max(run["parent_mb"], run["child_mb"]))


def table(title: str, unit: str, names: dict[str, str], runs: dict[str, list[dict[str, Any]]], items: int) -> dict[str, float]:
    """Print the figures' table; return each contender's median wall time."""
    print(f"\n{title:78} {'wall s':>8} {'CPU s':>8} {unit:>10} {'largest MB':>11}")
    walls = {}
    for who, name in names.items():
        walls[who] = statistics.median(r["seconds"] for r in runs[who])
        cpu = statistics.median(r["cpu_seconds"] for r in runs[who])
        peak = max(largest_mb(r) for r in runs[who])
        print(f"{name:78} {walls[who]:8.2f} {cpu:8.2f} {items / walls[who]:10,.0f} {peak:11.0f}")
    build = max(runs["shardkit"], key=largest_mb)
    print(f"shardkit's peak RSS: parent {build['parent_mb']:.0f} MB, its {len(build['children_mb'])} processes "
          f"{', '.join(map(str, build['children_mb']))} MB (the round with the largest)")  # fmt: skip
    return walls


def shard_files(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.glob("*.tfrecord"))]


def checked(outputs: dict[str, Path], expected: int, sample: Callable[[str, int, dict[str, list[Any]]], bool]) -> str:
    """The record counts of both outputs (walking the framing), and the first records of the first and last
    file of each decoded by TensorFlow, checked by ``sample(who, position in its file, features)``."""
    import tensorflow as tf

    import shardkit

    decoded = 0
    for who, folder in outputs.items():
        files = shard_files(folder)
        found = sum(f["records"] for f in shardkit.count_records(files))
        if found != expected:
            sys.exit(f"{who} wrote {found:,} records, not {expected:,}")
        for path in dict.fromkeys([files[0], files[-1]]):
            for position, record in enumerate(tf.data.TFRecordDataset(path).take(3)):
                example = tf.train.Example.FromString(record.numpy())
                features = {
                    key: list(getattr(value, str(value.WhichOneof("kind"))).value) for key, value in example.features.feature.items()
                }
                if not sample(who, position, features):
                    sys.exit(f"record {position} of {path} does not match its source: {features}")
                decoded += 1
    return f"check: {expected:,} records in each output; {decoded} records decoded with TensorFlow match their source"


def bench_rows(args: argparse.Namespace, work: Path) -> None:
    import pyarrow.parquet as pq

    folder = work / f"rows-{args.rows}"
    make_table(folder, args.rows)
    source = folder / f"train.{args.input}"
    reader = "read_table" if args.input == "parquet" else "read_csv"
    outputs = {"shardkit": work / "out-shardkit", "baseline": work / "out-baseline"}
    commands = {
        "shardkit": [sys.executable, "-m", "shardkit.cli", "build", str(source), "-o", str(outputs["shardkit"]),
                     "-c", str(folder / "table.yaml"), "-w", str(args.workers), "-q"],
        "baseline": [sys.executable, "-c", BASELINE_ROWS, str(source), str(outputs["baseline"] / "train.tfrecord")],
    }  # fmt: skip
    print(f"\n# rows: {source} ({source.stat().st_size / 1e6:.1f} MB)", flush=True)
    runs = rounds(commands, outputs, args.rounds)
    names = {
        "baseline": f"(a) {reader} + tf.train.Example loop, 1 process",
        "shardkit": f"(b) shardkit build -c table.yaml -w {args.workers}",
    }
    title = f"rows: {args.rows:,} rows x 10 columns, train.{args.input}, median of {args.rounds}"
    walls = table(title, "rows/s", names, runs, args.rows)
    peak = max(largest_mb(r) for r in runs["shardkit"])
    print(f"baseline / shardkit wall time: {walls['baseline'] / walls['shardkit']:.2f}x (target >= 5x); "
          f"shardkit's largest process {peak:.0f} MB (target <= 250 MB)")  # fmt: skip

    truth = pq.read_table(folder / "train.parquet").to_pydict()

    def same_row(who: str, position: int, features: dict[str, list[Any]]) -> bool:
        # Looked up by name, not position: shardkit shuffles, and its source_id's form depends on the input format.
        i = int(features["name"][0].decode().removeprefix("item-"))
        floats = all(np.float32(truth[k][i]) == np.float32(features[k][0]) for k in FLOATS)
        return floats and features["label"] == [truth["label"][i]] and features["name"] == [truth["name"][i].encode()]

    print(checked(outputs, args.rows, same_row))


def bench_tiny(args: argparse.Namespace, work: Path) -> None:
    index = make_tiny(work / "tiny", args.tiny, args.workers)
    mean = statistics.mean(os.path.getsize(index.parent / tiny_path(i)) for i in range(0, args.tiny, max(1, args.tiny // 1000)))
    outputs = {"shardkit": work / "out-shardkit", "baseline": work / "out-baseline"}
    commands = {
        "shardkit": [sys.executable, "-m", "shardkit.cli", "build", str(index), "-o", str(outputs["shardkit"]),
                     "-c", str(PASSTHROUGH), "-w", str(args.workers), "-q"],
        "baseline": [sys.executable, "-c", BASELINE_TINY, str(index), str(outputs["baseline"] / "train.tfrecord")],
    }  # fmt: skip
    print(f"\n# tiny: {index} ({args.tiny:,} PNGs of {mean:.0f} bytes on average)", flush=True)
    runs = rounds(commands, outputs, args.rounds)
    names = {
        "baseline": "(a) read + tf.train.Example loop, 1 process",
        "shardkit": f"(b) shardkit build -c passthrough.yaml -w {args.workers}",
    }
    walls = table(f"tiny: {args.tiny:,} PNGs of {mean:.0f} bytes on average, median of {args.rounds}", "records/s", names, runs, args.tiny)
    print(f"shardkit / baseline records/s: {walls['baseline'] / walls['shardkit']:.2f}x (target >= 1.5x)")
    lines = index.read_text().splitlines()

    def same_file(who: str, position: int, features: dict[str, list[Any]]) -> bool:
        # shardkit's records name their index line (train_index.txt:LINE); the baseline's come in the index's order.
        line = int(features["source_id"][0].decode().rsplit(":", 1)[1]) - 1 if who == "shardkit" else position
        path, label = lines[line].split()
        return features["image"] == [(index.parent / path).read_bytes()] and features["label"] == [int(label)]

    print(checked(outputs, args.tiny, same_file))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="table rows (the issue: 1,000,000)")
    parser.add_argument("--tiny", type=int, default=2_000_000, help="tiny files (the issue: 2,000,000)")
    parser.add_argument("--input", choices=("parquet", "csv"), default="parquet", help="the table file shardkit and the baseline read")
    parser.add_argument("--only", choices=("rows", "tiny"), help="run one of the two benchmarks")
    parser.add_argument("--rounds", type=int, default=3, help="each contender runs this many times, alternating; medians are printed")
    parser.add_argument("--workers", type=int, default=2, help="shardkit's -w")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardkit-bench-tables"), help="where the data is made and kept")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"# {os.cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    try:
        if args.only in (None, "rows"):
            bench_rows(args, args.data)
        if args.only in (None, "tiny"):
            bench_tiny(args, args.data)
    finally:
        for name in ("out-shardkit", "out-baseline"):  # outputs are a run's, the data is kept
            shutil.rmtree(args.data / name, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
