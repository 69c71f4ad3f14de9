"""A reshard's arithmetic as tables, with no files: shard counts, balanced runs, sizes, split names."""

from __future__ import annotations

import itertools

import pytest

from shardkit.errors import UsageError
from shardkit.pipeline.reshard.options import ReshardOptions, parse_size
from shardkit.pipeline.reshard.sizing import FRAMING, balanced, shard_count
from shardkit.pipeline.reshard.sources import split_of


@pytest.mark.parametrize(
    ("records", "payload", "sizes", "expected"),
    [
        (1000, 10**6, {"shards": 7}, 7),
        (1000, 10**6, {"records_per_shard": 300}, 4),  # 300, 300, 300, 100 -> balanced 250 each
        (1000, 10**6, {"shard_size": 250_000}, 5),  # (10**6 + 16 * 1000) / 250,000 = 4.06
        (1000, 10**6, {"shards": 7, "multiple_of": 16}, 16),  # never under H
        (1000, 10**6, {"shards": 17, "multiple_of": 16}, 32),
        (1000, 10**6, {"shards": 32, "multiple_of": 16}, 32),
        (10, 100, {"shards": 64}, 64),  # more shards than records: asked for, some stay empty
        (2_000_000, 300_000_000, {}, 20),  # default: about 128 MB, at most 100,000 records a shard
        (4, 400, {}, 1),
    ],
)
def test_shard_counts(records: int, payload: int, sizes: dict[str, int], expected: int) -> None:
    assert shard_count(records, payload, **sizes) == expected


@pytest.mark.parametrize(("records", "shards"), [(10, 3), (64, 64), (3, 8), (2_000_003, 64), (0, 4)])
def test_runs_cover_every_record_once_and_differ_by_at_most_one(records: int, shards: int) -> None:
    runs = balanced(records, shards)
    assert len(runs) == shards
    assert runs[0][0] == 0 and runs[-1][1] == records
    assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))
    lengths = [end - start for start, end in runs]
    assert max(lengths) - min(lengths) <= 1


def test_framing_is_tfrecords_per_record_overhead() -> None:
    assert FRAMING == 8 + 4 + 4  # length, its CRC, the data's CRC


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (4096, 4096),
        ("4096", 4096),
        ("256MB", 256_000_000),
        ("256 mb", 256_000_000),
        ("1GiB", 1 << 30),
        ("1.5G", 1_500_000_000),
        ("64KiB", 65536),
    ],
)
def test_sizes_read_as_disks_are_sold_or_in_binary(given: int | str, expected: int) -> None:
    assert parse_size(given) == expected


@pytest.mark.parametrize("given", ["big", "12XB", "-5MB", "0", ""])
def test_a_size_that_is_none_is_one_line(given: str) -> None:
    with pytest.raises(UsageError, match="--shard-size"):
        parse_size(given)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shards": 0}, "--shards must be at least 1"),
        ({"shards": 2, "records_per_shard": 5}, "--shards and --records-per-shard both size the shards"),
        ({"records_per_shard": 5, "shard_size": "1MB"}, "--records-per-shard and --shard-size"),
        ({"multiple_of": 0}, "--multiple-of must be at least 1"),
        ({"format": "arrayrecord", "compression": "gzip"}, "--compression gzip is TFRecord's"),
        ({"format": "parquet"}, "unknown --format 'parquet'"),
        ({"on_error": "ignore"}, "unknown --on-error"),
    ],
)
def test_bad_options_are_refused_before_any_work(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        ReshardOptions(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("train-00003-of-00010.tfrecord", "train"),
        ("mnist-validation.tfrecord-00000-of-00001", "validation"),
        ("coco-train.array_record-00012-of-00064", "train"),
        ("val.tfrecord.gz", "val"),
        ("gs://bucket/data/test_2.tfrecords", "test"),
        ("data.tfrec", "data"),
    ],
)
def test_splits_come_from_names(name: str, split: str) -> None:
    assert split_of(name) == split
