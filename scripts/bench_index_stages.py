#!/usr/bin/env python3
"""Where `shardkit build` of an index file spends its wall time, phase by phase (issue 32).

    python scripts/bench_index_stages.py INDEX -c CONFIG [-w 2] [--out DIR]

Runs the build in this process as the CLI does (``shardkit build INDEX -o DIR -c CONFIG -w W -q``),
with timers around its phases: the import of shardkit's CLI; prepare (finding the inputs, the
config); planning in the pool (each piece of the index read, its rows checked, typed, keyed and
spooled); the plan file (the spools merged, sorted and written, then published); the shards (the
workers: plan lines read, typed into entries, files read and probed, records encoded, framed,
written, fsynced, committed); the manifest. Prints each phase's seconds and microseconds per
line, and the sum of the shards' own seconds (each worker's time, as its shard record says).
The planning pool's and the workers' processes are not timed inside: for that, run the same
command under ``py-spy record --subprocesses --format raw`` and ``scripts/spy_share.py``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=Path)
    parser.add_argument("-c", "--config", type=Path, default=ROOT / "configs" / "passthrough.yaml")
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/shardkit-index-stages-out"))
    args = parser.parse_args()
    lines = sum(1 for _ in args.index.open("rb"))
    shutil.rmtree(args.out, ignore_errors=True)

    before = time.perf_counter()
    import shardkit.cli.main as cli
    from shardkit.pipeline import builder
    from shardkit.pipeline.plan import planner

    phases: dict[str, float] = {"import shardkit.cli": time.perf_counter() - before}
    results: list[Any] = []

    def timed(module: Any, name: str, phase: str) -> None:
        inner: Callable[..., Any] = getattr(module, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                out = inner(*a, **k)
            finally:
                phases[phase] = phases.get(phase, 0.0) + time.perf_counter() - start
            if name == "_execute":
                results.extend(out)
            return out

        setattr(module, name, wrapper)

    timed(builder, "prepare", "prepare (inputs, config)")
    timed(planner, "_spool_pieces", "planning: pool (read, check, type, key, spool)")
    timed(planner, "_fill", "planning: one process (read, check, type, key, spool)")
    timed(planner, "write_plan", "planning: merge + sort spools, write plan file")
    timed(builder, "_publish_plan", "planning: publish plan")
    timed(builder, "_plan", "planning, all")
    timed(builder, "_execute", "shards (workers), all")
    timed(builder, "_publish_outputs", "manifest")
    argv = ["build", str(args.index), "-o", str(args.out), "-c", str(args.config), "-w", str(args.workers), "-q"]
    start = time.perf_counter()
    try:
        cli.main(argv, prog_name="shardkit", standalone_mode=False)
    finally:
        phases["build, all (in-process)"] = time.perf_counter() - start
    total = time.perf_counter() - STARTED
    print(f"{lines:,} lines, -w {args.workers}; this process from its start: {total:.2f} s ({total / lines * 1e6:.2f} us/line)")
    for phase, seconds in phases.items():
        print(f"  {phase:58} {seconds:8.2f} s {seconds / lines * 1e6:8.2f} us/line")
    own = sum(r.seconds for r in results)
    print(f"  {'shards: the sum of their own seconds (' + str(len(results)) + ' shards)':58} {own:8.2f} s "
          f"{own / lines * 1e6:8.2f} us/line of one worker")  # fmt: skip
    shutil.rmtree(args.out, ignore_errors=True)


if __name__ == "__main__":
    main()
