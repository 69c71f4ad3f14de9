#!/usr/bin/env python3
"""A CSV larger than memory should be (issue 32): each process's peak RSS while shardkit builds it.

    python scripts/bench_csv_memory.py [--gb 5] [--workers 2] [--data /tmp/shardkit-bench-csv-memory]

Writes train.csv of about --gb GB once (rows of f0..f7 float, label int64, name string, as
bench_tables.py's rows, a million rows at a time: the writer holds one batch), then runs
``shardkit build train.csv -c table.yaml -w W`` as a user starts it and polls every process of
the build for its peak RSS (VmHWM). The CSV is read a block of a few MB at a time by every
process that reads it: no process should hold more than a block's worth of it. Prints:

    train.csv: 5.00 GB, 28,700,000 rows
    shardkit build -w 2: 412.3 s wall, 690.1 s CPU, 69,600 rows/s
    largest = others[0] if others else 0
    print(f"peak RSS: parent {run['parent_mb']:.0f} MB; largest other process {largest:.0f} MB (target <= 250 MB)", end="")
    print(f"; all: {', '.join(f'{m:.0f}' for m in others)}")
    manifest: 28,700,000 records in 288 shards
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process_tree import measured

ROWS_PER_BATCH = 1_000_000
CONFIG = "features:\n" + "".join(f"  f{i}: {{kind: float, column: f{i}}}\n" for i in range(8))
CONFIG += "  label: {kind: int64, column: label}\n  name: {kind: string, column: name}\n"


def make_csv(path: Path, gigabytes: float) -> int:
    """Rows appended a million at a time until the file holds ``gigabytes``; the row count."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as csv

    rng = np.random.default_rng(0)
    rows = 0
    part = path.with_name(path.name + ".part")
    with csv.CSVWriter(
        str(part),
        pa.schema([*(pa.field(f"f{i}", pa.float64()) for i in range(8)), pa.field("label", pa.int64()), pa.field("name", pa.string())]),
    ) as writer:
        while (part.stat().st_size if rows else 0) < gigabytes * 1e9:
            columns = [pa.array(rng.standard_normal(ROWS_PER_BATCH)) for _ in range(8)]
            columns.append(pa.array(rng.integers(0, 10, ROWS_PER_BATCH)))
            columns.append(pa.array([f"item-{rows + i:09d}" for i in range(ROWS_PER_BATCH)]))
            writer.write_batch(pa.record_batch(columns, names=[*(f"f{i}" for i in range(8)), "label", "name"]))
            rows += ROWS_PER_BATCH
    part.rename(path)
    path.with_name("rows.txt").write_text(str(rows))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=5.0, help="the CSV's size (the issue: 5 GB)")
    parser.add_argument("--workers", type=int, default=2, help="shardkit's -w")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardkit-bench-csv-memory"), help="where the CSV is made and kept")
    args = parser.parse_args()
    data = args.data.resolve()
    data.mkdir(parents=True, exist_ok=True)
    source, config, out = data / "train.csv", data / "table.yaml", data / "out"
    if not source.exists() or not (data / "rows.txt").exists():
        make_csv(source, args.gb)
    rows = int((data / "rows.txt").read_text())
    config.write_text(CONFIG)
    shutil.rmtree(out, ignore_errors=True)
    print(f"train.csv: {source.stat().st_size / 1e9:.2f} GB, {rows:,} rows")
    run = measured([sys.executable, "-m", "shardkit.cli", "build", str(source), "-o", str(out), "-c", str(config), "-w", str(args.workers)])
    seconds, cpu = run["seconds"], run["cpu_seconds"]
    print(f"shardkit build -w {args.workers}: {seconds:.1f} s wall, {cpu:.1f} s CPU, {rows / seconds:,.0f} rows/s")
    others = sorted(run["children_mb"], reverse=True)
    largest, each = others[0] if others else 0, ", ".join(f"{m:.0f}" for m in others)
    print(f"peak RSS: parent {run['parent_mb']:.0f} MB; largest other process {largest:.0f} MB (target <= 250 MB); all: {each}")
    manifest = json.loads((out / "manifest.json").read_text())
    split = manifest["splits"]["train"]
    print(f"manifest: {manifest['totals']['records']:,} records in {split['num_shards']} shards")
    if manifest["totals"]["records"] != rows:
        raise SystemExit(f"expected {rows:,} records")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
