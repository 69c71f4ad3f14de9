"""TFDV's statistics of TFRecord files, for scripts/bench_stats.py to compare shardkit's with.

Runs under the TFDV environment's Python (``bash scripts/tfdv_env.sh`` makes it), never the
project's: it imports TensorFlow Data Validation and not shardkit.

    /work/tfdv-venv/bin/python scripts/tfdv_stats.py OUT.pb train='OUT/train-*.tfrecord' test='OUT/test-*.tfrecord'

Each NAME=GLOB is one ``tfdv.generate_statistics_from_tfrecord`` run over the files the glob
matches (TFDV reads the glob itself), on Beam's DirectRunner with TFDV's default ``StatsOptions()``:
top 20 values, 10 equal-width and 10 equal-count histogram buckets, quantiles from TFDV's
sketch at its default epsilon (0.01 rank error), no sampling, no schema, no semantic domains. The
statistics of all the runs are written to OUT.pb as one ``DatasetFeatureStatisticsList``, one
dataset per NAME (TFDV names its dataset "All Examples"; it is renamed to NAME). Prints one JSON
line: the seconds each run's ``generate_statistics_from_tfrecord`` call took (imports excluded),
and their total. ``--workers N`` runs Beam's DirectRunner with N worker processes
(``direct_num_workers``, ``multi_processing``); without it, Beam's default (one, in process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="where to write the DatasetFeatureStatisticsList (binary)")
    parser.add_argument("runs", nargs="+", metavar="NAME=GLOB", help="a dataset name and the TFRecord files of it")
    parser.add_argument("--workers", type=int, default=0, help="DirectRunner worker processes (0: Beam's default)")
    args = parser.parse_args(argv)
    runs = []
    for run in args.runs:
        name, sep, pattern = run.partition("=")
        if not sep or not name or not pattern:
            parser.error(f"{run!r}: give NAME=GLOB")
        runs.append((name, pattern))

    started = time.perf_counter()
    import tensorflow_data_validation as tfdv
    from apache_beam.options.pipeline_options import PipelineOptions
    from tensorflow_metadata.proto.v0 import statistics_pb2

    imported = time.perf_counter() - started
    options = tfdv.StatsOptions()  # TFDV's defaults, said in the docstring
    pipeline = None
    if args.workers:
        pipeline = PipelineOptions(["--direct_num_workers", str(args.workers), "--direct_running_mode", "multi_processing"])

    merged = statistics_pb2.DatasetFeatureStatisticsList()
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tfdv-stats-", dir=os.path.dirname(os.path.abspath(args.output))) as scratch:
        for name, pattern in runs:
            path = os.path.join(scratch, f"{len(seconds)}.tfrecord")  # TFDV writes its result as a TFRecord of the proto
            began = time.perf_counter()
            found = tfdv.generate_statistics_from_tfrecord(
                data_location=pattern, output_path=path, stats_options=options, pipeline_options=pipeline
            )  # it reads its output back (load_statistics) before it returns: part of the time, as a user waits for it
            seconds[name] = time.perf_counter() - began
            if len(found.datasets) != 1:
                print(f"{pattern}: TFDV gave {len(found.datasets)} datasets, expected 1", file=sys.stderr)
                return 1
            dataset = merged.datasets.add()
            dataset.CopyFrom(found.datasets[0])
            dataset.name = name
    with open(args.output, "wb") as out:
        out.write(merged.SerializeToString())
    print(
        json.dumps(
            {
                "tfdv": tfdv.__version__,
                "seconds": {k: round(v, 3) for k, v in seconds.items()},
                "total_seconds": round(sum(seconds.values()), 3),
                "import_seconds": round(imported, 3),
                "examples": {d.name: d.num_examples for d in merged.datasets},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
