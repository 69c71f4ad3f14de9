#!/usr/bin/env python3
"""What statistics and ``--duplicates report`` cost a build (issue 35): this tree against the tree
before statistics existed, same data, one run.

    python scripts/bench_stats_cost.py [--images 1200] [--rows 1000000] [--rounds 3] [--workers 2]
                                       [--baseline-tree DIR | --baseline-commit 3237704]
                                       [--only seed,table,micro] [--one-blas-thread] [--data /work/bench-data/costbench]

seed:  the seed-like augmented segmentation build of scripts/bench.py's "(c) shardkit" (its
       make_data: --images 640x480 JPEG crops of scikit-image's photographs with PNG masks, index
       files train/val/test 70/15/15 %; one augmented copy each of flip + random sized crop +
       brightness/contrast, JPEG q95 + PNG mask), `shardkit build DATA/classic -c seed.yaml -w W`,
       three contenders: (b) the baseline tree, (s) this tree (statistics always on), (d) this
       tree with `--duplicates report`.
       Targets: (s) / (b) within 1.05x; (d) / (s) within 1.15x.
table: scripts/bench_tables.py's 1,000,000-row Parquet table (its make_table, reused where --table
       already holds it), `shardkit build train.parquet -c table.yaml -w W`: (b) the baseline tree
       against (s) this tree. Target: (s) / (b) within 1.05x. --one-blas-thread adds (s1), this tree
       with OPENBLAS_NUM_THREADS=1: a numbers' batch's moments take a BLAS dot product, which
       OpenBLAS spreads over its threads past about 10,000 values, waking them on every batch.
micro: the wall and CPU seconds of importing the shard worker's module in a fresh process, each
       tree (what every build pays once), and the packages only this tree imports; in this
       process, ms per 640x480x3 picture (the first seed image decoded) of the per-record
       hooks against a JPEG q95 encode of the same array (what a worker spends on it anyway), best
       of 7 x 40: the pixel histogram, the whole picture hook, one record's ``ShardStatistics.add``
       (a real record's features), the perceptual hash and the byte digest; then every hook's
       seconds summed over a whole --workers 1 seed build (inline, hooks wrapped with timers)
       against its wall time, and the table's hooks over an inline build of the table.

Each contender is a child process `env -C TREE PYTHONPATH=TREE python -m shardkit.cli build ...`
(run in its tree: `-m` puts the working directory first on the path), measured by
process_tree.measured (wall time, CPU seconds of every process, peak RSS); each round runs them
all, the order reversed every other round (bench_common.rounds). Printed: each round's times and
its paired ratios, the medians of wall and CPU seconds, and the ratios of the medians with their
targets. CPU seconds are the steadier figure on a shared machine: a build's CPU time moves less
with other processes' load than its wall time does. The load average is printed before and after
each benchmark. The outputs are checked: the same record count everywhere, statistics.pb written
by this tree only, duplicates.jsonl with the flag only, and whether the shards' bytes are equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import PIPELINE, QUALITY, make_data
from bench_common import rounds
from bench_tables import make_table
from process_tree import ROOT

BASELINE_COMMIT = "3237704"  # the commit before "Statistics core:" (e1cccb9)
NAMES = {
    "baseline": "(b) baseline tree, no statistics",
    "shardkit": "(s) this tree, statistics",
    "duplicates": "(d) this tree, statistics + --duplicates report",
    "blas1": "(s1) this tree, statistics, OPENBLAS_NUM_THREADS=1",
}
ONE_BLAS_THREAD = ("OPENBLAS_NUM_THREADS=1",)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def baseline_tree(args: argparse.Namespace) -> Path:
    """--baseline-tree, or --baseline-commit's files extracted under --data once (git archive: no worktree)."""
    if args.baseline_tree is not None:
        return Path(args.baseline_tree).resolve()
    tree = args.data / f"baseline-{args.baseline_commit}"
    if not (tree / "shardkit" / "__init__.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline_commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def build_command(tree: Path, inputs: Path, out: Path, config: Path, workers: int, *extra: str, env: tuple[str, ...] = ()) -> list[str]:
    python = [f"PYTHONPATH={tree}", *env, sys.executable, "-m", "shardkit.cli"]
    return ["env", "-C", str(tree), *python, "build", str(inputs), "-o", str(out), "-c", str(config), "-w", str(workers), "-q", *extra]


def imported_from(tree: Path) -> str:
    """Which shardkit a contender's child imports: its tree's, checked before timing anything."""
    found = subprocess.run(
        ["env", "-C", str(tree), f"PYTHONPATH={tree}", sys.executable, "-c", "import shardkit; print(shardkit.__file__)"],
        check=True, capture_output=True, text=True, cwd=ROOT,
    ).stdout.strip()  # fmt: skip
    if not found.startswith(str(tree)):
        sys.exit(f"a child with PYTHONPATH={tree} imports {found}")
    return found


def shard_digests(folder: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.tfrecord"))]


def check(outputs: dict[str, Path], expected: int | None) -> str:
    """The same record count in every output, statistics.pb and duplicates.jsonl where they belong,
    and whether the shards' bytes equal the baseline's."""
    import shardkit

    lines = []
    counts = {
        who: sum(f["records"] for f in shardkit.count_records([str(p) for p in sorted(o.rglob("*.tfrecord"))]))
        for who, o in outputs.items()
    }
    if len(set(counts.values())) != 1 or (expected is not None and counts["baseline"] != expected):
        sys.exit(f"record counts differ: {counts} (expected {expected})")
    lines.append(f"{next(iter(counts.values())):,} records in each output")
    for who, out in outputs.items():
        stats, dups = (out / "statistics.pb").exists(), (out / "duplicates.jsonl").exists()
        if stats != (who != "baseline") or dups != (who == "duplicates"):
            sys.exit(f"{who}: statistics.pb {'' if stats else 'not '}written, duplicates.jsonl {'' if dups else 'not '}written")
    if "duplicates" in outputs:
        found = json.loads((outputs["duplicates"] / "manifest.json").read_text()).get("duplicates", {})
        lines.append(f"--duplicates report: {found.get('groups')} groups, {found.get('line', '')!r}")
    base = shard_digests(outputs["baseline"])
    same = {who: shard_digests(o) == base for who, o in outputs.items() if who != "baseline"}
    lines.append("shards byte for byte the baseline's: " + ", ".join(f"{who} {'yes' if s else 'NO'}" for who, s in same.items()))
    return "check: " + "; ".join(lines)


def report(title: str, runs: dict[str, list[dict[str, Any]]], items: int, pairs: dict[tuple[str, str], str]) -> None:
    """Medians per contender; per round and of the medians, wall and CPU ratios with their targets."""
    print(f"\n{title:58} {'wall s':>8} {'CPU s':>8} {'us/item':>8} {'largest MB':>11}   rounds' wall s")
    med: dict[str, tuple[float, float]] = {}
    for who, done in runs.items():
        wall, cpu = statistics.median(r["seconds"] for r in done), statistics.median(r["cpu_seconds"] for r in done)
        med[who] = (wall, cpu)
        peak = max(max(r["parent_mb"], r["child_mb"]) for r in done)
        each = " ".join(f"{r['seconds']:.2f}" for r in done)
        print(f"{NAMES[who]:58} {wall:8.2f} {cpu:8.2f} {wall / items * 1e6:8.1f} {peak:11.0f}   {each}")
    for (top, bottom), target in pairs.items():
        paired_wall = " ".join(f"{a['seconds'] / b['seconds']:.3f}" for a, b in zip(runs[top], runs[bottom], strict=True))
        paired_cpu = " ".join(f"{a['cpu_seconds'] / b['cpu_seconds']:.3f}" for a, b in zip(runs[top], runs[bottom], strict=True))
        wall, cpu = med[top][0] / med[bottom][0], med[top][1] / med[bottom][1]
        a, b = NAMES[top].split()[0], NAMES[bottom].split()[0]
        print(f"{a} / {b}: wall {wall:.3f}x, CPU {cpu:.3f}x ({target}); rounds, paired: wall {paired_wall}; CPU {paired_cpu}")


def bench_seed(args: argparse.Namespace, base: Path) -> None:
    root = make_data(args.data / f"images-{args.images}", args.images)
    features = {"image": {"kind": "image", "column": 0, "encoding": "jpeg", "quality": QUALITY}, "mask": {"kind": "mask", "column": 1}}
    config = args.data / "seed.yaml"
    config.write_text(json.dumps({"features": features, "augment": {"copies": 1, "pipeline": PIPELINE}}))  # JSON is YAML
    for path in root.rglob("*"):  # warm the page cache: every contender reads from memory
        if path.is_file():
            path.read_bytes()
    outputs = {who: args.out / f"seed-{who}" for who in ("baseline", "shardkit", "duplicates")}
    commands = {
        "baseline": build_command(base, root / "classic", outputs["baseline"], config, args.workers),
        "shardkit": build_command(ROOT, root / "classic", outputs["shardkit"], config, args.workers),
        "duplicates": build_command(ROOT, root / "classic", outputs["duplicates"], config, args.workers, "--duplicates", "report"),
    }
    print(
        f"\n# seed: {args.images} images 640x480 + masks in {root}, one augmented copy each, -w {args.workers}; load {load()}", flush=True
    )
    runs = rounds(commands, outputs, args.rounds)
    pairs = {("shardkit", "baseline"): "target <= 1.05x", ("duplicates", "shardkit"): "target <= 1.15x"}
    report(f"seed: {args.images:,} images, median of {args.rounds}", runs, args.images, pairs)
    print(check(outputs, args.images))
    print(f"# load average after: {load()}", flush=True)


def bench_table(args: argparse.Namespace, base: Path) -> None:
    make_table(args.table, args.rows)
    source = args.table / "train.parquet"
    outputs = {who: args.out / f"table-{who}" for who in ("baseline", "shardkit", *(["blas1"] if args.one_blas_thread else []))}
    commands = {
        who: build_command(
            base if who == "baseline" else ROOT, source, outputs[who], args.table / "table.yaml", args.workers,
            env=ONE_BLAS_THREAD if who == "blas1" else (),
        )
        for who in outputs
    }  # fmt: skip
    source.read_bytes()
    print(f"\n# table: {source} ({source.stat().st_size / 1e6:.0f} MB), -w {args.workers}; load {load()}", flush=True)
    runs = rounds(commands, outputs, args.rounds)
    pairs = {("shardkit", "baseline"): "target <= 1.05x"} | ({("blas1", "baseline"): "diagnosis"} if args.one_blas_thread else {})
    report(f"table: {args.rows:,} rows x 10 columns, median of {args.rounds}", runs, args.rows, pairs)
    print(check(outputs, None))
    print(f"# load average after: {load()}", flush=True)


def best_ms(work: Callable[[], object], number: int = 40) -> float:
    return min(timeit.repeat(work, number=number, repeat=7)) / number * 1e3


def timed_hooks(targets: dict[str, tuple[Any, str]]) -> tuple[dict[str, list[float]], Callable[[], None]]:
    """Wrap each ``(owner, attribute)`` with timers summing its [wall, CPU] seconds (CPU: this
    thread's, which a busy machine moves less); the sums and an undo."""
    spent = {label: [0.0, 0.0] for label in targets}
    saved = []
    for label, (owner, name) in targets.items():
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def wrapper(*a: Any, _original: Any = original, _label: str = label, **k: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return _original(*a, **k)
            finally:
                spent[_label][0] += time.perf_counter() - started
                spent[_label][1] += time.thread_time() - cpu

        setattr(owner, name, wrapper)

    def undo() -> None:
        for owner, name, original in saved:
            setattr(owner, name, original)

    return spent, undo


def timed_build(build: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (this process's) of an inline build."""
    started, cpu = time.perf_counter(), time.process_time()
    build()
    return time.perf_counter() - started, time.process_time() - cpu


def hook_lines(
    title: str, hooks: dict[str, Any], builds: dict[str, tuple[tuple[float, float], dict[str, list[float]]]], items: int
) -> None:
    """Each hook's wall and CPU seconds in each build, its share of the build's, and its CPU ms an item."""
    print(f"\n# {title}")
    heads = "".join(f"{name:>34}" for name in builds)
    print(f"  {'':60}{heads}   CPU an item")
    print(f"  {'the build: wall s / CPU s':60}" + "".join(f"{w:16.2f} {c:16.2f} " for (w, c), _ in builds.values()))
    for name in hooks:
        cells = "".join(
            f"{t[name][0]:8.3f} {t[name][0] / w:6.1%} {t[name][1]:8.3f} {t[name][1] / c:6.1%}  " for (w, c), t in builds.values()
        )
        most = max(t[name][1] for _, t in builds.values())
        print(f"  {name:60}{cells} {most / items * 1e6:8.2f} us")


def bench_micro(args: argparse.Namespace) -> None:
    import numpy as np

    import shardkit
    from shardkit.duplicates.phash import digest, phash
    from shardkit.formats import image_codec
    from shardkit.pipeline.config import parse_config
    from shardkit.pipeline.shard import fingerprints
    from shardkit.pipeline.state import duplicate_report
    from shardkit.pipeline.state import manifest as manifest_state
    from shardkit.statistics.feature_stats import pixel_count
    from shardkit.statistics.shard_statistics import ShardStatistics

    root = make_data(args.data / f"images-{args.images}", args.images)
    data = (root / "images" / "000000.jpg").read_bytes()
    picture = image_codec.decode(data, "RGB")
    assert picture.shape == (480, 640, 3) and picture.dtype == np.uint8, picture.shape
    features = {"image": {"kind": "image", "column": 0, "encoding": "jpeg", "quality": QUALITY}, "mask": {"kind": "mask", "column": 1}}
    config = parse_config({"features": features, "augment": {"copies": 1, "pipeline": PIPELINE}})

    # Whole builds, inline (--workers 1), every hook wrapped with a timer; the last record's features kept.
    Stats = ShardStatistics
    hooks = {
        "ShardStatistics.add (a record's values, flushes included)": (Stats, "add"),
        "ShardStatistics.picture (histogram + counts)": (Stats, "picture"),
        "ShardStatistics.to_data (the shard's part, last flush)": (Stats, "to_data"),
        "write_statistics (parent: merge + statistics.pb)": (manifest_state, "write_statistics"),
        "Fingerprints.add (phash + digest)": (fingerprints.Fingerprints, "add"),
        "duplicate_report.search (parent: the search)": (duplicate_report, "search"),
    }
    kept: list[Any] = []
    original_add = Stats.add
    Stats.add = lambda self, f: (kept.__setitem__(slice(None), [f]), original_add(self, f))[1]  # type: ignore[method-assign]
    spent, undo = timed_hooks(hooks)
    builds = {}
    out = args.out / "micro-build"
    try:
        for flag in (None, "report"):
            shutil.rmtree(out, ignore_errors=True)
            for sums in spent.values():
                sums[:] = [0.0, 0.0]
            times = timed_build(
                lambda f=flag: shardkit.build([root / "classic"], out, config=config, workers=1, progress=False, duplicates=f)
            )
            builds["without --duplicates" if flag is None else "with --duplicates report"] = (times, {k: list(v) for k, v in spent.items()})
    finally:
        undo()
        Stats.add = original_add  # type: ignore[method-assign]
    record = kept[0]

    roles = {"image": "picture", "mask": "picture"}
    fresh = ShardStatistics(roles)
    encoded = image_codec.encode(picture, "jpeg", QUALITY)
    print(f"\n# micro: ms per 640x480x3 picture (first seed image), best of 7 x 40, in this process; load {load()}")
    rows = {
        "JPEG encode q95 (image_codec.encode: what the worker spends anyway)": lambda: image_codec.encode(picture, "jpeg", QUALITY),
        "JPEG decode (image_codec.decode)": lambda: image_codec.decode(data, "RGB"),
        "pixel count (cv2.meanStdDev + calcHist of every 4th row)": lambda: pixel_count(picture),
        "ShardStatistics.picture (histogram + add to the counts)": lambda: fresh.picture("image", "jpeg", picture),
        "ShardStatistics.add of one seed record's features": lambda: fresh.add(record),
        "perceptual hash (shardkit.duplicates.phash.phash)": lambda: phash(picture),
        "BLAKE2b digest of the JPEG file": lambda: digest(data),
    }
    encode_ms = 0.0
    for name, work in rows.items():
        ms = best_ms(work)
        encode_ms = encode_ms or ms
        print(f"  {name:72} {ms:7.3f} ms  {ms / encode_ms:6.1%} of the encode")
    print(f"  (the record's features: {', '.join(f'{k}: {w} x{len(v)}' for k, (w, v) in record.items())}; JPEG {len(encoded):,} bytes)")
    title = f"each hook's wall s, share, CPU s, share over an inline --workers 1 build of {args.images} images (a record each)"
    hook_lines(title, hooks, builds, args.images)


def bench_micro_table(args: argparse.Namespace) -> None:
    """The table's hooks over an inline (--workers 1) build of it: a batch's columns, the shard's part, the parent's merge."""
    import shardkit
    from shardkit.pipeline.config import load_config
    from shardkit.pipeline.state import manifest as manifest_state
    from shardkit.statistics import sketches
    from shardkit.statistics.shard_statistics import ShardStatistics

    make_table(args.table, args.rows)
    hooks = {
        "ShardStatistics.columns (a batch's Arrow columns)": (ShardStatistics, "columns"),
        "  of which Moments.of (a batch's mean and M2: a BLAS dot)": (sketches.Moments, "of"),
        "  of which Quantiles.update (KLL, values and list lengths)": (sketches.Quantiles, "update"),
        "  of which Distinct.add_array (distinct and top strings)": (sketches.Distinct, "add_array"),
        "ShardStatistics.to_data (the shard's part)": (ShardStatistics, "to_data"),
        "write_statistics (parent: merge + statistics.pb)": (manifest_state, "write_statistics"),
    }
    spent, undo = timed_hooks(hooks)
    out = args.out / "micro-table"
    config = load_config(args.table / "table.yaml")
    try:
        times = timed_build(lambda: shardkit.build([args.table / "train.parquet"], out, config=config, workers=1, progress=False))
    finally:
        undo()
        shutil.rmtree(out, ignore_errors=True)
    hook_lines(
        f"each statistics hook over an inline --workers 1 build of the {args.rows:,}-row table", hooks, {"": (times, spent)}, args.rows
    )


MODULES = "import sys, shardkit.pipeline.shard.worker; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"


def import_cost(base: Path, times: int = 5) -> None:
    """What a build pays once, before any record: the wall and CPU seconds of importing what a build
    imports (the shard worker's module, which the parent imports and its forked workers inherit), in
    each tree, alternating, median of ``times``; and the top-level packages only this tree imports."""
    import resource

    runs: dict[str, list[tuple[float, float]]] = {"baseline": [], "shardkit": []}
    trees = {"baseline": base, "shardkit": ROOT}
    modules: dict[str, set[str]] = {}
    for round_ in range(times):
        for who in list(trees)[:: -1 if round_ % 2 else 1]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            command = ["env", "-C", str(trees[who]), f"PYTHONPATH={trees[who]}", sys.executable, "-c", MODULES]
            found = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout.split()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            runs[who].append((time.perf_counter() - started, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
            modules[who] = set(found)
    print(f"\n# importing shardkit.pipeline.shard.worker in a fresh process, median of {times}, alternating; load {load()}")
    for who, done in runs.items():
        wall, cpu = statistics.median(w for w, _ in done), statistics.median(c for _, c in done)
        print(f"  {NAMES[who]:58} {wall:6.2f} s wall {cpu:6.2f} s CPU")
    print(f"  packages only this tree imports: {', '.join(sorted(modules['shardkit'] - modules['baseline'])) or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1200)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline-tree", help="a checkout of shardkit before statistics (default: --baseline-commit's files, extracted)")
    parser.add_argument("--baseline-commit", default=BASELINE_COMMIT)
    parser.add_argument("--one-blas-thread", action="store_true", help="table: also this tree with OPENBLAS_NUM_THREADS=1")
    parser.add_argument("--only", default="seed,table,micro", help="a comma list of seed, table, micro")
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data/costbench"))
    parser.add_argument("--table", type=Path, help="the table's folder (default: --data/rows-ROWS; make_table fills it once)")
    args = parser.parse_args()
    args.data = args.data.resolve()
    args.data.mkdir(parents=True, exist_ok=True)
    args.table = (args.table or args.data / f"rows-{args.rows}").resolve()
    args.out = args.data / f"out-{os.getpid()}"
    parts = set(args.only.split(","))
    if parts - {"seed", "table", "micro"}:
        parser.error(f"--only: {', '.join(sorted(parts - {'seed', 'table', 'micro'}))} is not one of seed, table, micro")
    base = baseline_tree(args)
    print(f"# {os.cpu_count()} cores, python {sys.version.split()[0]}; load average before: {load()}")
    print(f"# baseline: {imported_from(base)}; this tree: {imported_from(ROOT)}", flush=True)
    try:
        if "seed" in parts:
            bench_seed(args, base)
        if "table" in parts:
            bench_table(args, base)
        if "micro" in parts:
            import_cost(base)
            bench_micro(args)
            bench_micro_table(args)
    finally:
        shutil.rmtree(args.out, ignore_errors=True)
    print(f"\n# load average after: {load()}")


if __name__ == "__main__":
    main()
