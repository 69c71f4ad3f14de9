#!/usr/bin/env python3
"""verify's CRC walk against TensorFlow's own reader, on the same page-cached files.

    python scripts/bench_verify.py [--mb 512] [--repeat 3]
    python scripts/bench_verify.py --bucket [--mb 256]

For small (~17 KB) and large (~200 KB) records: shardkit's scan (length CRC, data CRC and the
whole-file CRC32C, one process) against `for r in tf.data.TFRecordDataset(files): pass`.

``--bucket``: the same scan of the same files from local S3 and GCS servers (moto and
fake-gcs-server, started here as the tests start them) against the local disk, in one run: what
streaming an object through fsspec's block reads costs next to a page-cached file. The servers
run on this machine and are the bottleneck (moto is a Python server), so their figures are a
floor, not a prediction for a real bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shardkit.formats.containers.tfrecord_io import frame  # noqa: E402
from shardkit.formats.containers.tfrecord_scan import scan  # noqa: E402


def make(path: Path, record_bytes: int, total_mb: int) -> None:
    if path.exists():
        return
    payloads = [os.urandom(record_bytes + i) for i in range(16)]
    with open(path, "wb") as f:
        written, i = 0, 0
        while written < total_mb << 20:
            chunk = frame(payloads[i % 16])
            f.write(chunk)
            written += len(chunk)
            i += 1


def best_of(repeat: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def bucket_mode(folder: Path, mb: int, repeat: int) -> None:
    """verify's scan from local S3 and GCS servers against the same files on the local disk."""
    import shardkit

    sys.path.insert(0, str(Path(shardkit.__file__).resolve().parent.parent))  # the checkout's tests/, which start the servers
    from shardkit.storage import location
    from tests import object_stores

    files = []
    for record_bytes in (17_000, 200_000):
        path = folder / f"r{record_bytes}.tfrecord"
        make(path, record_bytes, mb)
        files.append((record_bytes, path))
    seconds: dict[tuple[str, int], float] = {}
    for server in (object_stores.s3_server, object_stores.gcs_server):
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(server())
            stack.enter_context(object_stores.environment(store.env))
            bucket = store.new_bucket()
            for record_bytes, path in files:
                url = f"{bucket}/{path.name}"
                location.upload(str(path), url)
                result = scan(url)
                assert result.ok and result.file_bytes == path.stat().st_size, result.describe_error()
                seconds[store.scheme, record_bytes] = best_of(repeat, lambda u=url: scan(u))
    print(f"{'records':>14} {'file':>8} {'local disk':>12} {'moto S3':>12} {'fake GCS':>12} {'S3 vs disk':>11}")
    for record_bytes, path in files:
        size = path.stat().st_size
        path.read_bytes()  # into the page cache
        assert scan(str(path)).ok
        local = best_of(repeat, lambda p=path: scan(str(p)))
        s3, gs = seconds["s3", record_bytes], seconds["gs", record_bytes]
        label = f"~{record_bytes // 1000} KB"
        rates = "".join(f" {size / t / 1e9:7.2f} GB/s" for t in (local, s3, gs))
        print(f"{label:>14} {size / 1e6:7.0f}M{rates} {s3 / local:9.0f}x slower")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=512, help="size of each test file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT / "bench-data")
    parser.add_argument("--bucket", action="store_true", help="local disk against a local S3 server (moto), instead of tf.data")
    args = parser.parse_args()
    if args.bucket:
        args.data.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="verify-", dir=args.data))
        try:
            bucket_mode(folder, args.mb, args.repeat)
        finally:
            for p in folder.glob("*"):
                p.unlink()
            folder.rmdir()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    args.data.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="verify-", dir=args.data))
    print(f"{'records':>14} {'file':>8} {'shardkit scan':>15} {'tf.data loop':>14} {'ratio':>7}")
    try:
        for record_bytes in (17_000, 200_000):
            path = folder / f"r{record_bytes}.tfrecord"
            make(path, record_bytes, args.mb)
            size = path.stat().st_size
            path.read_bytes()  # into the page cache
            result = scan(str(path))
            assert result.ok, result.describe_error()
            t_scan = best_of(args.repeat, lambda p=path: scan(str(p)))

            def tf_loop(p: Path = path) -> None:
                for _ in tf.data.TFRecordDataset([str(p)]):
                    pass

            t_tf = best_of(args.repeat, tf_loop)
            gbs, tf_gbs = size / t_scan / 1e9, size / t_tf / 1e9
            label = f"~{record_bytes // 1000} KB"
            print(f"{label:>14} {size / 1e6:7.0f}M {gbs:11.2f} GB/s {tf_gbs:9.2f} GB/s {gbs / tf_gbs:6.1f}x")
        print("targets: >= 2 GB/s per process, >= 1.5x tf.data")
    finally:
        for p in folder.glob("*"):
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
