#!/usr/bin/env python3
"""Global-shuffle reads through Grain (issue 33): ShardReader against the loop a Grain user writes, same shards, one run.

    python scripts/bench_grain_reads.py [--images 2000] [--rows 1000000] [--records 10000] [--only images|rows]
                                        [--modes iter,batch,index] [--rounds 3] [--workers 2] [--reuse] [--data /tmp/shardkit-bench-grain]

Two datasets, each built twice by `shardkit build` with the same seed (its defaults: shuffled shards,
source_id, .idx sidecars for TFRecord), so that both builds hold the same records in the same order:
`--format tfrecord,arrayrecord` (both containers side by side) and `--format arrayrecord` (ArrayRecord
alone):
  images: scripts/bench.py's seed-like workload: --images 640x480 JPEG photos + PNG masks (bench.py's
          data), split 70/15/15, the config image (JPEG q95) + mask with bench.py's augmentation
          pipeline (flip, RandomSizedCrop, brightness/contrast), one augmented copy each.
  rows:   scripts/bench_tables.py's table: --rows rows of f0..f7 (float), label (int64), name (string),
          from train.parquet, the config mapping each column to a feature.
With --reuse, data and builds of an earlier run (under --data) are read again; without it they are
rebuilt.

Contenders, each reading the "train" split in a global shuffle (`.shuffle(seed=0)`), timed from the
first record to the last (imports, opening and the first record's set-up excluded alike):
  (a) baseline, the loop a user writes from the Grain docs, over the both-format build's
      `.array_record` files: `ArrayRecordDataSource(files)` -> `grain.MapDataset.source(...)
      .shuffle(seed=0).map(parse)`, parse = `tf.train.Example.FromString` then a dict of NumPy
      arrays, one per feature (`np.asarray` of its value list).
  (b) `grain.MapDataset.source(ShardReader(OUT, "train")).shuffle(seed=0)` over the both-format OUT:
      ShardReader reads the split's first container, TFRecord here (.idx files, both CRCs checked).
  (c) the same over the ArrayRecord-only OUT (array_record's reader).
  floor: the same `MapDataset.source(X).shuffle(seed=0)` over a source X of the split's length whose
      `__getitem__` returns one prebuilt dict, ShardReader's record 0 (no reading, no decoding): the
      most records/s any source yielding such dicts reaches through Grain. Its bound, floor records/s
      over the baseline's (baseline us/record / floor us/record), is the most any source can beat the
      baseline by.
Each is read three ways, the same for all: `iter` (`for record in dataset`: Grain's iterator with its
default ReadOptions, 16 reading threads and a buffer of 500 elements), `batch` (the same iterator over
`dataset.batch(32)`: Grain's per-element costs shared by 32 records) and `index` (`dataset[i]` for i in
range(N), one thread: the source's own cost plus Grain's bookkeeping of each element). Each round
runs all four, the order reversed every other round, each over --records records of the shuffle
(passing over a smaller split again). Printed: each round's records/s, the medians with us/record,
`(b) / (a)` and `(c) / (a)` records/s (target >= 1.5x) and the floor's bound, for each way; then a
check that (a), (b) and (c) read the same values for the first records of the shuffle.

In grain 0.2.18 Grain's iterator costs each element a scan of its prefetch buffer (`Future.done` on
every element already read ahead, up to 500: `PrefetchDatasetIterator._measure_prefetch_depth`): the
faster the source, the fuller the buffer, the dearer each element. The floor line shows what that
leaves to a source.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from process_tree import ROOT

sys.path.insert(0, str(ROOT))  # shardkit from this checkout, as the builds run it

SPLIT = "train"
BATCH = 32
MODES = {
    "iter": "for record in dataset (Grain's iterator: 16 reading threads, a buffer of 500)",
    "batch": f"for batch in dataset.batch({BATCH}) (the same iterator, a batch an element)",
    "index": "dataset[i] for i in range(N) (Grain's random access in one thread)",
}


# ----------------------------------------------------------------------------- data
BUILDS = {"both": "tfrecord,arrayrecord", "arrayrecord-only": "arrayrecord"}  # folder under --data/NAME -> --format


def build(args: argparse.Namespace, name: str, inputs: list[str], config: dict[str, Any]) -> dict[str, Path]:
    """``shardkit build`` of ``inputs`` once per entry of BUILDS, into --data/NAME/FOLDER (kept, and reused
    with --reuse): the same config, seed and inputs, so the same records in the same shards."""
    config_path = args.data / name / "config.yaml"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    outs = {}
    for folder, formats in BUILDS.items():
        out = outs[folder] = args.data / name / folder
        if args.reuse and (out / "manifest.json").exists():
            print(f"# {name}: reusing {out}", flush=True)
            continue
        command = [sys.executable, "-m", "shardkit.cli", "build", *inputs, "-o", str(out), "-c", str(config_path),
                   "--format", formats, "-w", str(args.workers), "-q", "--overwrite"]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT)
        print(f"# {name}: built {out} (--format {formats}) in {time.perf_counter() - started:.1f} s", flush=True)
    return outs


def arrayrecord_files(out: Path) -> list[str]:
    """The split's ``.array_record`` shards of ``out``, in the manifest's order."""
    from shardkit.output.found import load_output

    split = load_output(str(out)).manifest.splits[SPLIT]
    return [str(out / shard.file("arrayrecord").name) for shard in split.shards]


def image_data(args: argparse.Namespace) -> dict[str, Path]:
    import bench

    root = bench.make_data(args.data / f"images-{args.images}", args.images)
    features = {
        "image": {"kind": "image", "column": 0, "encoding": "jpeg", "quality": bench.QUALITY},
        "mask": {"kind": "mask", "column": 1},
    }
    config = {"features": features, "augment": {"copies": 1, "pipeline": bench.PIPELINE}}
    return build(args, f"images-{args.images}-out", [str(root / "classic")], config)


def row_data(args: argparse.Namespace) -> dict[str, Path]:
    from bench_tables import make_table

    folder = args.data / f"rows-{args.rows}"
    make_table(folder, args.rows)
    config = yaml.safe_load((folder / "table.yaml").read_text())
    return build(args, f"rows-{args.rows}-out", [str(folder / "train.parquet")], config)


# ----------------------------------------------------------------------------- contenders
def baseline_dataset(files: list[str]) -> Any:
    """(a): what the Grain docs lead a user to write over ArrayRecord files of tf.train.Examples."""
    import grain
    import tensorflow as tf
    from array_record.python import array_record_data_source

    def parse(record: bytes) -> dict[str, np.ndarray]:
        features = tf.train.Example.FromString(record).features.feature
        return {key: np.asarray(getattr(value, str(value.WhichOneof("kind"))).value) for key, value in features.items()}

    return grain.MapDataset.source(array_record_data_source.ArrayRecordDataSource(files)).shuffle(seed=0).map(parse)


def shardkit_dataset(out: Path) -> Any:
    """(b) and (c): ShardReader as Grain's source, nothing else."""
    import grain

    from shardkit.reader import ShardReader

    return grain.MapDataset.source(ShardReader(str(out), SPLIT)).shuffle(seed=0)


class ConstantSource:
    """The floor's source: ``length`` elements, each the same prebuilt dict (no reading, no decoding)."""

    def __init__(self, length: int, record: dict[str, Any]) -> None:
        self._length = length
        self._record = record

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self._record


def floor_dataset(out: Path) -> Any:
    """floor: Grain's own cost of each element, a source that does nothing yielding ShardReader's record 0."""
    import grain

    from shardkit.reader import ShardReader

    reader = ShardReader(str(out), SPLIT)
    return grain.MapDataset.source(ConstantSource(len(reader), reader[0])).shuffle(seed=0)


def timed(dataset: Any, mode: str, count: int) -> float:
    """Records/s over ``count`` records read in ``mode`` (passes over the split again where it is smaller), from
    the first record (set-up excluded) to the last."""
    length = len(dataset)
    if mode == "index":  # Grain's random access, one thread: the source's cost and Grain's per-element bookkeeping
        dataset[0]
        started = time.perf_counter()
        for i in range(1, count):
            dataset[i % length]
        return (count - 1) / (time.perf_counter() - started)
    each = BATCH if mode == "batch" else 1
    source = dataset.batch(BATCH) if mode == "batch" else dataset
    iterator: Iterator[Any] = iter(source)
    next(iterator)
    started = time.perf_counter()
    read = each
    while read < count:
        for _ in iterator:
            read += each
            if read >= count:
                break
        else:
            iterator = iter(source)  # the next pass
    return (read - each) / (time.perf_counter() - started)


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A baseline dict (NumPy arrays of each value list) against a ShardReader record, key by key."""
    for key, want in a.items():
        got = b.get(key)
        if want.dtype.kind == "S":
            got_list = [got] if isinstance(got, bytes) else [got.encode()] if isinstance(got, str) else None
            if got_list is None or [bytes(x) for x in want.tolist()] != got_list:
                return False
        elif not np.array_equal(np.asarray(got).reshape(-1), want.reshape(-1).astype(np.asarray(got).dtype)):
            return False
    return True


def bench(name: str, outs: dict[str, Path], rounds: int, count: int, modes: list[str]) -> None:
    from shardkit.reader import ShardReader

    files = arrayrecord_files(outs["both"])
    total = len(ShardReader(str(outs["both"]), SPLIT))
    contenders: dict[str, Callable[[], Any]] = {
        "baseline": lambda: baseline_dataset(files),
        "tfrecord": lambda: shardkit_dataset(outs["both"]),
        "arrayrecord": lambda: shardkit_dataset(outs["arrayrecord-only"]),
        "floor": lambda: floor_dataset(outs["both"]),
    }
    names = {
        "baseline": "(a) ArrayRecordDataSource + Example.FromString + NumPy dict, .shuffle(seed=0).map(parse)",
        "tfrecord": "(b) MapDataset.source(ShardReader(OUT, split)).shuffle(seed=0), TFRecord + .idx",
        "arrayrecord": "(c) MapDataset.source(ShardReader(OUT, split)).shuffle(seed=0), ArrayRecord",
        "floor": "floor: MapDataset.source(a constant dict).shuffle(seed=0), no reading",
    }
    print(f"\n# {name}: {SPLIT} has {total:,} records in {len(files)} shards; {count:,} read a round", flush=True)
    for mode in modes:
        rates: dict[str, list[float]] = {who: [] for who in contenders}
        for round_ in range(rounds):
            for who in list(contenders)[:: -1 if round_ % 2 else 1]:
                rates[who].append(timed(contenders[who](), mode, count))
            print(
                f"{mode} round {round_ + 1}: " + "   ".join(f"{who} {rates[who][-1]:8,.0f}" for who in contenders) + " records/s",
                flush=True,
            )
        medians = {who: statistics.median(r) for who, r in rates.items()}
        print(f"\n{name}: {MODES[mode]}, median of {rounds}; load average now {os.getloadavg()[0]:.2f}")
        print(f"{'':92} {'records/s':>10} {'us/record':>10}")
        for who, label in names.items():
            print(f"{label:92} {medians[who]:10,.0f} {1e6 / medians[who]:10.2f}")
        base = medians["baseline"]
        print(
            f"{mode}: (b) / (a) {medians['tfrecord'] / base:.2f}x, (c) / (a) {medians['arrayrecord'] / base:.2f}x "
            f"records/s (target >= 1.5x); the floor's bound {medians['floor'] / base:.2f}x\n",
            flush=True,
        )
    checked = 0
    firsts = [itertools.islice(iter(contenders[who]()), 50) for who in ("baseline", "tfrecord", "arrayrecord")]
    for a, b, c in zip(*firsts, strict=True):
        for who, got in (("(b) TFRecord", b), ("(c) ArrayRecord", c)):
            if not same_values(a, got):
                sys.exit(f"{name}: record {checked} of the shuffle differs: baseline {a!r:.300} {who} {got!r:.300}")
        checked += 1
    print(f"check: the first {checked} records of the shuffle hold the same values in (a), (b) and (c)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000, help="seed-like images (bench.py's default, 2000)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="table rows (the issue: 1,000,000)")
    parser.add_argument("--records", type=int, default=10_000, help="records read a round, each way (passing over a smaller split again)")
    parser.add_argument("--only", choices=("images", "rows"), help="run one of the two datasets")
    parser.add_argument("--modes", default=",".join(MODES), help=f"a comma list of the ways to read (default: {','.join(MODES)})")
    parser.add_argument("--rounds", type=int, default=3, help="each contender runs this many times, alternating; medians are printed")
    parser.add_argument("--workers", type=int, default=2, help="the builds' -w")
    parser.add_argument("--reuse", action="store_true", help="read the builds of an earlier run again")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardkit-bench-grain"), help="where data and builds are kept")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"--modes: no way {', '.join(sorted(unknown))} (ways: {', '.join(MODES)})")
    args.data = args.data.resolve()
    args.data.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    load = os.getloadavg()
    print(f"# {os.cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    datasets = {"images": image_data, "rows": row_data}
    for name, make in datasets.items():
        if args.only in (None, name):
            outs = make(args)
            what = f"{args.images:,} seed-like images + masks, augmented" if name == "images" else f"{args.rows:,} table rows"
            bench(what, outs, args.rounds, args.records, modes)
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
