#!/usr/bin/env python3
"""The batch Example encoder against the per-record one, on the same rows, to the same kind of file.

    python scripts/bench_example_batch.py [--rows 1000000] [--repeat 3]

Rows of 10 features: 8 float64 scalars, 1 int64 scalar, 1 short string. Per record:
``encode_example`` and ``RecordWriter.write``. Batch: ``encode_batch``, ``frame_batch`` and
``RecordWriter.write_framed``. Both write a file in a temporary folder; the two files must be equal.
The per-record path gets its rows as Python lists made ahead, untimed. Each figure is the best of
``--repeat`` runs; the batch path's first run is shown as well, since it pays for fresh memory
(new pages for a batch's buffers) that later runs reuse.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shardkit.formats.containers.tfrecord_io import RecordWriter, frame_batch  # noqa: E402
from shardkit.formats.example_batch import encode_batch  # noqa: E402
from shardkit.formats.example_proto import encode_example  # noqa: E402


def make_columns(rows: int) -> list[tuple[str, str, pa.Array]]:
    rng = np.random.default_rng(0)
    columns = [(f"value/{i}", "float", pa.array(rng.normal(size=rows))) for i in range(8)]
    columns.append(("label", "int64", pa.array(rng.integers(0, 1000, size=rows))))
    columns.append(("id", "bytes", pa.array([f"img_{i:x}.jpg" for i in range(rows)])))
    return columns


def python_values(columns: list[tuple[str, str, pa.Array]]) -> list[tuple[str, str, list[Any]]]:
    """The columns as the per-record path gets them: Python lists, strings already UTF-8 (not timed)."""
    return [(key, wire, [v.encode() if isinstance(v, str) else v for v in array.to_pylist()]) for key, wire, array in columns]


def per_record(lists: list[tuple[str, str, list[Any]]], rows: int, path: Path) -> None:
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for i in range(rows):
            writer.write(encode_example({key: (wire, [values[i]]) for key, wire, values in lists}))


def batch(columns: list[tuple[str, str, pa.Array]], rows: int, path: Path) -> None:
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        buffer, lengths = frame_batch(encode_batch(columns, rows))
        writer.write_framed(buffer, lengths)


def timed(repeat: int, fn: Callable[[], None]) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    columns = make_columns(args.rows)
    lists = python_values(columns)
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp, "per_record.tfrecord"), Path(tmp, "batch.tfrecord")
        slow = min(timed(args.repeat, lambda: per_record(lists, args.rows, one)))
        fast = timed(args.repeat, lambda: batch(columns, args.rows, many))
        assert filecmp.cmp(one, many, shallow=False), "the batch file differs from the per-record one"
    per_row = 1e6 / args.rows
    print(f"{args.rows} rows x {len(columns)} features, best of {args.repeat}")
    print(f"  per record (encode_example + write):               {slow * per_row:6.2f} us/row")
    print(f"  batch (encode_batch + frame_batch + write_framed): {min(fast) * per_row:6.2f} us/row  ({slow / min(fast):.1f}x)")
    print(f"  batch, first run:                                  {fast[0] * per_row:6.2f} us/row  ({slow / fast[0]:.1f}x)")


if __name__ == "__main__":
    main()
