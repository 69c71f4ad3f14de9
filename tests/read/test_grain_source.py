"""ShardReader as a Grain source: a global shuffle over TFRecord or ArrayRecord shards, batched, in worker processes too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.reader import ShardReader
from tests.tfread import read_split

grain = pytest.importorskip("grain")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardkit import demo

    return demo.make_segmentation(tmp_path_factory.mktemp("grain"), train=22, val=4, width=40, height=32, train_files=1)


def _built(data: Path, folder: Path, format: str) -> Path:
    out = folder / "out"
    shardkit.build([data / "train_0.txt", data / "val.txt"], out, workers=1, records_per_shard=5, progress=False, format=format)
    return out


@pytest.fixture(scope="module")
def tf_out(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TFRecord build TensorFlow reads the expected values from."""
    return _built(data, tmp_path_factory.mktemp("grain-tf"), "tfrecord")


@pytest.fixture(scope="module", params=["tfrecord", "arrayrecord"])
def out(request: pytest.FixtureRequest, data: Path, tf_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same build's shards in each container: the reader reads TFRecord through .idx, ArrayRecord through its own index."""
    if request.param == "tfrecord":
        return tf_out
    pytest.importorskip("array_record")
    return _built(data, tmp_path_factory.mktemp("grain-ar"), request.param)


def shuffled(length: int) -> list[int]:
    """The record numbers in the order ``.shuffle(seed=0)`` reads them, from Grain itself."""
    return [int(i) for i in grain.MapDataset.range(length).shuffle(seed=0)]


def assert_batch_holds(batch: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """A batch of Grain's default ``batch`` (``np.stack`` of each key) against TensorFlow's parse of the same records."""
    assert batch.keys() == records[0].keys()
    for key, column in batch.items():
        assert len(column) == len(records)
        for got, want in zip(column, (r[key] for r in records), strict=True):
            # bytes stack into NumPy "S" arrays, str into "U": PNG and JPEG bytes never end in the NULs "S" drops
            assert got == (want.decode() if column.dtype.kind == "U" else want), key


def test_a_shuffled_batched_split_equals_tensorflow_parse(out: Path, tf_out: Path) -> None:
    expected = read_split(str(tf_out), "train")
    reader = ShardReader(str(out), "train")
    batches = list(grain.MapDataset.source(reader).shuffle(seed=0).batch(4))
    order = shuffled(len(reader))
    assert sorted(order) == list(range(22)) and order != list(range(22))  # every record once, not in file order
    assert [len(b["image"]) for b in batches] == [4, 4, 4, 4, 4, 2]
    assert batches[0]["image/height"].dtype == np.int64 and batches[0]["source_id"].dtype.kind == "U"
    for number, batch in enumerate(batches):
        assert_batch_holds(batch, [expected[i] for i in order[4 * number : 4 * number + 4]])


@pytest.mark.slow
def test_worker_processes_read_the_same_records(out: Path, tf_out: Path) -> None:
    expected = read_split(str(tf_out), "train")
    dataset = grain.MapDataset.source(ShardReader(str(out), "train")).shuffle(seed=0).batch(4)
    workers = dataset.to_iter_dataset().mp_prefetch(grain.multiprocessing.MultiprocessingOptions(num_workers=2))
    batches = list(workers)
    got = sorted(source_id for batch in batches for source_id in batch["source_id"])
    assert got == sorted(r["source_id"].decode() for r in expected)  # each record once, across both workers
    order = shuffled(22)
    by_id = {r["source_id"].decode(): r for r in expected}
    for batch in batches:  # each batch is one of the shuffle's batches of 4, whole, whichever worker made it
        records = [by_id[s] for s in batch["source_id"]]
        assert_batch_holds(batch, records)
        first = order.index(next(i for i, r in enumerate(expected) if r is records[0]))
        assert first % 4 == 0 and [expected[i]["source_id"] for i in order[first : first + len(records)]] == [
            r["source_id"] for r in records
        ]
