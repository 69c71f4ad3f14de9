#!/usr/bin/env python3
"""Shares of a py-spy profile: where the sampled time of each kind of process went.

    py-spy record --subprocesses --format raw -r 200 -o spy.txt -- python -m shardkit.cli build ...
    python scripts/spy_share.py spy.txt --rate 200 --lines 2000000 [--stage NAME=FUNCTION ...] [--top 20]

A raw profile holds one line per distinct stack, ``frame;frame;... COUNT``, the first frames naming
the process (and the child of it) where --subprocesses was given. Processes are grouped: the
build's parent, the planning pool's processes, the shard workers. For each group: its samples as seconds (COUNT / rate; a
sample is taken only of a thread that is running, so this is near its CPU time) and microseconds
per line; then each ``--stage`` (a stack is counted in the first stage, in the order given,
whose FUNCTION is in it, by its name or a part of its dotted name: give the innermost first), and the ``--top`` functions by own time.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

FRAME = re.compile(r"^(?P<function>[^ ]+) \((?P<file>[^:]+)(:\d+)?\)$")


def group_of(frames: list[str], names: list[str]) -> str:
    """The parent, or which of its pools a child (a second ``process`` frame) belongs to."""
    if not frames[0].startswith("process "):
        return "all"
    if len(frames) < 2 or not frames[1].startswith("process "):
        return "parent (the build)"
    if "_plan_job" in names:
        return "planning pool processes"
    if "write_shard" in names:
        return "shard workers"
    return "pool processes, other (start-up, waiting for work)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path)
    parser.add_argument("--rate", type=float, default=100.0, help="py-spy's -r (samples a second)")
    parser.add_argument("--lines", type=int, required=True, help="index lines the build read (for us/line)")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME=FUNCTION[|FUNCTION]")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    stages = [(name, set(functions.split("|"))) for name, functions in (s.split("=", 1) for s in args.stage)]
    totals: collections.Counter[str] = collections.Counter()
    by_stage: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in args.raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        names = []
        for frame in frames:
            match = FRAME.match(frame)
            names.append(match["function"] if match else frame)
        group = group_of(frames, names)
        totals[group] += count
        parts = {part for name in names for part in (name, *name.split("."))}  # Fetcher._urls.<locals>.<listcomp>: _urls
        stage = next((name for name, functions in stages if functions & parts), "other")
        by_stage[group][stage] += count
        leaf = frames[-1]
        match = FRAME.match(leaf)
        own[group][f"{match['function']} ({Path(match['file']).name})" if match else leaf] += count
    for group, samples in sorted(totals.items(), key=lambda kv: -kv[1]):
        seconds = samples / args.rate
        print(f"\n{group}: {seconds:.2f} s sampled, {seconds / args.lines * 1e6:.2f} us/line")
        for stage, count in by_stage[group].most_common():
            s = count / args.rate
            print(f"  {stage:60} {s:8.2f} s {s / args.lines * 1e6:7.2f} us/line {count / samples:6.1%}")
        print(f"  top {args.top} functions by own time:")
        for function, count in own[group].most_common(args.top):
            s = count / args.rate
            print(f"    {function:72} {s:7.2f} s {s / args.lines * 1e6:6.2f} us/line")


if __name__ == "__main__":
    main()
