"""Random access without TensorFlow: the same values as TensorFlow's parse, and a torch DataLoader."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest

import shardkit
from shardkit.errors import CorruptShardError, ShardkitError
from shardkit.reader import ShardReader
from tests.tfread import decode, read_split


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardkit import demo

    data = demo.make_segmentation(tmp_path_factory.mktemp("rd"), train=24, val=8, width=64, height=48)
    out = tmp_path_factory.mktemp("rd-out") / "out"
    shardkit.build([data / "train_0.txt", data / "train_1.txt", data / "val.txt"], out, workers=1, records_per_shard=5, progress=False)
    return out


def test_random_records_equal_tensorflow_parse(out: Path) -> None:
    expected = read_split(str(out), "train")
    reader = ShardReader(str(out), "train")
    assert len(reader) == len(expected) == 24
    for i in [*random.Random(0).sample(range(24), 10), 0, 23, -1]:
        got, want = reader[i], expected[i]
        assert got["image"] == want["image"] and got["mask"] == want["mask"]
        assert (got["image/height"], got["image/width"], got["mask/channels"]) == (48, 64, 1)
        assert got.keys() == want.keys()
    assert [r["image"] for r in reader[3:6]] == [r["image"] for r in expected[3:6]]
    decoded = ShardReader(str(out), "train", decode_images=True)[7]
    assert np.array_equal(decoded["mask"], decode(expected[7]["mask"])[..., 0])
    assert decoded["image"].shape == (48, 64, 3) and decoded["image"].dtype == np.uint8


def test_out_of_range_and_corrupt_positions(out: Path, tmp_path: Path) -> None:
    import shutil

    reader = ShardReader(str(out), "val")
    with pytest.raises(IndexError, match="record 8 is out of range: val has 8 records"):
        reader[8]
    with pytest.raises(TypeError):
        reader["1"]  # type: ignore[index]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    idx = copy / "val-00000-of-00002.tfrecord.idx"
    lines = idx.read_text().splitlines()
    offset, length = lines[1].split()
    lines[1] = f"{int(offset) + 3} {length}"
    idx.write_text("\n".join(lines) + "\n")
    damaged = ShardReader(str(copy), "val")
    assert damaged[0]["image"] == reader[0]["image"]
    with pytest.raises(CorruptShardError, match="does not point at a record"):
        damaged[1]
    with pytest.raises(ShardkitError, match="no split 'test'"):
        ShardReader(str(out), "test")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is in the test extra")
def test_torch_dataloader_reads_every_record(out: Path) -> None:
    import torch

    reader = ShardReader(str(out), "train", decode_images=True)
    loader = torch.utils.data.DataLoader(reader, batch_size=5, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(0))
    batches = list(loader)
    assert sum(len(b["image/height"]) for b in batches) == 24
    assert tuple(batches[0]["image"].shape[1:]) == (48, 64, 3) and batches[0]["image"].dtype == torch.uint8
    seen = sorted(int(x) for b in batches for x in b["image"].flatten(1).sum(1))
    assert seen == sorted(int(reader[i]["image"].astype(np.int64).sum()) for i in range(24))


def test_threads_share_one_reader(out: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    reader = ShardReader(str(out), "train")
    want = [reader[i]["image"] for i in range(24)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: reader[i % 24]["image"], range(400)))
    assert got == [want[i % 24] for i in range(400)]
