"""A reshard's shard tasks on a real Dask cluster (a scheduler and two workers on loopback) write
the files a local pool writes, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

import shardkit
from tests.pipeline.executors.test_cluster import dask_cluster


def _write(folder: Path) -> None:
    import tensorflow as tf

    folder.mkdir()
    for f in range(3):
        with tf.io.TFRecordWriter(str(folder / f"train-{f:05d}-of-00003.tfrecord")) as writer:
            for i in range(40 * (f + 1)):
                feature = {"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[1000 * f + i]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith("train-")}


@pytest.mark.slow
def test_a_dask_reshard_writes_the_pools_files(tmp_path: Path) -> None:
    from shardkit.executors import DaskExecutor

    _write(tmp_path / "in")
    pool = shardkit.reshard([tmp_path / "in"], tmp_path / "pool", shards=6, workers=2, progress=False, format="tfrecord,arrayrecord")
    with dask_cluster(2) as (address, _):
        dask = shardkit.reshard(
            [tmp_path / "in"], tmp_path / "dask", shards=6, executor=DaskExecutor(address), progress=False, format="tfrecord,arrayrecord"
        )
    assert dask.shards_written == 6 and _files(tmp_path / "dask") == _files(tmp_path / "pool")
    assert pool.manifest.totals.records == 240 and shardkit.verify([str(tmp_path / "dask")]).ok
