"""The planner is pure: a table of inputs and expected shard layouts, no files."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from shardkit.formats.containers.tfrecord_shards import TFRecordShards
from shardkit.pipeline.plan.arithmetic import ShuffleKeys, default_entries_per_shard, record_seed, shard_bounds


@pytest.mark.parametrize(
    ("n", "per_shard", "sizes"),
    [
        (0, 5, []),
        (1, 5, [1]),
        (5, 5, [5]),
        (6, 5, [3, 3]),
        (11, 5, [4, 4, 3]),
        (10, 3, [3, 3, 2, 2]),
        (7, 1, [1] * 7),
        (1002, 100, [92] * 1 + [91] * 10),
    ],
)
def test_shard_bounds_cover_everything_once_and_differ_by_at_most_one(n: int, per_shard: int, sizes: list[int]) -> None:
    bounds = shard_bounds(n, per_shard)
    assert [b - a for a, b in bounds] == sizes
    assert all(b1 == a2 for (_, b1), (a2, _) in itertools.pairwise(bounds))
    if bounds:
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert max(sizes) - min(sizes) <= 1 and max(sizes) <= per_shard


def test_shard_bounds_rejects_zero() -> None:
    with pytest.raises(ValueError):
        shard_bounds(10, 0)


@pytest.mark.parametrize(
    ("n", "bytes_per_entry", "expected"),
    [
        (100_000, 100_000, 1342),  # ~128 MB shards: 134217728 // 100000
        (10_000, 100_000, 625),  # a 1 GB split still gets 16 shards, for 16 cores
        (100, 100_000, 50),  # small split: shards of at least 64 entries, so only 2
        (64, 100_000, 64),
        (3, 100_000, 3),  # tiny split: one shard
        (0, 100_000, 1342),
        (10**7, 10, 100_000),  # tiny records: capped
    ],
)
def test_default_entries_per_shard_depends_on_the_data_alone(n: int, bytes_per_entry: float, expected: int) -> None:
    assert default_entries_per_shard(n, bytes_per_entry) == expected


def test_shard_names() -> None:
    assert TFRecordShards().shard_name("train", 3, 12) == "train-00003-of-00012.tfrecord"
    assert TFRecordShards("gzip").shard_name("val", 0, 1) == "val-00000-of-00001.tfrecord.gz"


def test_record_seed_depends_on_identity_copy_and_seed_only() -> None:
    base = record_seed(0, "train_0.txt:5", 0)
    assert base == record_seed(0, "train_0.txt:5", 0)
    assert len({base, record_seed(1, "train_0.txt:5", 0), record_seed(0, "train_0.txt:6", 0), record_seed(0, "train_0.txt:5", 1)}) == 4
    assert 0 <= base < 2**32


def test_shuffle_keys_depend_on_seed_input_and_identity_only() -> None:
    base = ShuffleKeys(0, 0)("train.txt:5")
    assert base == ShuffleKeys(0, 0)("train.txt:5") and len(base) == 8
    assert len({base, ShuffleKeys(1, 0)("train.txt:5"), ShuffleKeys(0, 1)("train.txt:5"), ShuffleKeys(0, 0)("train.txt:6")}) == 4


def test_a_failure_while_taking_staged_rows_is_raised_as_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task stopped while it takes rows from a staged file gets its own error, not the BufferError
    of closing a map that the failed batch still points into."""
    import numpy as np
    import pyarrow as pa

    from shardkit.pipeline.plan import staged_rows

    path = tmp_path / f"0-0{staged_rows.SUFFIX}"
    table = pa.table({"a": pa.array(range(100))})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=10):
            writer.write_batch(batch)
    assert [len(p) for p in staged_rows._taken_from(str(path), 0, np.array([3, 57]), ["a"])] == [1, 1]

    def stopped(batch: object, *_: object) -> int:
        raise KeyboardInterrupt("stopped")

    monkeypatch.setattr(staged_rows, "_take", stopped)
    with pytest.raises(KeyboardInterrupt, match="stopped"):
        staged_rows._taken_from(str(path), 0, np.array([3, 57]), ["a"])
