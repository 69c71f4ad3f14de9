#!/usr/bin/env python3
"""shardkit build benchmark: images/s against a compute floor and the seed-style baseline, same data, one run.

    python scripts/bench.py [--images 2000] [--workers N] [--data bench-data]

(a) floor:     the same decode + augment + encode per image in bare worker processes, bytes thrown away
(b) baseline:  the seed-style script: one process per index file via Pool(os.cpu_count()).starmap_async,
               each writing its own TFRecord with tf.io.TFRecordWriter (and importing TensorFlow)
(c) shardkit:  `shardkit.build` with the same augmentation
(d) pass-through: shardkit with the raw config (no decode) against `cp` of the same files
--large-photos: 12-megapixel JPEGs (scikit-image's photos enlarged, with noise, q90) and masks, pipeline
               SmallestMaxSize(512) + flip + brightness, JPEG q90 out, images alone and with masks: (a) the
               full-decode floor in bare worker processes, (a') a bare loop decoding at half scale, shardkit
               with reduced decoding (the default) and with `decode: exact`; PSNR of reduced against exact
--scaling:      the augmented build at 1, 2, 4, ... local pool workers, and through a real `dask scheduler`
               and 2 single-threaded `dask worker` processes on 127.0.0.1 (as started by default, with
               Dask's profiler kept sampling during shardkit tasks, started with the profiler off, and
               without nannies), workers warmed up; parallel efficiency

Images are ~640x480 JPEG crops of scikit-image's bundled photographs with PNG masks; index files are
of unequal size (train_0 50 %, train_1 25 %, val 15 %, test 10 %), as real splits are.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PIPELINE = [
    {"__class_fullname__": "HorizontalFlip", "p": 0.5},
    {"__class_fullname__": "RandomSizedCrop", "min_max_height": [320, 480], "size": [480, 640], "p": 0.5},
    {"__class_fullname__": "RandomBrightnessContrast", "p": 0.8},
]
QUALITY = 95
# Two ways people split index files: the classic three files, and a split cut into parts.
PARTS = "(b')"
LAYOUTS = {
    "classic": (("train", 0.70), ("val", 0.15), ("test", 0.15)),
    "parts": (("train_0", 0.50), ("train_1", 0.25), ("val", 0.15), ("test", 0.10)),
}


# ----------------------------------------------------------------------------- data
def make_data(root: Path, count: int) -> Path:
    marker = root / f".complete-{count}"
    if marker.exists():
        return root
    import skimage.data as d

    photos = [d.astronaut(), d.chelsea(), d.coffee(), d.rocket(), d.immunohistochemistry(), d.hubble_deep_field(), d.retina()]
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        photo = Image.fromarray(photos[i % len(photos)])
        scale = max(640 / photo.width, 480 / photo.height) * rng.uniform(1.0, 1.6)
        photo = photo.resize((int(photo.width * scale) + 1, int(photo.height * scale) + 1), Image.Resampling.BILINEAR)
        x, y = int(rng.integers(0, photo.width - 640 + 1)), int(rng.integers(0, photo.height - 480 + 1))
        crop = photo.crop((x, y, x + 640, y + 480))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        mask = Image.fromarray((np.asarray(crop.convert("L")) // 52).astype(np.uint8))  # 5 classes by brightness
        crop.save(root / "images" / f"{i:06d}.jpg", quality=90)
        mask.save(root / "masks" / f"{i:06d}.png")
        names.append(f"../images/{i:06d}.jpg ../masks/{i:06d}.png")
    for layout, splits in LAYOUTS.items():
        (root / layout).mkdir(exist_ok=True)
        start = 0
        for name, share in splits:
            stop = count if name == splits[-1][0] else start + int(count * share)
            (root / layout / f"{name}.txt").write_text("".join(f"{line}\n" for line in names[start:stop]))
            start = stop
    marker.write_text("ok")
    return root


def index_files(root: Path, layout: str = "classic") -> list[Path]:
    return [root / layout / f"{name}.txt" for name, _ in LAYOUTS[layout]]


def entries_of(index: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in index.read_text().splitlines() if line.strip()]  # type: ignore[misc]


# ----------------------------------------------------------------------------- (a) floor
def _floor_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def _floor_chunk(root: str, pairs: list[tuple[str, str]], seed: int) -> int:
    """Decode, augment and encode image + mask; throw the bytes away."""
    import io

    import albumentations as A

    compose = A.from_dict({"transform": {"__class_fullname__": "Compose", "transforms": PIPELINE}})
    for i, (image_path, mask_path) in enumerate(pairs):
        image = np.asarray(Image.open(os.path.join(root, "classic", image_path)).convert("RGB"))
        mask = np.asarray(Image.open(os.path.join(root, "classic", mask_path)))
        compose.set_random_seed(seed + i)
        out = compose(image=image, mask=mask)
        buf = io.BytesIO()
        Image.fromarray(out["image"]).save(buf, format="JPEG", quality=QUALITY)
        buf = io.BytesIO()
        Image.fromarray(out["mask"]).save(buf, format="PNG", compress_level=1)
    return len(pairs)


def run_floor(root: Path, workers: int) -> tuple[int, float]:
    pairs = [p for index in index_files(root) for p in entries_of(index)]
    chunks = [pairs[i : i + 64] for i in range(0, len(pairs), 64)]
    started = time.perf_counter()
    with get_context("fork").Pool(workers, initializer=_floor_init) as pool:
        done = sum(pool.starmap(_floor_chunk, [(str(root), chunk, i * 1000) for i, chunk in enumerate(chunks)], chunksize=1))
    return done, time.perf_counter() - started


# ----------------------------------------------------------------------------- large photos
LARGE_PIPELINE = [
    {"__class_fullname__": "SmallestMaxSize", "max_size": 512, "p": 1.0},
    {"__class_fullname__": "HorizontalFlip", "p": 0.5},
    {"__class_fullname__": "RandomBrightnessContrast", "contrast_limit": 0.0, "p": 0.8},
]
LARGE_QUALITY = 90


def _large_chunk(root: str, rows: list[list[str]], seed: int, reduced: bool) -> int:
    """(a) Pillow decodes whole, the whole pipeline, encode; or (a') simplejpeg at half scale, the
    rest of the pipeline after a resize to the same size (masks whole, as they must be). Bytes dropped."""
    import io

    import albumentations as A
    import cv2
    import simplejpeg

    compose = A.from_dict({"transform": {"__class_fullname__": "Compose", "transforms": LARGE_PIPELINE[1 if reduced else 0 :]}})
    for i, row in enumerate(rows):
        arrays: dict[str, np.ndarray] = {}
        if reduced:
            data = Path(root, row[0]).read_bytes()
            height, width = simplejpeg.decode_jpeg_header(data)[:2]
            scale = 512 / min(height, width)
            size = (max(1, round(width * scale)), max(1, round(height * scale)))
            half = simplejpeg.decode_jpeg(data, min_height=-(-height // 2), min_width=-(-width // 2))
            arrays["image"] = cv2.resize(half, size, interpolation=cv2.INTER_LINEAR)
            if len(row) > 1:
                mask = cv2.imdecode(np.fromfile(os.path.join(root, row[1]), np.uint8), cv2.IMREAD_UNCHANGED)
                arrays["mask"] = cv2.resize(mask, size, interpolation=cv2.INTER_NEAREST)
        else:
            arrays["image"] = np.asarray(Image.open(os.path.join(root, row[0])).convert("RGB"))
            if len(row) > 1:
                arrays["mask"] = np.asarray(Image.open(os.path.join(root, row[1])))
        compose.set_random_seed(seed + i)
        out = compose(**arrays)
        Image.fromarray(out["image"]).save(io.BytesIO(), format="JPEG", quality=LARGE_QUALITY)
        if "mask" in out:
            Image.fromarray(out["mask"]).save(io.BytesIO(), format="PNG", compress_level=1)
    return len(rows)


def run_large_bare(root: Path, workers: int, masks: bool, reduced: bool) -> tuple[int, float]:
    rows = [line.split()[: 2 if masks else 1] for line in (root / "train.txt").read_text().splitlines() if line.strip()]
    chunks = [rows[i : i + 8] for i in range(0, len(rows), 8)]
    started = time.perf_counter()
    with get_context("fork").Pool(workers, initializer=_floor_init) as pool:
        args = [(str(root), chunk, i * 1000, reduced) for i, chunk in enumerate(chunks)]
        done = sum(pool.starmap(_large_chunk, args, chunksize=1))
    return done, time.perf_counter() - started


def run_large_shardkit(root: Path, out: Path, workers: int, masks: bool, decode: str, encoding: str = "jpeg") -> tuple[int, float]:
    import shardkit
    from shardkit.pipeline.config import parse_config

    features: dict[str, Any] = {"image": {"kind": "image", "column": 0, "encoding": encoding, "quality": LARGE_QUALITY}}
    if masks:
        features["mask"] = {"kind": "mask", "column": 1}
    config = parse_config({"features": features, "augment": {"copies": 1, "decode": decode, "pipeline": LARGE_PIPELINE}})
    index = root / "train.txt" if masks else root / "alone" / "train.txt"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    result = shardkit.build([index], out, config=config, workers=workers, progress=False, seed=5, records_per_shard=16)
    return result.records, time.perf_counter() - started


def fidelity(reduced: Path, exact: Path) -> tuple[float, float, bool]:
    """(lowest, median) PSNR of the reduced build's images against the exact build's, and whether every mask is identical."""
    import io

    from shardkit.reader import ShardReader

    def records(out: Path) -> list[dict[str, Any]]:
        return [dict(r) for r in ShardReader(str(out), split="train")]

    values, same = [], True
    for r, e in zip(records(reduced), records(exact), strict=True):
        a, b = (np.asarray(Image.open(io.BytesIO(x["image"])), dtype=np.float64) for x in (r, e))
        mse = float(np.mean((a - b) ** 2))
        values.append(10 * np.log10(255.0**2 / mse) if mse else float("inf"))  # inf: identical
        if "mask" in r:
            same = same and np.array_equal(*(np.asarray(Image.open(io.BytesIO(x["mask"]))) for x in (r, e)))
    return min(values), statistics.median(values), same


def large_photos(data: Path, scratch: Path, count: int, size: tuple[int, int], workers: int, repeat: int) -> None:
    from shardkit import demo

    root = data / f"photos-{count}-{size[0]}x{size[1]}"
    if not (root / f".complete-{count}").exists():
        t0 = time.perf_counter()
        demo.make_photos(root, count, *size)
        (root / "alone").mkdir(exist_ok=True)  # the same photos without masks: a split of its own, also named train
        (root / "alone" / "train.txt").write_text(
            "".join(f"../{line.split()[0]}\n" for line in (root / "train.txt").read_text().splitlines())
        )
        (root / f".complete-{count}").write_text("ok")
        print(f"made {count} photos in {time.perf_counter() - t0:.0f}s")
    for module in ("albumentations", "cv2", "simplejpeg", "shardkit.pipeline.shard.augment", "shardkit.pipeline.shard.reduced_decode"):
        __import__(module)  # forked workers start with them, as a long build's workers have them: imports are not timed
    sizes = [p.stat().st_size for p in (root / "images").glob("*.jpg")]
    print(f"data: {count} JPEGs {size[0]}x{size[1]} q90 ({min(sizes) / 1e6:.1f}-{max(sizes) / 1e6:.1f} MB) + PNG masks in {root}")
    print(f"machine: {os.cpu_count()} cores, workers={workers}, best of {repeat} runs (interleaved)")
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()
    for masks in (False, True):
        contenders: dict[str, Callable[[], tuple[int, float]]] = {
            "(a) floor: Pillow decodes whole + pipeline + encode": lambda m=masks: run_large_bare(root, workers, m, reduced=False),
            "(a') bare loop: half-scale decode + resize + rest": lambda m=masks: run_large_bare(root, workers, m, reduced=True),
            "shardkit, reduced decoding (default)": lambda m=masks: run_large_shardkit(root, scratch / "reduced", workers, m, "reduced"),
            "shardkit, decode: exact": lambda m=masks: run_large_shardkit(root, scratch / "exact", workers, m, "exact"),
        }
        best: dict[str, tuple[int, float]] = {}
        for _ in range(repeat):
            for name, run in contenders.items():
                n, t = run()
                if name not in best or t < best[name][1]:
                    best[name] = (n, t)
        print(f"\n{'images alone' if not masks else 'images + full-resolution masks':52} {'images':>7} {'seconds':>8} {'images/s':>9}")
        floor = best["(a) floor: Pillow decodes whole + pipeline + encode"]
        for name in contenders:
            n, t = best[name]
            ratio = (n / t) / (floor[0] / floor[1])
            print(f"{name:52} {n:7d} {t:8.2f} {n / t:9.2f}   {ratio:.2f}x floor")
        print(f"target: reduced / floor >= {1.5 if masks else 2.5}x")
        low, median, same = fidelity(scratch / "reduced", scratch / "exact")
        print(f"PSNR of the stored JPEGs, reduced vs exact: lowest {low:.1f} dB, median {median:.1f} dB"
              + (f";  masks identical: {same}" if masks else ""))  # fmt: skip
    for decode in ("reduced", "exact"):  # the same builds storing PNG: the pixels before JPEG re-encoding
        run_large_shardkit(root, scratch / f"png-{decode}", workers, False, decode, encoding="png")
    low, median, _ = fidelity(scratch / "png-reduced", scratch / "png-exact")
    print(f"\nPSNR before re-encoding (PNG builds), reduced vs exact: lowest {low:.1f} dB, median {median:.1f} dB (target >= 38)")


# ----------------------------------------------------------------------------- (b) seed-style baseline
def _seed_style_file(root: str, index: str, out: str) -> int:
    """What the usual script does: a whole index file in one process, TensorFlow's writer, OpenCV threads left on."""
    import io

    import albumentations as A
    import tensorflow as tf

    compose = A.Compose([A.from_dict({"transform": t}) for t in PIPELINE])
    count = 0
    with tf.io.TFRecordWriter(out) as writer, open(index) as lines:
        for line in lines:
            if not line.strip():
                continue
            image_path, mask_path = line.split()
            folder = os.path.dirname(index)
            image = np.asarray(Image.open(os.path.join(folder, image_path)).convert("RGB"))
            mask = np.asarray(Image.open(os.path.join(folder, mask_path)))
            out_arrays = compose(image=image, mask=mask)
            img_buf, mask_buf = io.BytesIO(), io.BytesIO()
            Image.fromarray(out_arrays["image"]).save(img_buf, format="JPEG", quality=QUALITY)
            Image.fromarray(out_arrays["mask"]).save(mask_buf, format="PNG", compress_level=1)
            h, w = out_arrays["image"].shape[:2]
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[img_buf.getvalue()])),
                "mask": tf.train.Feature(bytes_list=tf.train.BytesList(value=[mask_buf.getvalue()])),
                "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[h])),
                "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[w])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            count += 1
    return count


def run_baseline(root: Path, out: Path, layout: str) -> tuple[int, float]:
    out.mkdir(parents=True, exist_ok=True)
    args = [(str(root), str(index), str(out / f"{index.stem}.tfrecord")) for index in index_files(root, layout)]
    started = time.perf_counter()
    with get_context("spawn").Pool(os.cpu_count()) as pool:  # TensorFlow is not fork-safe
        done = sum(pool.starmap_async(_seed_style_file, args).get())
    return done, time.perf_counter() - started


# ----------------------------------------------------------------------------- (c), (d) shardkit
def run_shardkit(root: Path, out: Path, workers: int, augment: bool, fsync: bool = True) -> tuple[int, float]:
    import shardkit
    from shardkit.pipeline.config import parse_config

    features = {
        "image": {"kind": "image", "column": 0, "encoding": "jpeg" if augment else "raw", "quality": QUALITY},
        "mask": {"kind": "mask", "column": 1},
    }
    raw = {"features": features, "augment": {"copies": 1, "pipeline": PIPELINE}} if augment else {"features": features}
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    result = shardkit.build([root / "classic"], out, config=parse_config(raw), workers=workers, progress=False, fsync=fsync)
    return result.records, time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dask_processes(workers: int, nanny: bool, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A real `dask scheduler` and ``workers`` single-threaded `dask worker` processes on 127.0.0.1,
    started as users start them (with or without the nanny), warmed up, always torn down."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    python = [sys.executable, "-m"]
    quiet: dict[str, Any] = {
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "start_new_session": True,
        "env": {**os.environ, **(env or {})},
    }
    procs = [subprocess.Popen([*python, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                               "--no-dashboard"], **quiet)]  # fmt: skip
    try:
        worker = [*python, "distributed.cli.dask_worker", address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"]
        procs += [subprocess.Popen([*worker, *([] if nanny else ["--no-nanny"])], **quiet) for _ in range(workers)]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
            # A long-lived cluster's workers have imported these already: do not time the imports.
            client.run(
                lambda: [
                    __import__(m) for m in ("albumentations", "cv2", "shardkit.pipeline.shard.worker", "shardkit.pipeline.shard.augment")
                ]
            )
        yield address, procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _cpu_seconds(process: Any) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def dask_cpu(procs: list[subprocess.Popen[bytes]], nanny: bool) -> tuple[float, float]:
    """CPU seconds so far of (the worker processes, Dask's machinery: the scheduler and the nannies)."""
    import psutil  # a dependency of distributed

    scheduler, *started = (psutil.Process(p.pid) for p in procs)
    workers = [child for p in started for child in p.children(recursive=True)] if nanny else started
    machinery = [scheduler, *(started if nanny else [])]
    return sum(map(_cpu_seconds, workers)), sum(map(_cpu_seconds, machinery))


def run_dask(
    root: Path, out: Path, workers: int, nanny: bool = True, env: dict[str, str] | None = None, profile: bool = False
) -> tuple[int, float, float]:
    """The same augmented build through real Dask worker processes (see ``dask_processes``): records,
    seconds, and the share of the build's CPU time spent outside the worker processes (scheduler,
    nannies, and this client process, which plans and writes the manifest as a local build does)."""
    import shardkit
    from shardkit.executors import DaskExecutor
    from shardkit.pipeline.config import parse_config

    features = {"image": {"kind": "image", "column": 0, "encoding": "jpeg", "quality": QUALITY}, "mask": {"kind": "mask", "column": 1}}
    config = parse_config({"features": features, "augment": {"copies": 1, "pipeline": PIPELINE}})
    with dask_processes(workers, nanny, env) as (address, procs):
        shutil.rmtree(out, ignore_errors=True)
        work_before, machinery_before = dask_cpu(procs, nanny)
        client_before = time.process_time()
        started = time.perf_counter()
        executor = DaskExecutor(address, profile=profile)
        result = shardkit.build([root / "classic"], out, config=config, workers=workers, progress=False, executor=executor)
        seconds = time.perf_counter() - started
        work_after, machinery_after = dask_cpu(procs, nanny)
        work = work_after - work_before
        machinery = machinery_after - machinery_before + time.process_time() - client_before
        return result.records, seconds, machinery / (work + machinery)


def run_cp(root: Path, out: Path, sync: bool) -> float:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    started = time.perf_counter()
    subprocess.run(["cp", "-r", str(root / "images"), str(root / "masks"), str(out)], check=True)
    if sync:
        subprocess.run(["sync", "-f", str(out)], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--repeat", type=int, default=3, help="runs of each contender, interleaved; the best counts")
    parser.add_argument("--data", type=Path, default=ROOT / "bench-data")
    parser.add_argument("--skip-baseline", action="store_true", help="skip (b), which needs TensorFlow")
    parser.add_argument("--scaling", action="store_true", help="only the scaling table: 1..cores workers, and Dask")
    parser.add_argument("--large-photos", type=int, metavar="N", help="only the large-photos workload, on N 12-megapixel photos")
    parser.add_argument("--photo-size", default="4032x3024", metavar="WxH", help="the large photos' size (smaller: a quick check)")
    args = parser.parse_args()

    if args.large_photos:
        args.data.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="shardkit-bench-", dir=args.data))
        try:
            size = tuple(int(n) for n in args.photo_size.split("x"))
            large_photos(args.data, scratch, args.large_photos, (size[0], size[1]), args.workers, args.repeat)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    t0 = time.perf_counter()
    root = make_data(args.data / f"images-{args.images}", args.images)
    print(f"data: {args.images} images 640x480 + masks in {root} (made/checked in {time.perf_counter() - t0:.1f}s)")
    print(f"machine: {os.cpu_count()} cores, workers={args.workers}, python {sys.version.split()[0]}, best of {args.repeat} runs")
    scratch = Path(tempfile.mkdtemp(prefix="shardkit-bench-", dir=args.data))
    if args.scaling:
        try:
            scaling_table(root, scratch, args.repeat)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    contenders: dict[str, Callable[[], tuple[int, float]]] = {
        "(a) floor: decode+augment+encode, bytes dropped": lambda: run_floor(root, args.workers),
        "(c) shardkit build": lambda: run_shardkit(root, scratch / "shardkit", args.workers, augment=True),
    }
    if not args.skip_baseline:
        contenders["(b) seed-style, classic train/val/test files"] = lambda: run_baseline(root, scratch / "b1", "classic")
        contenders["(b') seed-style, train split in two files"] = lambda: run_baseline(root, scratch / "b2", "parts")
    copies: dict[str, Callable[[], tuple[int, float]]] = {
        "shardkit pass-through (raw), fsync": lambda: run_shardkit(root, scratch / "raw", args.workers, augment=False),
        "shardkit pass-through (raw), --no-fsync": lambda: run_shardkit(root, scratch / "raw", args.workers, False, fsync=False),
        "cp -r": lambda: (args.images, run_cp(root, scratch / "cp", sync=False)),
        "cp -r && sync": lambda: (args.images, run_cp(root, scratch / "cp", sync=True)),
    }
    try:
        for path in root.rglob("*"):  # warm the page cache: every contender reads from memory
            if path.is_file():
                path.read_bytes()
        best: dict[str, tuple[int, float]] = {}
        for _ in range(args.repeat):
            for name, run in {**contenders, **copies}.items():
                n, t = run()
                if name not in best or t < best[name][1]:
                    best[name] = (n, t)
        print(f"\n{'contender':52} {'images':>7} {'seconds':>8} {'images/s':>9}")
        for name in contenders:
            n, t = best[name]
            print(f"{name:52} {n:7d} {t:8.2f} {n / t:9.1f}")
        rate = {name.split()[0]: n / t for name, (n, t) in best.items() if name.startswith("(")}
        print(f"\nshardkit / floor                = {rate['(c)'] / rate['(a)']:.2f}x   (target >= 0.9x)")
        if "(b)" in rate:
            print(f"shardkit / seed-style (classic) = {rate['(c)'] / rate['(b)']:.2f}x   (target >= 2x)")
            print(f"shardkit / seed-style (parts)   = {rate['(c)'] / rate[PARTS]:.2f}x")
        print(f"\n{'pass-through vs cp':52} {'seconds':>8}")
        for name in copies:
            print(f"{name:52} {best[name][1]:8.2f}")
        raw, raw_nosync = best["shardkit pass-through (raw), fsync"][1], best["shardkit pass-through (raw), --no-fsync"][1]
        cp, cp_sync = best["cp -r"][1], best["cp -r && sync"][1]
        print(f"\npass-through --no-fsync / cp       = {raw_nosync / cp:.2f}x   (target <= 1.5x)")
        print(f"pass-through (fsync) / cp && sync  = {raw / cp_sync:.2f}x")
        print(f"pass-through (fsync) / cp          = {raw / cp:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def scaling_table(root: Path, scratch: Path, repeat: int) -> None:
    """images/s at 1, 2, ... workers, and through Dask worker processes; parallel efficiency."""
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, *range(4, cores + 1, 4), cores} & set(range(1, cores + 1)))
    dask_workers = min(2, cores)
    # As `dask worker` starts by default (nanny, profiler on; shardkit pauses the profiler during its tasks),
    # the same with the profiler kept sampling, and workers started without profiler or nanny.
    no_profiler = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    dask_kinds: dict[str, tuple[bool, dict[str, str] | None, bool]] = {
        "dask, defaults": (True, None, False),
        "dask, profiler kept on": (True, None, True),
        "dask, no profiler": (True, no_profiler, False),
        "dask, no nanny/profiler": (False, no_profiler, False),
    }
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()
    for module in ("albumentations", "cv2", "shardkit.pipeline.shard.augment"):  # as the Dask workers have: imports are not timed
        __import__(module)

    def pool(n: int) -> float:
        images, t = run_shardkit(root, scratch / "scale", n, augment=True)
        return images / t

    # This machine's speed drifts by tens of % over minutes, so every ratio is taken between runs
    # made back to back (each Dask run right after a local pool run of the same size), one per
    # repeat, and the table shows their median and range beside the best rates.
    best: dict[str, float] = {}
    paired: dict[str, list[float]] = {}
    machinery: dict[str, list[float]] = {}

    def keep(name: str, rate: float) -> float:
        best[name] = max(best.get(name, 0.0), rate)
        return rate

    for _ in range(repeat):
        rates = {n: keep(f"pool {n}", pool(n)) for n in counts}
        for n in counts:
            paired.setdefault(f"pool {n}", []).append(rates[n] / (n * rates[1]))
        for kind, (nanny, env, profile) in dask_kinds.items():
            local = keep(f"pool {dask_workers}", pool(dask_workers))
            images, t, share = run_dask(root, scratch / "dask", dask_workers, nanny, env, profile)
            paired.setdefault(kind, []).append(keep(kind, images / t) / local)
            machinery.setdefault(kind, []).append(share)

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print(f"\n{'executor':24} {'workers':>7} {'best images/s':>13}  {'efficiency, paired: median (range)':34}")
    for n in counts:
        print(f"{'local pool':24} {n:7d} {best[f'pool {n}']:13.1f}  {spread(paired[f'pool {n}'])}")
    vs_pool = f"/ local pool at {dask_workers}, paired: median (range)"
    print(f"\n{'executor':24} {'workers':>7} {'best images/s':>13}  {vs_pool:38}  CPU outside the workers: median (range)")
    for kind in dask_kinds:
        shares = [100 * m for m in machinery[kind]]
        own = f"{statistics.median(shares):.1f} % ({min(shares):.1f}-{max(shares):.1f})"
        print(f"{kind:24} {dask_workers:7d} {best[kind]:13.1f}  {spread(paired[kind]):38}  {own}")
    print("\nefficiency = rate / (workers x rate at 1 worker), from the same repeat   (target >= 0.9)")
    print("dask / local pool: each Dask run over the local pool run just before it     (target >= 0.9: within 10 %)")
    print("CPU outside the workers: scheduler + nannies + this client process (its planning and manifest too), over all CPU")
    print("  time the build took; the workers' own event loops count as work, so this is a rough bound on Dask's cost")


if __name__ == "__main__":
    main()
