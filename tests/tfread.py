"""TensorFlow as the oracle: read shards back with tf.data and tf.io.parse_example."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import numpy as np


def spec_from_manifest(out: str) -> dict[str, Any]:
    import tensorflow as tf

    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    types = {"bytes": tf.string, "string": tf.string, "int64": tf.int64, "float": tf.float32}
    spec: dict[str, Any] = {}
    for feature in manifest["schema"]:
        dtype = types[feature["dtype"]]
        if feature.get("ragged"):
            spec[feature["key"]] = tf.io.VarLenFeature(dtype)
        else:
            spec[feature["key"]] = tf.io.FixedLenFeature(feature["shape"], dtype)
    return spec


def shard_files(out: str, split: str) -> list[str]:
    """The split's shard files on disk, by their naming pattern (not from the manifest under test)."""
    return sorted(p for p in glob.glob(os.path.join(out, f"{split}-*-of-*.tfrecord*")) if not p.endswith(".idx"))


def read_split(out: str, split: str, compression: str = "") -> list[dict[str, Any]]:
    """Every record of a split, in shard order, as {key: numpy value}."""
    import tensorflow as tf

    files = shard_files(out, split)
    assert files, f"no shards for {split} in {out}"
    spec = spec_from_manifest(out)
    records: list[dict[str, Any]] = []
    for batch in tf.data.TFRecordDataset(files, compression_type=compression).batch(64):
        parsed = tf.io.parse_example(batch, spec)
        dense = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()}
        n = len(next(iter(dense.values())))
        records.extend({k: v[i] for k, v in dense.items()} for i in range(n))
    return records


def decode(data: bytes, channels: int = 0) -> np.ndarray:
    """TensorFlow's decode with the DCT method that matches Pillow exactly."""
    import tensorflow as tf

    if data[:2] == b"\xff\xd8":
        return tf.io.decode_jpeg(data, channels=channels, dct_method="INTEGER_ACCURATE").numpy()
    return tf.io.decode_png(data, channels=channels).numpy()


def raw_records(out: str, split: str) -> list[bytes]:
    import tensorflow as tf

    files = shard_files(out, split)
    compression = "GZIP" if files and files[0].endswith(".gz") else ""
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=compression)]


def by_source(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by the input they came from (their ``source_id``), in record order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(record["source_id"].decode(), []).append(record)
    return groups


def read_each(out: str, split: str) -> list[dict[str, Any]]:
    """Every record of a split, in shard order, parsed one at a time: a ragged list keeps its own
    length (``read_split`` pads a batch's lists to the longest)."""
    import tensorflow as tf

    spec = spec_from_manifest(out)
    records = []
    for raw in tf.data.TFRecordDataset(shard_files(out, split)):
        parsed = tf.io.parse_single_example(raw, spec)
        records.append({k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()})
    return records
