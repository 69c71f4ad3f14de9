#!/usr/bin/env python3
"""Read a shardkit output folder back with tf.data, the feature spec taken from its manifest."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# A TensorFlow built for GPUs logs from C++, on a machine without one, that it found no CUDA
# driver and that cuInit failed; reading back needs no GPU. The level applies only if set before
# the import (set it lower to see them again), and the import's own lines come before any level
# is read, so they are held back while it runs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@contextlib.contextmanager
def native_stderr_held() -> Iterator[None]:
    """Hold back what C and C++ code write to stderr (file descriptor 2) while the block runs;
    show it if the block fails, where it may say why."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.buffer.write(held.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


with native_stderr_held():
    import tensorflow as tf


def feature_spec(manifest: dict) -> dict:
    types = {"bytes": tf.string, "string": tf.string, "int64": tf.int64, "float": tf.float32}
    return {
        f["key"]: tf.io.VarLenFeature(types[f["dtype"]]) if f.get("ragged") else tf.io.FixedLenFeature(f["shape"], types[f["dtype"]])
        for f in manifest["schema"]
    }


def main(out: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    spec = feature_spec(manifest)
    compression = "GZIP" if manifest["parameters"]["compression"] == "gzip" else ""
    for split, info in manifest["splits"].items():
        files = [str(out / s["name"]) for s in info["shards"]]
        ds = (
            tf.data.TFRecordDataset(files, compression_type=compression, num_parallel_reads=tf.data.AUTOTUNE)
            .batch(64)
            .map(lambda b: tf.io.parse_example(b, spec), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
        )
        count, shapes = 0, set()
        for batch in ds:
            count += int(tf.shape(batch[manifest["schema"][0]["key"]])[0])
            if "image" in batch:
                shapes.add(tuple(tf.io.decode_image(batch["image"][0]).shape.as_list()))
        assert count == info["records"], (split, count, info["records"])
        print(f"tf.data read {split}: {count} records (manifest says {info['records']}), first image shapes {sorted(shapes)[:3]}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "demo/out"))
