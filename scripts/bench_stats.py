"""shardkit's statistics against TFDV's on the same shards, and ``shardkit stats FILE...`` against
TFDV's ``generate_statistics_from_tfrecord`` in wall time (issue 35, "Against TFDV").

    bash scripts/tfdv_env.sh                                 # TFDV in its own env, once
    python scripts/bench_stats.py                            # the comparison, and the timing on 1M records
    python scripts/bench_stats.py --records 0                # the comparison only (what the slow test runs)

1. Builds two small sets with shardkit: an image set (JPEG pictures, a class label, a float, an
   int64 with zeros, a text, a list of tags) from a JSONL index, and a Parquet table
   (``configs/table-rows.yaml``), each into train and val/test shards.
2. Runs TFDV on each split's shards in its own environment (``scripts/tfdv_stats.py`` under
   ``$TFDV_PYTHON``, default /work/tfdv-venv/bin/python), and ``shardkit stats`` on the same files.
3. Compares the build's ``OUT/statistics.pb`` and ``shardkit stats``' proto with TFDV's, split by
   split and feature (``stats_compare``: counts, missing, min, max, mean, std, zeros, top values,
   quantiles against the true values within the stated rank error), and prints every difference.
4. With ``--records N`` (default 1,000,000): a table of N rows built into shards, then
   ``shardkit stats`` (1 and 2 workers) and TFDV (Beam's DirectRunner, its default: one worker)
   on those files in the same run, each timed as a whole process; the ratio, and the comparison.

Exits 1 when any statistic differs. Data goes under --data (default /work/bench-data/stats).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from process_tree import ROOT, measured
from stats_compare import Difference, compare, features_of

import shardkit
from shardkit.demo import make_table

TABLE_CONFIG = ROOT / "configs" / "table-rows.yaml"
TFDV_PYTHON = os.environ.get("TFDV_PYTHON", "/work/tfdv-venv/bin/python")
IMAGE_CONFIG = """features:
  image: {kind: image, column: image, encoding: jpeg, quality: 95}
  label: {kind: class_name, column: label}
  score: {kind: float, column: score}
  size: {kind: int64, column: size}
  note: {kind: string, column: note}
  tags: {kind: string, column: tags}
"""


def make_images(root: Path, per_class: int, seed: int = 0) -> list[Path]:
    """JPEGs of three classes and a JSONL index per split (``json.dumps`` a line; ``tags`` a list)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    indexes = []
    for split, count in (("train", per_class), ("val", max(2, per_class // 4))):
        lines = []
        for cls in ("cat", "dog", "fox"):
            for i in range(count):
                name = f"images/{split}-{cls}-{i:04d}.jpg"
                size = (int(rng.integers(40, 90)), int(rng.integers(40, 90)))
                pixels = rng.normal(rng.uniform(60, 190, 3), 25, (size[1], size[0], 3))
                Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(root / name, quality=90)
                row = {
                    "image": name,
                    "label": cls,
                    "score": 0.0 if i % 5 == 0 else round(float(rng.normal(2, 3)), 4),
                    "size": int(rng.integers(0, 4)) * 10,
                    "note": str(rng.choice(["red", "green", "blue", "é"])),
                    "tags": [f"t{j}" for j in range(int(rng.integers(0, 4)))],
                }
                lines.append(json.dumps(row))
        path = root / f"{split}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        indexes.append(path)
    return indexes


def built(out: Path, inputs: list[Path], config: str | Path) -> Path:
    if not (out / "manifest.json").exists():
        shardkit.build(inputs, out, config=config, workers=2, progress=False, overwrite=True)
    return out


def split_files(out: Path) -> dict[str, list[str]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return {split: [str(out / s["name"]) for s in entry["shards"]] for split, entry in manifest["splits"].items()}


def run_tfdv(output: Path, runs: dict[str, str]) -> dict[str, Any]:
    """TFDV in one process on each NAME's files (a glob), timed as a whole and call by call."""
    run = measured([TFDV_PYTHON, str(ROOT / "scripts" / "tfdv_stats.py"), str(output), *(f"{k}={v}" for k, v in runs.items())])
    lines = [line for line in run["output"].splitlines() if line.startswith("{")]
    return run | {"tfdv": json.loads(lines[-1])}


def run_stats(files: list[str], output: Path, workers: int) -> dict[str, Any]:
    return measured([sys.executable, "-m", "shardkit.cli", "stats", *files, "--workers", str(workers), "--output", str(output)])


def load(path: Path) -> Any:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    return statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())


def truth(files: list[str], tfdv_dataset: Any) -> dict[str, np.ndarray]:
    """Every value of each numeric feature, sorted, read back by TensorFlow."""
    import tensorflow as tf

    numeric = {
        name: (tf.int64 if f.type == f.INT else tf.float32) for name, f in features_of(tfdv_dataset).items() if f.HasField("num_stats")
    }
    if not numeric:
        return {}
    spec = {name: tf.io.VarLenFeature(dtype) for name, dtype in numeric.items()}
    found: dict[str, list[np.ndarray]] = {name: [] for name in numeric}
    for batch in tf.data.TFRecordDataset(files).batch(65536):
        parsed = tf.io.parse_example(batch, spec)
        for name in numeric:
            found[name].append(parsed[name].values.numpy().astype(np.float64))
    return {name: np.sort(np.concatenate(parts)) for name, parts in found.items()}


def report(title: str, differences: list[Difference], notes: list[str]) -> None:
    print(f"\n{title}: {len(differences)} difference{'s' if len(differences) != 1 else ''}")
    for note in notes:
        print(f"  {note}")
    if differences:
        print(f"  {'split':10} {'feature':24} {'field':28} {'shardkit':>22} {'TFDV':>22}")
        for difference in differences:
            print("  " + difference.row())


def comparisons(data: Path, per_class: int, rows: int) -> list[Difference]:
    """Both small builds against TFDV: the build's statistics and ``shardkit stats`` on its files."""
    images = data / "images"
    config = data / "images.yaml"
    data.mkdir(parents=True, exist_ok=True)
    config.write_text(IMAGE_CONFIG)
    if not (images / "train.jsonl").exists():
        make_images(images, per_class)
    table = data / f"table-{rows}"
    if not (table / "train.parquet").exists():
        make_table(table, rows=rows)
    builds = {
        "images": built(data / "images-out", [images / "train.jsonl", images / "val.jsonl"], config),
        "table": built(data / f"table-{rows}-out", [table / "train.parquet", table / "test.parquet"], ROOT / "configs" / "table-rows.yaml"),
    }
    splits = {title: split_files(out) for title, out in builds.items()}
    runs = {f"{title}/{split}": f"{builds[title]}/{split}-*.tfrecord" for title in builds for split in splits[title]}
    tfdv = run_tfdv(data / "tfdv.pb", runs)
    print(f"TFDV {tfdv['tfdv']['tfdv']}: {tfdv['tfdv']['examples']}")
    everything = load(data / "tfdv.pb")
    found: list[Difference] = []
    for title, out in builds.items():
        theirs = type(everything)()
        for dataset in everything.datasets:
            if dataset.name.startswith(title + "/"):
                theirs.datasets.add().CopyFrom(dataset)
                theirs.datasets[-1].name = dataset.name[len(title) + 1 :]
        truths = {d.name: truth(splits[title][d.name], d) for d in theirs.datasets}
        differences, notes = compare(load(out / "statistics.pb"), theirs, truths)
        report(f"{title}: OUT/statistics.pb against TFDV", differences, notes)
        found += differences
        for dataset in theirs.datasets:  # the same files, read as foreign ones
            mine = shardkit.stats(splits[title][dataset.name], workers=1).proto
            one = type(theirs)()
            one.datasets.add().CopyFrom(dataset)
            differences, notes = compare(mine, one, {mine.datasets[0].name: truths[dataset.name]})
            report(f"{title}: shardkit stats {dataset.name} files against TFDV", differences, notes)
            found += differences
    return found


def timing(data: Path, records: int) -> list[Difference]:
    """``shardkit stats`` and TFDV on the same N records, in one run."""
    table = data / f"table-{records}"
    if not (table / "train.parquet").exists():
        make_table(table, rows=records)
    out = built(data / f"table-{records}-train", [table / "train.parquet"], TABLE_CONFIG)
    files = split_files(out)["train"]
    size = sum(os.path.getsize(f) for f in files)
    print(f"\ntiming: {records:,} records in {len(files)} TFRecord files, {size / 1e6:,.0f} MB (a Parquet table built by shardkit)")
    ours = {workers: run_stats(files, out / f"stats-w{workers}.pb", workers) for workers in (1, 2)}
    tfdv = run_tfdv(out / "tfdv.pb", {"train": f"{out}/train-*.tfrecord"})
    call = tfdv["tfdv"]["total_seconds"]
    print(f"{'':44} {'wall s':>8} {'CPU s':>8} {'records/s':>11} {'peak MB':>8}")
    rows = [(f"shardkit stats -w {w}", run) for w, run in ours.items()] + [("TFDV generate_statistics_from_tfrecord", tfdv)]
    for name, run in rows:
        peak = max(run["parent_mb"], run["child_mb"])
        print(f"{name:44} {run['seconds']:8.2f} {run['cpu_seconds']:8.2f} {records / run['seconds']:11,.0f} {peak:8.0f}")
    print(f"TFDV's generate_statistics_from_tfrecord call alone (imports excluded): {call:.2f} s")
    for w, run in ours.items():
        print(f"TFDV (whole process) / shardkit stats -w {w}: {tfdv['seconds'] / run['seconds']:.1f}x (target >= 5x); "
              f"TFDV's call alone / shardkit stats -w {w}: {call / run['seconds']:.1f}x")  # fmt: skip
    theirs = load(out / "tfdv.pb")
    mine = load(out / "stats-w2.pb")
    differences, notes = compare(mine, theirs, {mine.datasets[0].name: truth(files, theirs.datasets[0])})
    report(f"timing set: shardkit stats against TFDV on {records:,} records", differences, notes)
    return differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data/stats"))
    parser.add_argument("--records", type=int, default=1_000_000, help="records of the timing run (0: none)")
    parser.add_argument("--per-class", type=int, default=40, help="images of each of 3 classes in train (val: a quarter)")
    parser.add_argument("--rows", type=int, default=4000, help="table rows in train (test: a quarter)")
    parser.add_argument("--fresh", action="store_true", help="make the data again")
    args = parser.parse_args()
    if not Path(TFDV_PYTHON).exists():
        print(f"no TFDV environment at {TFDV_PYTHON}: run bash scripts/tfdv_env.sh (or set TFDV_PYTHON)", file=sys.stderr)
        return 2
    if args.fresh:
        shutil.rmtree(args.data, ignore_errors=True)
    found = comparisons(args.data, args.per_class, args.rows)
    if args.records:
        found += timing(args.data, args.records)
    print(f"\n{len(found)} difference{'s' if len(found) != 1 else ''} from TFDV in all")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
