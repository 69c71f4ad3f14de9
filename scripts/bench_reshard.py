#!/usr/bin/env python3
"""Resharding foreign TFRecord files (issue 34): `shardkit reshard` against the loop a user writes and `cat`, same data, one run.

    python scripts/bench_reshard.py [--quick | --scale F] [--only a|b] [--rounds 3] [--workers N]
                                    [--contenders tf,shardkit,cat] [--no-resume] [--data DIR]

Two cases, the issue's sizes at --scale 1 (--quick is --scale 0.01: 40 MB and 20,000 records):
  (a) 40,000 records of about 100 kB (4 GB): a tf.train.Example of `image` (95,000 to 105,000 random
      bytes), `label` (int64, 0..999) and `id` (int64, the record's number over all files), in 40 files
      `train-000NN-of-00040.tfrecord` of uneven sizes (each file's share drawn so the largest is 5x
      the smallest).
  (b) 2,000,000 records of about 150 bytes: `id`, `label`, `timestamp` (int64), `score` (float),
      `bbox` (4 floats) and `name` (24 to 48 lowercase letters), in 10 such files.
The files are written by TensorFlow (`tf.train.Example`, `tf.io.TFRecordWriter`) in a child process,
from a fixed seed, under --data (default: bench-data/reshard beside the repository's folder, on the
disk the outputs go to) and kept: a later run reuses them when every file has the size recorded
when it was made. The data's (a) needs about 4 GB, its outputs another 4 GB each while they live.

Contenders, each a child process started as a user starts it, 64 output shards:
  (i)   tf:       the loop a user writes, TensorFlow's import included:
                  `tf.data.TFRecordDataset(files).shuffle(10_000, seed=0)`, each record written
                  round-robin to 64 `tf.io.TFRecordWriter`s. A buffer shuffle, not a global one.
  (ii)  shardkit: `python -m shardkit.cli reshard FOLDER -o OUT --shards 64 --seed 0 --split train`
                  (its defaults: a global shuffle, .idx sidecars, the manifest, each shard fsynced;
                  workers = cores unless --workers).
  (iii) cat:      the bound, reading and writing the same bytes once on the same disk:
                  `cat FILES... > OUT/all.tfrecord && sync OUT/all.tfrecord` (fsynced as shardkit's are).
The inputs are read once before the rounds, so every contender finds them in the page cache. A round
runs each contender once (tf, shardkit, cat; reversed every other round); before each run the
previous output is deleted and the disk synced, so no one's dirty pages are written back during
another's run. Each run's wall time, the CPU seconds of all its processes and the peak RSS of each
of its processes (VmHWM, a high-water mark per process, read over the live process tree every 50 ms:
right for pool workers, whose peak is kept until they exit) come from scripts/process_tree.py.

Printed per case: each round's wall times; a table of min and median wall time, median CPU seconds,
records/s, CPU us per record, the largest process's peak RSS (VmHWM, the largest of the rounds) and
the largest anonymous RSS seen at a poll (RssAnon: VmHWM also counts the touched pages of files a
process maps, which the kernel drops at will; anon is the memory a process holds); then
`tf / shardkit` (target >= 2x), `shardkit / cat` (how far from the bound) and shardkit's largest
process (target <= 300 MB); where shardkit's last run spent its time (from the times of the files it
left): start-up, indexing every input and writing the plan (.shardkit/plan-*/train.plan), writing
the shards (until the last .shardkit/shards/*.json), after the last (the manifest, metadata).
Then a check of the last round's outputs: every input record is in each output exactly once, its
bytes unchanged (a multiset digest of the records, read with CRCs checked), shardkit's 64 shards
differ in count by at most 1.
Resume (case a, unless --no-resume): shardkit's reshard is started again, killed with SIGKILL (its
whole process group) once half its shards are committed, and the same command run again: its wall
time against a whole run's median (target: about half), and whether its shard files and .idx files
are byte for byte those of an uninterrupted run (sha256). The load average is printed before and
after: on a busy machine the ratios carry more weight than the seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from process_tree import ROOT, measured

CASES = {"a": (40_000, 40), "b": (2_000_000, 10)}  # records, files at --scale 1
VERSION = 2  # of GENERATE: data made by another is made again
NAMES = {
    "tf": "(i) tf.data shuffle(10_000) + {shards} TFRecordWriters, 1 process",
    "shardkit": "(ii) shardkit reshard --shards {shards} (global shuffle)",
    "cat": "(iii) cat of the inputs into one file + fsync (bound)",
}

GENERATE = r"""
import hashlib, json, os, sys
import numpy as np
import tensorflow as tf

case, folder, total, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])  # then the version
rng = np.random.default_rng(34)
weights = 5.0 ** (rng.permutation(files) / max(files - 1, 1))  # the largest file's share 5x the smallest's
exact = total * weights / weights.sum()
counts = np.floor(exact).astype(np.int64)
counts[np.argsort(counts - exact)[: total - int(counts.sum())]] += 1
for empty in np.flatnonzero(counts == 0):  # tiny sizes: a record each, taken from the largest file
    counts[empty], counts[np.argmax(counts)] = 1, counts[np.argmax(counts)] - 1
example = tf.train.Example()
feature = example.features.feature
ids = feature["id"].int64_list.value
label = feature["label"].int64_list.value
ids.append(0)
label.append(0)
if case == "a":
    image = feature["image"].bytes_list.value
    image.append(b"")
else:
    stamp, score = feature["timestamp"].int64_list.value, feature["score"].float_list.value
    bbox, name = feature["bbox"].float_list.value, feature["name"].bytes_list.value
    stamp.append(0)
    score.append(0.0)
    bbox.extend([0.0] * 4)
    name.append(b"")
digest, first, sizes = 0, 0, {}
for number, count in enumerate(counts.tolist()):
    rng = np.random.default_rng([34, number])
    labels = rng.integers(0, 1000, count).tolist()
    if case == "a":
        lengths = rng.integers(95_000, 105_001, count).tolist()
    else:
        stamps = rng.integers(1_600_000_000, 1_700_000_000, count).tolist()
        scores = rng.random(count, dtype=np.float32).tolist()
        boxes = rng.random((count, 4), dtype=np.float32).tolist()
        lengths = rng.integers(24, 49, count).tolist()
        letters = rng.integers(97, 123, (count, 48), dtype=np.uint8)
    path = os.path.join(folder, f"train-{number:05d}-of-{files:05d}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            ids[0] = first + i
            label[0] = labels[i]
            if case == "a":
                image[0] = rng.bytes(lengths[i])
            else:
                stamp[0], score[0], bbox[:], name[0] = stamps[i], scores[i], boxes[i], letters[i, : lengths[i]].tobytes()
            record = example.SerializeToString()
            digest += int.from_bytes(hashlib.blake2b(record, digest_size=16).digest(), "little")
            writer.write(record)
    first += count
    sizes[os.path.basename(path)] = os.path.getsize(path)
made = {"version": int(sys.argv[5]), "records": total, "sizes": sizes, "digest": digest % 2**128}
with open(os.path.join(folder, "made.json"), "w") as f:
    json.dump(made, f)
"""

TF_LOOP = r"""
import glob, os, sys
import tensorflow as tf

folder, out, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
writers = [tf.io.TFRecordWriter(os.path.join(out, f"train-{i:05d}-of-{shards:05d}.tfrecord")) for i in range(shards)]
for i, record in enumerate(tf.data.TFRecordDataset(files).shuffle(10_000, seed=0)):
    writers[i % shards].write(record.numpy())
for writer in writers:
    writer.close()
"""


# ----------------------------------------------------------------------------- data
def make_data(data: Path, case: str, scale: float) -> tuple[Path, dict[str, Any]]:
    """The case's folder of TFRecord files (made unless an earlier run left it whole) and its made.json."""
    records, files = CASES[case]
    records = max(files, round(records * scale))
    folder = data / f"{case}-{records}"
    made_path = folder / "made.json"
    if made_path.exists():
        made = json.loads(made_path.read_text())
        whole = all((folder / name).exists() and (folder / name).stat().st_size == size for name, size in made["sizes"].items())
        if whole and made.get("version") == VERSION:
            return folder, made
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"# making {folder} ({records:,} records in {files} files) ...", flush=True)
    started = time.perf_counter()
    child = [sys.executable, "-c", GENERATE, case, str(folder), str(records), str(files), str(VERSION)]
    maker = subprocess.run(child, capture_output=True, text=True)  # TensorFlow's start-up lines shown only if it fails
    if maker.returncode != 0:
        sys.exit(f"making {folder} failed:\n{maker.stderr[-3000:]}")
    print(f"# made in {time.perf_counter() - started:.0f} s", flush=True)
    return folder, json.loads(made_path.read_text())


def records_of(path: Path) -> list[bytes]:
    from shardkit.formats.containers.tfrecord_io import read_records

    return list(read_records(str(path)))  # both CRCs of every record checked


def digest_of(folder: Path) -> tuple[int, list[int]]:
    """The multiset digest of every record in the folder's .tfrecord files (as made.json's) and each file's count."""
    digest, counts = 0, []
    for path in sorted(folder.glob("*.tfrecord")):
        records = records_of(path)
        counts.append(len(records))
        digest += sum(int.from_bytes(hashlib.blake2b(r, digest_size=16).digest(), "little") for r in records)
    return digest % 2**128, counts


def shard_hashes(folder: Path) -> dict[str, str]:
    found = {}
    for path in sorted([*folder.glob("*.tfrecord"), *folder.glob("*.tfrecord.idx")]):
        with path.open("rb") as f:
            found[path.name] = hashlib.file_digest(f, "sha256").hexdigest()
    return found


def committed(out: Path) -> list[Path]:
    return list((out / ".shardkit" / "shards").glob("*.json"))


# ----------------------------------------------------------------------------- runs
def commands(folder: Path, out: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    inputs = [str(p) for p in sorted(folder.glob("*.tfrecord"))]
    shardkit = [sys.executable, "-m", "shardkit.cli", "reshard", str(folder), "-o", str(out / "shardkit"),
                "--shards", str(args.shards), "--seed", "0", "--split", "train"]  # fmt: skip
    if args.workers:
        shardkit += ["--workers", str(args.workers)]
    every = {
        "tf": [sys.executable, "-c", TF_LOOP, str(folder), str(out / "tf"), str(args.shards)],
        "shardkit": shardkit,
        "cat": ["sh", "-c", 'out="$1"; shift; cat "$@" > "$out" && sync "$out"', "sh", str(out / "cat" / "all.tfrecord"), *inputs],
    }
    return {who: every[who] for who in args.contenders}


def fresh(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    os.sync()  # the last run's dirty pages written now, not during the next run
    folder.mkdir(parents=True)


def check(who: str, folder: Path, made: dict[str, Any], shards: int) -> str:
    digest, counts = digest_of(folder)
    if sum(counts) != made["records"] or digest != made["digest"]:
        sys.exit(f"{who}'s output holds {sum(counts):,} records whose digest is not the inputs' ({made['records']:,} records)")
    if who == "shardkit" and (len(counts) != shards or max(counts) - min(counts) > 1):
        sys.exit(f"shardkit wrote {len(counts)} shards of {min(counts)} to {max(counts)} records, not {shards} balanced ones")
    return f"{who} {len(counts)} files of {min(counts):,}-{max(counts):,} records"


def phases(out: Path, started: float, seconds: float) -> str:
    """Where shardkit's run spent its time, from the times of the files it left: the plan (its
    ``.shardkit/plan-*/SPLIT.plan``, written once every input is indexed) and each shard's record."""
    plans = [p.stat().st_mtime - started for p in (out / ".shardkit").glob("plan-*/*.plan")]
    times = sorted(p.stat().st_mtime - started for p in committed(out))
    if not plans or not times:
        return "no plan or shard records found"
    planned, last = max(plans), times[-1]
    return (f"start-up + indexing the inputs + the plan {planned:.1f} s, writing the {len(times)} shards {last - planned:.1f} s "
            f"(the first committed at {times[0]:.1f} s), after the last {seconds - last:.1f} s")  # fmt: skip


def bench(case: str, args: argparse.Namespace) -> None:
    folder, made = make_data(args.data, case, args.scale)
    size = sum(made["sizes"].values())
    payload = size / made["records"] - 16  # a record's framing: length, its CRC, the data's CRC
    smallest, largest = min(made["sizes"].values()) / 1e6, max(made["sizes"].values()) / 1e6
    print(f"\n# ({case}) {folder}: {made['records']:,} records of {payload:,.0f} bytes on average in {len(made['sizes'])} "
          f"files of {smallest:,.1f} to {largest:,.1f} MB, {size / 1e6:,.1f} MB", flush=True)  # fmt: skip
    subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "sh", *map(str, sorted(folder.glob("*.tfrecord")))], check=True)
    out = args.data / f"out-{os.getpid()}"  # this run's: another run may share the data folder
    todo = commands(folder, out, args)
    try:
        runs, checks, timeline, hashes = rounds(todo, out, made, args)
        medians = report(case, runs, made["records"], args.shards)
        if timeline:
            print(f"shardkit's last run: {timeline}")
        if checks:
            print(f"check: every input record once, bytes unchanged, in each output ({'; '.join(checks)})")
        if case == "a" and args.resume and "shardkit" in todo:
            resume(todo["shardkit"], out / "shardkit", medians["shardkit"], hashes, args.shards)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def rounds(
    todo: dict[str, list[str]], out: Path, made: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, list[dict[str, Any]]], list[str], str, dict[str, str]]:
    """Each contender ``args.rounds`` times, interleaved; the last round's outputs checked (and shardkit's
    hashed, for the resume), every output deleted after its run."""
    runs: dict[str, list[dict[str, Any]]] = {who: [] for who in todo}
    checks: list[str] = []
    timeline, hashes = "", {}
    for round_ in range(args.rounds):
        for who in list(todo)[:: -1 if round_ % 2 else 1]:
            fresh(out / who)
            started = time.time()
            runs[who].append(measured(todo[who]))
            if who == "shardkit":
                timeline = phases(out / who, started, runs[who][-1]["seconds"])
            if round_ == args.rounds - 1 and who != "cat":
                checks.append(check(who, out / who, made, args.shards))
                if who == "shardkit":
                    hashes = shard_hashes(out / who)
            shutil.rmtree(out / who)
        print(f"round {round_ + 1}: " + "   ".join(f"{who} {runs[who][-1]['seconds']:7.2f} s" for who in todo), flush=True)
    return runs, checks, timeline, hashes


def report(case: str, runs: dict[str, list[dict[str, Any]]], records: int, shards: int) -> dict[str, float]:
    print(f"\n({case}) {records:,} records, {len(next(iter(runs.values())))} rounds")
    print(
        f"{'contender':62} {'min s':>8} {'median s':>9} {'CPU s':>8} {'records/s':>10} {'CPU us/rec':>10} {'largest MB':>11} {'anon MB':>8}"
    )
    medians = {}
    for who, these in runs.items():
        walls = [r["seconds"] for r in these]
        medians[who] = statistics.median(walls)
        cpu = statistics.median(r["cpu_seconds"] for r in these)
        peak = max(max(r["parent_mb"], r["child_mb"]) for r in these)
        anon = max(r["anon_mb"] for r in these)
        print(f"{NAMES[who].format(shards=shards):62} {min(walls):8.2f} {medians[who]:9.2f} {cpu:8.2f} {records / medians[who]:10,.0f} "
              f"{cpu / records * 1e6:10.2f} {peak:11.0f} {anon:8.0f}")  # fmt: skip
    if "shardkit" in runs:
        largest = max(runs["shardkit"], key=lambda r: max(r["parent_mb"], r["child_mb"]))
        peak = max(largest["parent_mb"], largest["child_mb"])
        print(f"shardkit's peak RSS: parent {largest['parent_mb']:.0f} MB, its other processes "
              f"{', '.join(map(str, largest['children_mb'])) or 'none'} MB: largest {peak:.0f} MB (target <= 300 MB); "
              f"its largest anonymous RSS seen {largest['anon_mb']:.0f} MB (VmHWM counts mapped files' pages too)")  # fmt: skip
        if "tf" in runs:
            print(f"tf / shardkit wall time: {medians['tf'] / medians['shardkit']:.2f}x (target >= 2x)")
        if "cat" in runs:
            print(f"shardkit / cat wall time: {medians['shardkit'] / medians['cat']:.2f}x (the bound: 1x)")
    return medians


def resume(command: list[str], out: Path, whole: float, hashes: dict[str, str], shards: int) -> None:
    """Kill shardkit's reshard when half its shards are committed, run it again, and compare."""
    fresh(out)
    inherited = os.environ.get("PYTHONPATH")  # after ROOT, as process_tree.measured has it
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        process = subprocess.Popen(command, stdout=devnull, stderr=devnull, cwd=ROOT, start_new_session=True,
                                   env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), inherited]))))  # fmt: skip
        while process.poll() is None and len(committed(out)) < shards // 2:
            time.sleep(0.02)
        killed_at, done = time.perf_counter() - started, len(committed(out))
        os.killpg(process.pid, signal.SIGKILL)  # the whole group: the reshard and its workers
        process.wait()
    while True:  # until the group's last worker is gone
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    os.sync()
    rerun = measured(command)
    same = shard_hashes(out)
    verdict = "byte-identical to" if same == hashes else f"NOT the same as ({sorted(set(same.items()) ^ set(hashes.items()))[:4]})"
    print(f"\nresume: killed (SIGKILL, the process group) at {killed_at:.1f} s with {done} of {shards} shards committed; "
          f"the rerun took {rerun['seconds']:.2f} s = {rerun['seconds'] / whole:.2f}x a whole run's median {whole:.2f} s "
          f"(target: about 0.5x); killed run + rerun {killed_at + rerun['seconds']:.2f} s")  # fmt: skip
    print(f"resume: the rerun's {len(same)} shard and .idx files are {verdict} the uninterrupted run's (sha256)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="the issue's sizes times this (records; files stay 40 and 10)")
    parser.add_argument("--quick", action="store_const", const=0.01, dest="scale", help="--scale 0.01: 40 MB and 20,000 records")
    parser.add_argument("--only", choices=tuple(CASES), help="run one of the two cases")
    parser.add_argument("--rounds", type=int, default=3, help="each contender runs this many times, interleaved")
    parser.add_argument("--workers", type=int, help="shardkit's --workers (default: its own, the cores)")
    parser.add_argument("--shards", type=int, default=64, help="output shards (the issue: 64)")
    parser.add_argument("--contenders", default="tf,shardkit,cat", help="a comma list of tf, shardkit, cat")
    parser.add_argument("--no-resume", dest="resume", action="store_false", help="skip the kill-and-resume run of case (a)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "bench-data" / "reshard", help="where the data is made and kept")
    args = parser.parse_args()
    args.contenders = [who for who in NAMES if who in args.contenders.split(",")]
    if not args.contenders:
        parser.error("--contenders: name one or more of tf, shardkit, cat")
    args.data = args.data.resolve()  # the contenders run in the repository's root
    args.data.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    load = os.getloadavg()
    print(f"# {os.cpu_count()} cores; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    for case in CASES:
        if args.only in (None, case):
            bench(case, args)
    load = os.getloadavg()
    print(f"\n# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
