"""Reshard inputs in a bucket (moto's S3 server, fake-gcs-server): objects are copied to the plan
folder once (a GZIP one inflated on the way), and the output holds exactly their records."""

from __future__ import annotations

import collections
import gzip
import os
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import UsageError
from tests.object_stores import Store


def _example(i: int) -> bytes:
    import tensorflow as tf

    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "pad": tf.train.Feature(bytes_list=tf.train.BytesList(value=[os.urandom(i % 50)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write(path: Path, records: list[bytes], gzipped: bool = False) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path), options="GZIP" if gzipped else None) as writer:
        for record in records:
            writer.write(record)


def _records(out: Path) -> collections.Counter[bytes]:
    import tensorflow as tf

    files = sorted(str(p) for p in out.glob("*.tfrecord"))
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(files))


def test_objects_in_a_bucket_are_resharded_with_their_bytes_unchanged(store: Store, bucket: str, tmp_path: Path) -> None:
    local = tmp_path / "in"
    local.mkdir()
    made = [_example(i) for i in range(90)]
    _write(local / "train-00000-of-00003.tfrecord", made[:40])
    _write(local / "train-00001-of-00003.tfrecord", made[40:70])
    _write(local / "train-00002-of-00003.tfrecord", made[70:], gzipped=True)  # GZIP, and no .gz in its name
    with gzip.open(local / "train-00002-of-00003.tfrecord") as packed:
        assert packed.read(1)
    fs = store.fs()
    for item in sorted(local.iterdir()):
        fs.put_file(str(item), f"{bucket}/in/{item.name}".split("://", 1)[1])

    out = tmp_path / "out"
    result = shardkit.reshard([f"{bucket}/in"], out, shards=4, progress=False, workers=2)

    assert _records(out) == collections.Counter(made)
    assert [s.records for s in result.manifest.splits["train"].shards] == [23, 23, 22, 22]
    assert shardkit.verify([str(out)]).ok
    plan_folders = list((out / ".shardkit").glob("plan-*"))
    assert plan_folders and not list(plan_folders[0].glob("input-*")), "the staged copies go once every shard is written"

    again = shardkit.reshard([f"{bucket}/in/*.tfrecord"], tmp_path / "by-glob", shards=4, progress=False, workers=1)
    assert again.manifest.totals.records == 90
    assert [s.crc32c for s in again.manifest.splits["train"].shards] == [s.crc32c for s in result.manifest.splits["train"].shards]


def test_a_missing_prefix_is_one_line(store: Store, bucket: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such object or prefix"):
        shardkit.reshard([f"{bucket}/nothing-here"], tmp_path / "out", progress=False)
