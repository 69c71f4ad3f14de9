#!/usr/bin/env python3
"""Building into a bucket against building into a local folder, in one run.

    python scripts/bench_bucket.py [--train 1200] [--workers 2] [--records-per-shard 100]

A demo segmentation set (320x240 JPEG + PNG mask, one augmented copy per entry) is built with
the same options into: (a) a local folder, (b) moto's S3 server on 127.0.0.1, (c) fake-gcs-server
on 127.0.0.1, then (a) again to show the drift between runs. ``--link-mbps R`` puts a proxy of R MB/s a
connection between the build and the servers, as a bucket across a network is: uploads then
wait on the link, not the CPU, and each bucket build runs again with every upload waited for
(no overlap with encoding the next shard), to show what the overlap gains. Each build runs in a child process
(`shardkit build`), so no cache or pool is shared. Printed: seconds, records/s, MB/s of shards
written, the CPU time of the build's processes and of the server, and each bucket build's
ratio to the mean of the local ones.

The servers run on the same cores as the build: their CPU time (HTTP parsing, storing the
bytes) is part of what is measured, which a real bucket does not cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import shardkit
from shardkit import demo

# The servers are started as the tests start them: tests/ of the checkout shardkit runs from.
sys.path.insert(0, str(Path(shardkit.__file__).resolve().parent.parent))
from tests import object_stores

CONFIG = """\
features:
  image: {kind: image, column: 0, encoding: jpeg, quality: 90}
  mask: {kind: mask, column: 1}
augment:
  copies: 1
  keep_original: true
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.9}
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


NO_OVERLAP = "import sys; from shardkit.pipeline import local_executors; local_executors.OVERLAP_UPLOADS = False; "
NO_OVERLAP += "sys.argv[0] = 'shardkit'; from shardkit.cli import run; run()"


def build(
    data: Path, out: str, args: argparse.Namespace, env: dict[str, str], server: int | None = None, overlap: bool = True
) -> dict[str, float]:
    program = ["-m", "shardkit.cli"] if overlap else ["-c", NO_OVERLAP]
    command = [sys.executable, *program, "build", str(data), "-o", out, "-c", str(data / "config.yaml"), "-q",
               "-w", str(args.workers), "--records-per-shard", str(args.records_per_shard)]  # fmt: skip
    server_cpu = cpu_seconds(server) if server else 0.0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, **env})
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build's processes: CLI and pool workers
    build_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    server_cpu = cpu_seconds(server) - server_cpu if server else 0.0
    from shardkit.storage import location

    with object_stores.environment(env):
        manifest = json.loads(location.read_bytes(location.join(out, "manifest.json")))
    records, size = manifest["totals"]["records"], manifest["totals"]["bytes"]
    return {"seconds": seconds, "records": records, "mb": size / 1e6, "server_cpu": server_cpu, "build_cpu": build_cpu}


def show(name: str, figures: dict[str, float], baseline: float | None) -> None:
    ratio = f"  {baseline / figures['seconds']:.2f}x local speed; server {figures['server_cpu']:.1f} CPU-s" if baseline else ""
    print(
        f"{name:<28} {figures['seconds']:7.2f} s  {figures['records'] / figures['seconds']:7.0f} rec/s  "
        f"{figures['mb'] / figures['seconds']:6.1f} MB/s ({figures['mb']:.0f} MB)  build {figures['build_cpu']:.1f} CPU-s{ratio}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=1200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records-per-shard", type=int, default=100)
    parser.add_argument("--link-mbps", type=float, default=0, help="reach the servers through a link of this many MB/s a connection")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shardkit-bench-bucket-"))
    try:
        data = demo.make_segmentation(work / "data", train=args.train, val=args.train // 6, width=320, height=240)
        (data / "config.yaml").write_text(CONFIG)
        print(f"{args.train + args.train // 6} entries x 2 records, --workers {args.workers}, cores: {os.cpu_count()}", flush=True)
        first = build(data, str(work / "out-1"), args, {})
        show("local folder", first, None)
        results = {}
        for name, server, variable in (("s3 (moto server)", object_stores.s3_server, "AWS_ENDPOINT_URL"),
                                       ("gs (fake-gcs-server)", object_stores.gcs_server, "STORAGE_EMULATOR_HOST")):  # fmt: skip
            with server() as store, object_stores.environment(store.env):
                bucket = store.new_bucket()
                env = store.env
                if args.link_mbps:  # the build reaches the server through a slow link
                    proxy = object_stores.CuttableProxy(int(store.endpoint.rsplit(":", 1)[1]), args.link_mbps * 1e6)
                    env = {**env, variable: f"http://127.0.0.1:{proxy.port}"}
                results[name] = build(data, f"{bucket}/out", args, env, store.process.pid)
                if args.link_mbps:
                    results[f"{name[:2]}, each upload waited for"] = build(data, f"{bucket}/out2", args, env, store.process.pid, False)
                    proxy.close()
        second = build(data, str(work / "out-2"), args, {})
        show("local folder, again", second, None)
        local = (first["seconds"] + second["seconds"]) / 2
        for name, figures in results.items():
            show(name, figures, local)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
