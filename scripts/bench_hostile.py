#!/usr/bin/env python3
"""Issue 30's hostile inputs, and what the protections against them cost: the code before the issue
and the code now, side by side in one run.

    python scripts/bench_hostile.py --baseline PATH [--only hostile|cost] [--images 20000] [--tiny 200000]
                                    [--pairs 3] [--string-mb 200] [--file-name-mb 5,20] [--limit-gb 4]
                                    [--timeout 150] [--work DIR]

PATH is a checkout of the old code (e.g. `git worktree add --detach ../baseline 5551d89`); the new
code is the checkout `import shardkit` finds (this one, run from its root). Without --baseline the
new code runs against itself: a check that the script works, not a measurement. Every case is the
`shardkit` command as a user starts it, `python -m shardkit.cli ...` in a child process with
PYTHONPATH set to the chosen tree (and the configs its own `configs/`); measured: the wall seconds,
the child's peak RSS (`os.wait4`'s `ru_maxrss`: the largest of the child and the processes it
reaped, e.g. its pool workers), how it ended, and the length of the last line it wrote to stderr
(where a refusal's one `Error:` line is).

hostile: files made the way an attacker or a careless tool makes them: a small COCO set (6 tiny
         images, 1-4 polygons each, the standard layout) with one thing changed. Each run is under an
         address-space limit (RLIMIT_AS, --limit-gb) and a timeout (--timeout), and both are reported
         as such ("MemoryError traceback at the 4 GB limit", "over 150 s").
  1. an annotation's segmentation nested 20,000 levels (a 44 kB file), and 100,000 levels (206 kB)
  2. 2,000 levels of nesting as the last item of `categories`
  3. a --string-mb MB string in an annotation field nothing reads (`note`); where that is past the
     new code's limit (16 MiB), also one 4 kB short of it: the longest it lets through
  4. a `file_name` of each --file-name-mb MB (5: under the string limit, the long path's error line
     is cut; 20: over it)
  5. a polygon coordinate of 1e8 with configs/coco-instance-masks.yaml, `-w 1`, and `-w 2 --on-error skip`
cost:    legitimate input, each contender --pairs times, alternating (baseline, new, new, baseline, ...):
  6. a COCO set of --images images (1-4 polygons each, the standard layout; each image a hard link to
     one of 8 small JPEGs of its size, 60x80 to 100x75) built with configs/coco-instance-masks.yaml,
     `-w 2`: planning, the bounded JSON reader, the read rule and the segmentation checks; and the
     same set with no config (boxes only: no segmentation is checked or drawn)
  7. an index file of --tiny lines over 200 small PNGs (one folder), built with configs/passthrough.yaml,
     `-w 2`: the read rule's cost per file in the workers

Printed: a line per run as it ends, then a table (per case and contender: how it ended, seconds,
peak MB, the length of stderr's last line; for the cost cases the median and the min-max of the
runs, and the ratios new / baseline of the median wall and CPU seconds, the CPU seconds being
those of every process of the build, from wait4), the last line each hostile run printed (cut
to 160 characters), and the load average at the start and at the end (the machine may be shared).

At the default sizes it takes about 8 minutes on 2 cores: 2.5 of them the baseline reading the
200 MB string until the timeout stops it, 4 the 18 cost builds. At --string-mb 1 --file-name-mb 1
--images 200 --tiny 500 --pairs 1, 30 s. The data goes in a new folder under
--work (default: the temp dir), removed after.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

NAMES = ((1, "person"), (3, "car"), (7, "train"), (9, "boat"), (18, "dog"))
CATEGORIES = [{"id": i, "name": n, "supercategory": "thing"} for i, n in NAMES]
SIZES = [(96, 72), (96, 64), (72, 96), (80, 60), (100, 75), (64, 48), (88, 66), (60, 80)]  # distinct image sizes of a set


# ----------------------------------------------------------------------------- running a case
@dataclasses.dataclass(frozen=True)
class Run:
    code: int | None  # the exit status; negative: killed by that signal; None: stopped at the timeout
    seconds: float
    cpu: float  # user + system seconds of the child and the processes it reaped
    mb: float  # peak RSS of the child or the largest process it reaped
    last: str  # stderr's last non-empty line
    traceback: bool
    errors: int  # stderr lines that start with "Error:"
    skipped: int | None  # lines in OUT/errors.jsonl, where the build wrote one
    timeout: float
    limit_gb: float | None

    def outcome(self) -> str:
        if self.code is None:
            return f"over {self.timeout:.0f} s (stopped)"
        if self.code < 0:
            return signal.Signals(-self.code).name
        if self.traceback:
            name = self.last.split(":", 1)[0].strip()
            at_limit = f" at the {self.limit_gb:g} GB limit" if name == "MemoryError" and self.limit_gb else ""
            return f"exit {self.code}, {name} traceback{at_limit}"
        if self.code and self.errors == 1 and self.last.startswith("Error:"):
            return f"exit {self.code}, one Error: line"
        if self.code == 0 and self.skipped:
            return f"exit 0, {self.skipped} in errors.jsonl"
        return f"exit {self.code}"


def run(tree: Path, args: list[str], cwd: Path, *, limit_gb: float | None, timeout: float, out: Path | None = None) -> Run:
    """``shardkit ARGS`` from ``tree`` in a child process, under ``limit_gb`` of address space and ``timeout``."""
    limit = int(limit_gb * (1 << 30)) if limit_gb else None

    def limited() -> None:
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    environment = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "shardkit.cli", *args]
    with tempfile.TemporaryFile() as stderr:  # not a pipe: a 20 MB error line would stall a child writing to one
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
                                 preexec_fn=limited, start_new_session=True)  # fmt: skip
        timed_out = False
        while True:  # os.wait4 on this child alone: RUSAGE_CHILDREN deltas mix up children
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                os.killpg(child.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(child.pid, 0)
                timed_out = True
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        with contextlib.suppress(ProcessLookupError):  # a worker its crashed parent left behind
            os.killpg(child.pid, signal.SIGKILL)
        stderr.seek(0)
        text = stderr.read().decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    listed = out / "errors.jsonl" if out else None
    skipped = len(listed.read_text().splitlines()) if listed and listed.exists() else None
    return Run(
        code=None if timed_out else child.returncode,
        seconds=seconds,
        cpu=usage.ru_utime + usage.ru_stime,
        mb=usage.ru_maxrss / 1024,
        last=lines[-1] if lines else "",
        traceback="Traceback (most recent call last)" in text,
        errors=sum(line.startswith("Error:") for line in lines),
        skipped=skipped,
        timeout=timeout,
        limit_gb=limit_gb,
    )


# ----------------------------------------------------------------------------- data
def jpeg(width: int, height: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], axis=-1)
    pixels = np.clip(pixels + rng.integers(-12, 12, pixels.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def polygon(rng: np.random.Generator, width: int, height: int) -> tuple[list[float], list[float]]:
    """A star-shaped polygon inside the image, COCO's 2 decimals; and its box."""
    w, h = float(rng.uniform(6, width / 2)), float(rng.uniform(6, height / 2))
    x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
    corners = int(rng.integers(6, 20))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    radii = rng.uniform(0.6, 1.0, corners)
    xs = x + w / 2 * (1 + radii * np.cos(angles))
    ys = y + h / 2 * (1 + radii * np.sin(angles))
    points = [round(float(v), 2) for xy in zip(xs.tolist(), ys.tolist(), strict=True) for v in xy]
    return points, [round(x, 2), round(y, 2), round(w, 2), round(h, 2)]


def write_coco(root: Path, images: int, seed: int = 0) -> dict[str, Any]:
    """A COCO set in the standard layout under ``root`` (its images hard links to one small JPEG per
    size); returns the annotation file's document, for the caller to change and write."""
    rng = np.random.default_rng(seed)
    (root / "annotations").mkdir(parents=True)
    (root / "train2017").mkdir()
    (root / "sizes").mkdir()
    for n, (width, height) in enumerate(SIZES):
        (root / "sizes" / f"{width}x{height}.jpg").write_bytes(jpeg(width, height, n))
    entries: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for i in range(images):
        width, height = SIZES[i % len(SIZES)]
        name = f"{i + 1:012d}.jpg"
        os.link(root / "sizes" / f"{width}x{height}.jpg", root / "train2017" / name)
        entries.append({"license": 1, "file_name": name, "coco_url": "", "height": height, "width": width, "id": i + 1})
        for _ in range(int(rng.integers(1, 5))):
            points, box = polygon(rng, width, height)
            annotations.append({"segmentation": [points], "area": round(box[2] * box[3] * 0.7, 2), "iscrowd": 0, "image_id": i + 1,
                                "bbox": box, "category_id": CATEGORIES[int(rng.integers(len(CATEGORIES)))]["id"],
                                "id": len(annotations) + 1})  # fmt: skip
    order = rng.permutation(len(annotations)).tolist()  # interleaved across images, as real files are
    return {
        "info": {"description": "bench_hostile", "version": "1.0", "year": 2017},
        "licenses": [{"url": "", "id": 1, "name": "bench"}],
        "images": entries,
        "annotations": [annotations[k] for k in order],
        "categories": [dict(c) for c in CATEGORIES],  # a copy: a case may change it
    }


def annotation_file(root: Path) -> Path:
    return root / "annotations" / "instances_train2017.json"


def save(root: Path, document: dict[str, Any], raw: str | None = None) -> Path:
    """The document as ``root``'s annotation file; ``raw``, where given, replaces the one "__raw__"
    string in it (written as text: json.dumps cannot nest that deep, and a copy of 200 MB in a
    dict would double the memory it takes to write)."""
    path = annotation_file(root)
    text = json.dumps(document)
    if raw is None:
        path.write_text(text)
    else:
        before, after = text.split('"__raw__"')
        with path.open("w") as f:
            f.write(before)
            f.write(raw)
            f.write(after)
    return path


def hostile_sets(work: Path, args: argparse.Namespace) -> list[tuple[str, Path, list[str], str | None]]:
    """(case, annotation file, extra build arguments, the config's name) for every hostile case."""
    cases: list[tuple[str, Path, list[str], str | None]] = []

    def case(name: str, change: Callable[[dict[str, Any]], str | None], extra: list[str] | None = None, config: str | None = None) -> Path:
        root = work / f"hostile-{len(cases)}"
        document = write_coco(root, 6, seed=len(cases))
        path = save(root, document, change(document))
        cases.append((name, path, extra or [], config))
        return path

    def nested(depth: int) -> Callable[[dict[str, Any]], str]:
        def change(document: dict[str, Any]) -> str:
            document["annotations"][0]["segmentation"] = "__raw__"
            return "[" * depth + "]" * depth

        return change

    def last_category(document: dict[str, Any]) -> str:
        document["categories"].append("__raw__")
        return "[" * 2000 + "]" * 2000

    def long_note(length: int) -> Callable[[dict[str, Any]], str]:
        def change(document: dict[str, Any]) -> str:
            document["annotations"][0]["note"] = "__raw__"
            return '"' + "n" * length + '"'

        return change

    def long_file_name(length: int) -> Callable[[dict[str, Any]], None]:
        def change(document: dict[str, Any]) -> None:
            document["images"][0]["file_name"] = "a" * length

        return change

    def far_coordinate(document: dict[str, Any]) -> None:
        document["annotations"][0]["segmentation"][0][0] = 1e8

    for depth in (20_000, 100_000):
        path = case(f"segmentation nested {depth:,} levels", nested(depth))
        cases[-1] = (f"{cases[-1][0]} ({path.stat().st_size / 1000:.0f} kB file)", *cases[-1][1:])
    case("2,000 levels at the end of categories", last_category)
    case(f"a {args.string_mb} MB string in an unread field", long_note(args.string_mb * 1_000_000))
    if args.string_mb * 1_000_000 > 16 << 20:  # what the limit still lets through, beside what it stops
        case("a string 4 kB short of 16 MiB (the new limit) in an unread field", long_note((16 << 20) - 4096))
    for mb in args.file_name_mb:
        case(f"a {mb:g} MB file_name", long_file_name(int(mb * 1_000_000)))
    masks = "coco-instance-masks.yaml"
    path = case("polygon coordinate 1e8, masks, -w 1", far_coordinate, ["-w", "1"], masks)
    cases.append(("polygon coordinate 1e8, masks, -w 2 --on-error skip", path, ["-w", "2", "--on-error", "skip"], masks))
    return cases


def tiny_index(folder: Path, lines: int, files: int = 200) -> Path:
    """``lines`` index lines over ``files`` 5x5 PNGs of noise in one folder (each file read lines/files times)."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    for i in range(files):
        Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).save(folder / "images" / f"{i:05d}.png")
    index = folder / "train_index.txt"
    with index.open("w") as f:
        f.writelines(f"images/{i % files:05d}.png {i % 10}\n" for i in range(lines))
    return index


# ----------------------------------------------------------------------------- the benchmark
def side(runs: list[Run]) -> list[str]:
    """How a contender's runs ended, its seconds, MB and last-line length (medians and min-max over several runs)."""
    outcomes = sorted({r.outcome() for r in runs})
    if len(runs) == 1:
        r = runs[0]
        seconds = f"over {r.timeout:.0f}" if r.code is None else f"{r.seconds:.2f}"
        return ["; ".join(outcomes), seconds, f"{r.mb:.0f}", f"{len(r.last):,}"]
    walls = [r.seconds for r in runs]
    mbs = [r.mb for r in runs]
    return ["; ".join(outcomes), f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})",
            f"{statistics.median(mbs):.0f} ({min(mbs):.0f}-{max(mbs):.0f})", f"{max(len(r.last) for r in runs):,}"]  # fmt: skip


def progress(case: str, who: str, r: Run) -> None:
    print(f"  {case} | {who}: {r.outcome()}, {r.seconds:.2f} s, {r.mb:.0f} MB, last line {len(r.last):,} chars", flush=True)


def bench_hostile(args: argparse.Namespace, trees: dict[str, Path], work: Path) -> list[tuple[str, dict[str, list[Run]]]]:
    started = time.perf_counter()
    cases = hostile_sets(work, args)
    print(f"# hostile files written in {time.perf_counter() - started:.1f} s", flush=True)
    rows = []
    for n, (name, path, extra, config) in enumerate(cases):
        runs: dict[str, list[Run]] = {}
        for who, tree in trees.items():
            out = work / f"out-{n}-{who}"
            configured = ["-c", str(tree / "configs" / config)] if config else []
            build = ["build", str(path), "-o", str(out), "-q", *configured, *extra]
            runs[who] = [run(tree, build, work, limit_gb=args.limit_gb, timeout=args.timeout, out=out)]
            progress(name, who, runs[who][0])
            shutil.rmtree(out, ignore_errors=True)
        rows.append((name, runs))
    return rows


Command = Callable[[Path, Path], list[str]]  # (tree, OUT) -> the shardkit arguments


def alternating(name: str, trees: dict[str, Path], pairs: int, command: Command, work: Path) -> dict[str, list[Run]]:
    """Each tree's build ``pairs`` times, alternating which goes first; each must exit 0."""
    runs: dict[str, list[Run]] = {who: [] for who in trees}
    for pair in range(pairs):
        for who in list(trees)[:: -1 if pair % 2 else 1]:
            out = work / f"out-cost-{who}"
            shutil.rmtree(out, ignore_errors=True)
            r = run(trees[who], command(trees[who], out), work, limit_gb=None, timeout=600)
            if r.code != 0:
                sys.exit(f"{name}: the {who} build failed: {r.outcome()}: {r.last[:500]}")
            runs[who].append(r)
            progress(name, who, r)
    shutil.rmtree(work / "out-cost-baseline", ignore_errors=True)
    shutil.rmtree(work / "out-cost-new", ignore_errors=True)
    return runs


def bench_cost(args: argparse.Namespace, trees: dict[str, Path], work: Path) -> list[tuple[str, dict[str, list[Run]]]]:
    started = time.perf_counter()
    root = work / "coco"
    document = write_coco(root, args.images, seed=1)
    coco = save(root, document)
    index = tiny_index(work / "tiny", args.tiny)
    print(f"# {coco} ({len(document['images']):,} images, {len(document['annotations']):,} polygons, {coco.stat().st_size / 1e6:.1f} MB) "
          f"and {index} ({args.tiny:,} lines) written in {time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
    del document

    def coco_build(tree: Path, out: Path) -> list[str]:
        return ["build", str(coco), "-o", str(out), "-q", "-w", "2", "-c", str(tree / "configs" / "coco-instance-masks.yaml")]

    def tiny_build(tree: Path, out: Path) -> list[str]:
        return ["build", str(index), "-o", str(out), "-q", "-w", "2", "-c", str(tree / "configs" / "passthrough.yaml")]

    def boxes_build(tree: Path, out: Path) -> list[str]:
        return ["build", str(coco), "-o", str(out), "-q", "-w", "2"]

    name = f"COCO {args.images:,} images, masks, -w 2"
    rows = [(name, alternating(name, trees, args.pairs, coco_build, work))]
    name = f"COCO {args.images:,} images, boxes only (no config), -w 2"
    rows.append((name, alternating(name, trees, args.pairs, boxes_build, work)))
    name = f"index {args.tiny:,} lines over 200 PNGs, passthrough, -w 2"
    rows.append((name, alternating(name, trees, args.pairs, tiny_build, work)))
    return rows


def table(rows: list[tuple[str, dict[str, list[Run]]]]) -> None:
    columns = ["how it ended", "s", "MB", "last line chars"]
    head = ["case", *(f"{who}: {c}" if c == columns[0] else c for who in ("baseline", "new") for c in columns), "new / baseline"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    cpu = []
    for name, runs in rows:
        ratio = ""
        if len(runs["new"]) > 1:
            wall = {who: statistics.median(r.seconds for r in each) for who, each in runs.items()}
            cpus = {who: [r.cpu for r in each] for who, each in runs.items()}
            used = {who: statistics.median(each) for who, each in cpus.items()}
            ratio = f"{wall['new'] / wall['baseline']:.2f}x wall, {used['new'] / used['baseline']:.2f}x CPU"
            figures = ", ".join(f"{who} {used[who]:.2f} ({min(cpus[who]):.2f}-{max(cpus[who]):.2f})" for who in cpus)
            cpu.append(f"  {name}: {figures}")
        print("| " + " | ".join([name, *side(runs["baseline"]), *side(runs["new"]), ratio]) + " |")
    if cpu:
        print("\nCPU seconds of all the processes of each build (median, min-max):", *cpu, sep="\n")


def main() -> None:
    import shardkit

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="a checkout of the old code (default: the new code itself, a check that this runs)")
    parser.add_argument("--only", choices=("hostile", "cost"), help="run one of the two parts")
    parser.add_argument("--images", type=int, default=20_000, help="images of the legitimate COCO set")
    parser.add_argument("--tiny", type=int, default=200_000, help="lines of the tiny files' index")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each contender on the legitimate inputs, alternating")
    parser.add_argument("--string-mb", type=int, default=200, help="the unread string's size")
    parser.add_argument("--file-name-mb", type=lambda text: [float(mb) for mb in text.split(",")], default=[5.0, 20.0],
                        help="the long file_names' sizes, comma-separated (5: under the new 16 MiB string limit; 20: over it)")  # fmt: skip
    parser.add_argument("--limit-gb", type=float, default=4.0, help="address space of each hostile run (RLIMIT_AS)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds a hostile run may take before it is stopped")
    parser.add_argument("--work", type=Path, help="the folder the data goes under (default: the temp dir)")
    args = parser.parse_args()
    new = Path(shardkit.__file__).resolve().parent.parent
    baseline = (args.baseline or new).resolve()
    if not (baseline / "shardkit" / "cli").exists() and not (baseline / "shardkit" / "cli.py").exists():
        sys.exit(f"--baseline {baseline}: no shardkit checkout there")
    trees = {"baseline": baseline, "new": new}
    load = os.getloadavg()
    itself = "" if args.baseline else " (no --baseline: the new code against itself)"
    print(f"# {os.cpu_count()} cores; baseline {baseline}, new {new}{itself}")
    print(f"# load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-", dir=args.work))
    started = time.perf_counter()
    rows = []
    try:
        if args.only in (None, "hostile"):
            rows += bench_hostile(args, trees, work)
        hostile = {name for name, _ in rows}
        if args.only in (None, "cost"):
            rows += bench_cost(args, trees, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table(rows)
    print("\nThe last line each hostile run wrote to stderr (cut to 160 characters):")
    for name, runs in rows:
        for who, each in runs.items():
            if name in hostile:
                cut = each[0].last[:160] + (f"… ({len(each[0].last):,} characters)" if len(each[0].last) > 160 else "")
                print(f"  {name} | {who}: {cut or '(nothing)'}")
    load = os.getloadavg()
    print(f"\n# load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
