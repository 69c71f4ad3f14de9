"""Rounds, the figures' table and the output checks that scripts/bench_tables.py runs each benchmark with.

Each contender is a command; a round runs every contender once (the order reversed every other round),
each measured by ``process_tree.measured`` (wall time, CPU seconds of all its processes, the peak RSS
of each process). The first contender named ``shardkit`` is the one compared against the others.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from process_tree import measured


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
    """Print the figures' table (medians; best wall time too, the issue quotes best of 2); return each
    contender's median wall time."""
    print(f"\n{title:78} {'wall s':>8} {'best s':>8} {'CPU s':>8} {unit:>10} {'us/item':>8} {'largest MB':>11}")
    walls = {}
    for who, name in names.items():
        walls[who] = statistics.median(r["seconds"] for r in runs[who])
        best = min(r["seconds"] for r in runs[who])
        cpu = statistics.median(r["cpu_seconds"] for r in runs[who])
        peak = max(largest_mb(r) for r in runs[who])
        print(f"{name:78} {walls[who]:8.2f} {best:8.2f} {cpu:8.2f} {items / walls[who]:10,.0f} "
              f"{walls[who] / items * 1e6:8.2f} {peak:11.0f}")  # fmt: skip
    build = max(runs["shardkit"], key=largest_mb)
    print(f"shardkit's peak RSS: parent {build['parent_mb']:.0f} MB, its {len(build['children_mb'])} processes "
          f"{', '.join(map(str, build['children_mb']))} MB (the round with the largest)")  # fmt: skip
    return walls


def ratios(walls: dict[str, float], names: dict[str, str], targets: dict[str, str]) -> None:
    """baseline / shardkit median wall time for each baseline (the same as shardkit's items/s over the
    baseline's), followed by ``targets[baseline]`` where it names one."""
    for who, name in names.items():
        if who != "shardkit":
            target = f" ({targets[who]})" if who in targets else ""
            print(f"{name.split(')')[0]}) / shardkit wall time: {walls[who] / walls['shardkit']:.2f}x{target}")


def shard_files(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.glob("*.tfrecord"))]


def example_features(record: bytes) -> dict[str, list[Any]]:
    """A tf.train.Example's features as lists of values, decoded by TensorFlow."""
    import tensorflow as tf

    example = tf.train.Example.FromString(record)
    return {key: list(getattr(value, str(value.WhichOneof("kind"))).value) for key, value in example.features.feature.items()}


def checked(outputs: dict[str, Path], expected: int, sample: Callable[[str, int, bytes], bool]) -> str:
    """The record counts of every output (walking the framing), and the first records of the first and last
    file of each read back by TensorFlow (which checks the framing's CRCs), checked by
    ``sample(who, position in its file, record bytes)``."""
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
                if not sample(who, position, record.numpy()):
                    sys.exit(f"record {position} of {path} ({who}) does not match its source: {record.numpy()[:200]!r}")
                decoded += 1
    return f"check: {expected:,} records in each output; {decoded} records read back with TensorFlow match their source"
