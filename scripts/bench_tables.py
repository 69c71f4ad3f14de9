#!/usr/bin/env python3
"""Tables and tiny records (issues 25 and 32): shardkit against the one-process loop a user writes, same data, one run.

    python scripts/bench_tables.py [--rows 1000000] [--input csv,jsonl,parquet] [--arrow-baseline]
                                   [--tiny 2000000] [--tiny-files 200] [--tiny-example] [--only rows|tiny]
                                   [--rounds 3] [--workers 2] [--data /tmp/shardkit-bench-tables]

The defaults are the issue's sizes (1,000,000 rows; 2,000,000 index lines over 200 tiny files). The
data is kept under --data and reused by later runs (the tiny files grow to the largest count asked
for; with --tiny-files 0 every index line has its own file, as issue 25 measured: at 2,000,000 that
is about 8.5 GB of disk and 2M inodes, each tiny file filling a 4 kB block). Each run writes its
outputs under --data/out-PID and removes them at its end, so runs may share --data; but one asking
for another --tiny or --tiny-files rewrites the shared train_index.txt. Small sizes flatter
shardkit: the Example baselines' time includes TensorFlow's import (about 3 s here). Each round runs
every contender as a child process started as a user starts it, the order reversed every other
round; every process of each is polled for its peak RSS (VmHWM; a poll every 50 ms costs this
process about 3 % of a core, in every contender's run), and its CPU seconds are those of all its
processes. The load average is printed before and after: the figures mean little on a busy machine.

rows: --rows rows of f0..f7 (float64, normal), label (int64, 0..9) and name (`item-0000042`), as
      train.parquet (pyarrow, row groups of 64k rows), train.csv (pyarrow's write_csv) and train.jsonl
      (`json.dumps` of each row's dict). One benchmark per --input (a comma list), each against:
  (a) baseline, the loop a user writes, TensorFlow's import included, a `tf.train.Example` per row
      (floats as FloatList, label Int64List, name BytesList) written by `tf.io.TFRecordWriter`:
      csv: `csv.reader`, values typed by float() and int(); jsonl: `json.loads` per line;
      parquet: `pyarrow.parquet.read_table` then `to_pylist()`.
  (c) with --arrow-baseline (csv and jsonl): pyarrow's `read_csv` / `read_json` then `to_pylist()`,
      the same loop (the baseline issue 25 measured CSV against).
  (b) `shardkit build train.EXT -o OUT -c table.yaml -w W`, the config mapping each column to a float,
      int64 or string feature.
  Targets (issue 32): csv >= 5x, jsonl >= 4x the baseline's wall time; shardkit's largest process <= 250 MB.
tiny: 5x5 RGB noise PNGs (about 148 bytes), 10,000 to a folder, and train_index.txt of --tiny
      `images/0000/0000042.png 2` lines, line i naming file i % --tiny-files (lines repeat files: the
      files stay in the page cache), its label i % 10.
  (a) baseline, the least work a writer can do, one process, no TensorFlow: per index line, read the
      file, append the label as 8 bytes (little-endian int64), frame it as a TFRecord (length, masked
      CRC32C of the length, data, masked CRC32C of the data; `crc32c`, the package shardkit uses) and
      write it to one buffered file. No tf.train.Example.
  (c) with --tiny-example: issue 25's baseline, a `tf.train.Example` (image bytes + label) per line
      written by `tf.io.TFRecordWriter`, TensorFlow's import included.
  (b) `shardkit build train_index.txt -o OUT -c configs/passthrough.yaml -w W` (the bytes untouched).
  Target (issue 32): shardkit's records/s >= 1.5x the baseline's (a).

shardkit runs with its defaults (shuffled shards, a source_id feature, .idx sidecars, each shard
fsynced); the baselines write one file and do none of that. The outputs are checked after the
rounds: the same record count, and a few records of each read back with TensorFlow equal their
source row (floats as float32) or file (+ label). Printed, per benchmark: each round's wall times,
then a table of medians (best: the fastest round; us/item: median wall time per row or line;
largest MB: the peak RSS of the contender's largest process, the largest of the rounds), shardkit's
processes' peak RSS, `(a) / shardkit wall time: ...x (target ...)` for each baseline, and the check.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import shutil
import statistics
import struct
import sys
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import checked, example_features, ratios, rounds, table
from PIL import Image
from process_tree import ROOT

PASSTHROUGH = ROOT / "configs" / "passthrough.yaml"
FLOATS = [f"f{i}" for i in range(8)]
PER_FOLDER = 10_000  # tiny files to a folder: large folders slow every lookup in them
TARGETS = {"csv": "target >= 5x", "jsonl": "target >= 4x", "parquet": "target >= 5x"}

EXAMPLE = r"""
import sys
import tensorflow as tf

Feature, FloatList, Int64List, BytesList = tf.train.Feature, tf.train.FloatList, tf.train.Int64List, tf.train.BytesList
FLOATS = [f"f{i}" for i in range(8)]


def example(floats, label, name):
    feature = {k: Feature(float_list=FloatList(value=[v])) for k, v in zip(FLOATS, floats)}
    feature["label"] = Feature(int64_list=Int64List(value=[label]))
    feature["name"] = Feature(bytes_list=BytesList(value=[name.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


source, out = sys.argv[1:]
"""

CSV_LOOP = r"""
import csv

with open(source, newline="") as f, tf.io.TFRecordWriter(out) as writer:
    rows = csv.reader(f)
    header = next(rows)
    at = [header.index(k) for k in FLOATS]
    label, name = header.index("label"), header.index("name")
    for row in rows:
        writer.write(example([float(row[i]) for i in at], int(row[label]), row[name]))
"""
JSONL_LOOP = r"""
import json

with open(source) as lines, tf.io.TFRecordWriter(out) as writer:
    for line in lines:
        row = json.loads(line)
        writer.write(example([row[k] for k in FLOATS], row["label"], row["name"]))
"""
ARROW_LOOP = r"""
import pyarrow.csv
import pyarrow.json
import pyarrow.parquet

read = {"parquet": pyarrow.parquet.read_table, "csv": pyarrow.csv.read_csv, "jsonl": pyarrow.json.read_json}
table = read[source.rsplit(".", 1)[1]](source)
with tf.io.TFRecordWriter(out) as writer:
    for row in table.to_pylist():
        writer.write(example([row[k] for k in FLOATS], row["label"], row["name"]))
"""
BASELINE_ROWS = {"csv": EXAMPLE + CSV_LOOP, "jsonl": EXAMPLE + JSONL_LOOP, "arrow": EXAMPLE + ARROW_LOOP, "parquet": EXAMPLE + ARROW_LOOP}
BASELINE_NAMES = {
    "csv": "csv.reader + tf.train.Example loop, 1 process",
    "jsonl": "json.loads + tf.train.Example loop, 1 process",
    "parquet": "read_table + tf.train.Example loop, 1 process",
}

BASELINE_FRAME = r"""
import os
import struct
import sys

import crc32c

index, out = sys.argv[1:]
folder = os.path.dirname(index)
u64, u32, i64 = struct.Struct("<Q").pack, struct.Struct("<I").pack, struct.Struct("<q").pack


def masked(data):
    crc = crc32c.crc32c(data)
    return u32((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


with open(index) as lines, open(out, "wb") as writer:
    for line in lines:
        path, label = line.split()
        with open(os.path.join(folder, path), "rb") as f:
            data = f.read() + i64(int(label))
        length = u64(len(data))
        writer.write(length + masked(length) + data + masked(data))
"""

BASELINE_TINY_EXAMPLE = r"""
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
    """train.parquet, the same table as train.csv and train.jsonl, and the config mapping its columns
    (once per size; a file missing from an earlier run's folder is added)."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    parquet = folder / "train.parquet"
    if not (folder / ".complete").exists():
        rng = np.random.default_rng(0)
        columns: dict[str, Any] = {name: rng.standard_normal(rows) for name in FLOATS}
        columns["label"] = rng.integers(0, 10, rows)
        columns["name"] = pa.array([f"item-{i:07d}" for i in range(rows)])
        table = pa.table(columns)
        pq.write_table(table, parquet, row_group_size=64 * 1024)
        pyarrow.csv.write_csv(table, folder / "train.csv")  # floats as their shortest round-tripping text
        features = [f"  {name}: {{kind: float, column: {name}}}" for name in FLOATS]
        features += ["  label: {kind: int64, column: label}", "  name: {kind: string, column: name}"]
        (folder / "table.yaml").write_text("features:\n" + "\n".join(features) + "\n")
        (folder / ".complete").write_text("ok")
    if not (folder / ".jsonl-complete").exists():
        with (folder / "train.jsonl").open("w") as f:
            for batch in pq.ParquetFile(parquet).iter_batches(batch_size=64 * 1024):
                f.writelines(json.dumps(row) + "\n" for row in batch.to_pylist())
        (folder / ".jsonl-complete").write_text("ok")


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


def make_tiny(folder: Path, lines: int, files: int, workers: int) -> Path:
    """At least ``files`` tiny PNGs under ``folder`` (adding to those made before) and an index of
    ``lines`` lines, line i naming file i % files."""
    folder.mkdir(parents=True, exist_ok=True)
    made_file, indexed_file, index = folder / ".made", folder / ".indexed", folder / "train_index.txt"
    made = int(made_file.read_text()) if made_file.exists() else 0
    if made < files:
        cuts = [made, *range((made // PER_FOLDER + 1) * PER_FOLDER, files, PER_FOLDER), files]
        with get_context("fork").Pool(workers) as pool:
            pool.starmap(_write_tiny, [(str(folder), a, b) for a, b in itertools.pairwise(cuts)])
        made_file.write_text(str(files))
    if not (indexed_file.exists() and indexed_file.read_text() == f"{lines} {files}"):
        with (folder / f".index-{os.getpid()}").open("w") as f:
            f.writelines(f"{tiny_path(i % files)} {i % 10}\n" for i in range(lines))
        os.replace(f.name, index)  # whole: a run reading the old one keeps reading it
        indexed_file.write_text(f"{lines} {files}")
    return index


# ----------------------------------------------------------------------------- benchmarks
def bench_rows(args: argparse.Namespace, work: Path, kind: str) -> None:
    import pyarrow.parquet as pq

    folder = work / f"rows-{args.rows}"
    make_table(folder, args.rows)
    source = folder / f"train.{kind}"
    contenders = ["shardkit", "baseline"] + (["arrow"] if args.arrow_baseline and kind != "parquet" else [])
    outputs = {who: args.out / who for who in contenders}
    commands = {
        "shardkit": [sys.executable, "-m", "shardkit.cli", "build", str(source), "-o", str(outputs["shardkit"]),
                     "-c", str(folder / "table.yaml"), "-w", str(args.workers), "-q"],
        "baseline": [sys.executable, "-c", BASELINE_ROWS[kind], str(source), str(outputs["baseline"] / "train.tfrecord")],
    }  # fmt: skip
    names = {"baseline": f"(a) {BASELINE_NAMES[kind]}", "shardkit": f"(b) shardkit build -c table.yaml -w {args.workers}"}
    if "arrow" in outputs:
        commands["arrow"] = [sys.executable, "-c", BASELINE_ROWS["arrow"], str(source), str(outputs["arrow"] / "train.tfrecord")]
        names["arrow"] = f"(c) pyarrow read_{'csv' if kind == 'csv' else 'json'} + tf.train.Example loop, 1 process"
    print(f"\n# rows: {source} ({source.stat().st_size / 1e6:.1f} MB)", flush=True)
    runs = rounds(commands, outputs, args.rounds)
    title = f"rows: {args.rows:,} rows x 10 columns, train.{kind}, median of {args.rounds}"
    walls = table(title, "rows/s", names, runs, args.rows)
    peak = max(max(r["parent_mb"], r["child_mb"]) for r in runs["shardkit"])
    ratios(walls, names, {"baseline": TARGETS[kind]})
    print(f"shardkit's largest process {peak:.0f} MB (target <= 250 MB)")

    truth = pq.read_table(folder / "train.parquet").to_pydict()

    def same_row(who: str, position: int, record: bytes) -> bool:
        # Looked up by name, not position: shardkit shuffles, and its source_id's form depends on the input format.
        features = example_features(record)
        i = int(features["name"][0].decode().removeprefix("item-"))
        floats = all(np.float32(truth[k][i]) == np.float32(features[k][0]) for k in FLOATS)
        return floats and features["label"] == [truth["label"][i]] and features["name"] == [truth["name"][i].encode()]

    print(checked(outputs, args.rows, same_row))


def bench_tiny(args: argparse.Namespace, work: Path) -> None:
    files = args.tiny_files or args.tiny
    index = make_tiny(work / "tiny", args.tiny, files, args.workers)
    mean = statistics.mean(os.path.getsize(index.parent / tiny_path(i)) for i in range(0, files, max(1, files // 1000)))
    contenders = ["shardkit", "baseline"] + (["example"] if args.tiny_example else [])
    outputs = {who: args.out / who for who in contenders}
    loops = {"baseline": BASELINE_FRAME, "example": BASELINE_TINY_EXAMPLE}
    commands = {
        "shardkit": [sys.executable, "-m", "shardkit.cli", "build", str(index), "-o", str(outputs["shardkit"]),
                     "-c", str(PASSTHROUGH), "-w", str(args.workers), "-q"],
    }  # fmt: skip
    commands |= {who: [sys.executable, "-c", loops[who], str(index), str(outputs[who] / "train.tfrecord")] for who in contenders[1:]}
    names = {
        "baseline": "(a) read + label + CRC32C framing loop, 1 process, no TensorFlow",
        "shardkit": f"(b) shardkit build -c passthrough.yaml -w {args.workers}",
        "example": "(c) read + tf.train.Example + TFRecordWriter loop, 1 process",
    }
    names = {who: name for who, name in names.items() if who in contenders}
    what = f"{args.tiny:,} index lines over {files:,} PNGs of {mean:.0f} bytes on average"
    print(f"\n# tiny: {index} ({what})", flush=True)
    runs = rounds(commands, outputs, args.rounds)
    walls = table(f"tiny: {what}, median of {args.rounds}", "records/s", names, runs, args.tiny)
    ratios(walls, names, {"baseline": "target >= 1.5x"})
    lines = index.read_text().splitlines()

    def same_file(who: str, position: int, record: bytes) -> bool:
        if who == "baseline":  # the index's order; the file's bytes then the label as a little-endian int64
            path, label = lines[position].split()
            return record == (index.parent / path).read_bytes() + struct.pack("<q", int(label))
        # shardkit's records name their index line (train_index.txt:LINE); the Example baseline's come in the index's order.
        features = example_features(record)
        line = int(features["source_id"][0].decode().rsplit(":", 1)[1]) - 1 if who == "shardkit" else position
        path, label = lines[line].split()
        return features["image"] == [(index.parent / path).read_bytes()] and features["label"] == [int(label)]

    print(checked(outputs, args.tiny, same_file))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="table rows (the issue: 1,000,000)")
    parser.add_argument("--input", default="parquet", help="the table files, a comma list of parquet, csv, jsonl: one benchmark each")
    parser.add_argument("--arrow-baseline", action="store_true", help="csv and jsonl: also pyarrow's reader + the Example loop, (c)")
    parser.add_argument("--tiny", type=int, default=2_000_000, help="index lines (the issue: 2,000,000)")
    parser.add_argument("--tiny-files", type=int, default=200, help="distinct tiny files the lines name (0: one per line)")
    parser.add_argument("--tiny-example", action="store_true", help="tiny: also issue 25's tf.train.Example loop, (c)")
    parser.add_argument("--only", choices=("rows", "tiny"), help="run one of the two benchmarks")
    parser.add_argument("--rounds", type=int, default=3, help="each contender runs this many times, alternating; medians are printed")
    parser.add_argument("--workers", type=int, default=2, help="shardkit's -w")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardkit-bench-tables"), help="where the data is made and kept")
    args = parser.parse_args()
    kinds = args.input.split(",")
    if unknown := set(kinds) - set(TARGETS):
        parser.error(f"--input: {', '.join(sorted(unknown))} is not one of parquet, csv, jsonl")
    args.data = args.data.resolve()  # the contenders run in the repository's root
    args.data.mkdir(parents=True, exist_ok=True)
    args.out = args.data / f"out-{os.getpid()}"  # this run's: another run may share the data folder
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up lines, in the checks and the baselines' logs
    load = os.getloadavg()
    print(f"# {os.cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    try:
        if args.only in (None, "rows"):
            for kind in kinds:
                bench_rows(args, args.data, kind)
        if args.only in (None, "tiny"):
            bench_tiny(args, args.data)
    finally:
        shutil.rmtree(args.out, ignore_errors=True)  # outputs are a run's, the data is kept
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
