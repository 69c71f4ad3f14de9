"""``shardkit stats FILE...``: the statistics of TFRecord files TensorFlow wrote, checked against
the values written; a broken file named with the record and its offset, as ``verify`` names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.errors import CorruptShardError, UsageError
from tests.hostile import digests, one_line_error, run_cli

RECORDS = 300


def _written(path: Path, rows: list[dict[str, Any]], options: Any = None) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path), options) as writer:
        for row in rows:
            feature = {}
            for key, value in row.items():
                if isinstance(value, bytes):
                    feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
                elif isinstance(value, list):
                    feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
                elif isinstance(value, float):
                    feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                else:
                    feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _rows(seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(RECORDS):
        row: dict[str, Any] = {"score": float(rng.normal()), "tags": [b"t%d" % j for j in range(i % 4)]}
        if i % 10:  # every tenth record has no count: missing, not zero
            row["count"] = int(rng.integers(-(2**40), 2**40))
        row["city"] = [b"oslo", b"lima", b"pune"][i % 3] if i % 7 else b"\xc3\xa9vora"
        rows.append(row)
    return rows


def test_foreign_files_counted_as_their_values_say(tmp_path: Path) -> None:
    import tensorflow as tf

    rows = _rows(0) + _rows(1)
    _written(tmp_path / "a.tfrecord", rows[:RECORDS])
    _written(tmp_path / "b.tfrecord.gz", rows[RECORDS:], tf.io.TFRecordOptions(compression_type="GZIP"))  # read as a stream
    shardkit.stats([str(tmp_path / "*.tfrecord*")], output=str(tmp_path / "stats.pb"))
    from tensorflow_metadata.proto.v0 import statistics_pb2

    proto = statistics_pb2.DatasetFeatureStatisticsList.FromString((tmp_path / "stats.pb").read_bytes())
    features = {f.path.step[0]: f for f in proto.datasets[0].features}
    assert proto.datasets[0].num_examples == 2 * RECORDS

    counts = np.array([r["count"] for r in rows if "count" in r], dtype=np.int64)
    stats = features["count"].num_stats
    assert (stats.common_stats.num_non_missing, stats.common_stats.num_missing) == (len(counts), 2 * RECORDS - len(counts))
    assert (stats.min, stats.max) == (counts.min(), counts.max())
    assert stats.mean == pytest.approx(counts.mean(), rel=1e-9) and stats.std_dev == pytest.approx(counts.std(), rel=1e-9)

    scores = np.array([r["score"] for r in rows], dtype=np.float32).astype(np.float64)
    assert features["score"].num_stats.mean == pytest.approx(scores.mean(), rel=1e-9)

    tags = features["tags"].string_stats
    assert (tags.common_stats.min_num_values, tags.common_stats.max_num_values, tags.common_stats.tot_num_values) == (
        0,
        3,
        sum(len(r["tags"]) for r in rows),
    )
    assert [(v.value, int(v.frequency)) for v in tags.top_values] == [("t0", 450), ("t1", 300), ("t2", 150)]
    city = features["city"].string_stats
    cities = [r["city"].decode() for r in rows]
    assert {v.value: int(v.frequency) for v in city.top_values} == {c: cities.count(c) for c in set(cities)}


def test_a_record_that_is_not_an_example_is_named_by_file_record_and_offset(tmp_path: Path) -> None:
    import tensorflow as tf

    path = tmp_path / "mixed.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:  # sound framing and CRCs around bytes that are no Example
        for i in range(5):
            writer.write(tf.train.Example().SerializeToString() if i != 3 else b"\xff\xff not a protocol buffer")
    with pytest.raises(CorruptShardError) as caught:
        shardkit.stats([str(path)])
    assert str(caught.value).startswith(f"{path}: record 3 at byte 48: not a tf.train.Example (")  # 3 empty Examples: 16 bytes each


def test_cli_names_a_truncated_file_in_one_line_and_changes_nothing(tmp_path: Path) -> None:
    _written(tmp_path / "whole.tfrecord", _rows(2)[:50])
    data = (tmp_path / "whole.tfrecord").read_bytes()
    (tmp_path / "cut.tfrecord").write_bytes(data[: len(data) - 7])
    before = digests(tmp_path)
    result = run_cli(["stats", "cut.tfrecord", "whole.tfrecord", "--output", "stats.pb", "-w", "2"], tmp_path)
    line = one_line_error(result)
    assert "cut.tfrecord" in line and "record 49 at byte" in line, line
    assert digests(tmp_path) == before  # no stats.pb, no input touched


def test_output_never_replaces_an_input_and_a_folder_of_files_is_read(tmp_path: Path) -> None:
    _written(tmp_path / "a.tfrecord", _rows(3)[:10])
    before = digests(tmp_path)
    with pytest.raises(UsageError, match="is one of the files to read"):
        shardkit.stats([str(tmp_path / "*.tfrecord")], output=str(tmp_path / "a.tfrecord"))
    assert digests(tmp_path) == before
    assert shardkit.stats([str(tmp_path)]).proto.datasets[0].num_examples == 10  # a folder of files


def test_a_text_with_more_distinct_values_than_counted_exactly_is_estimated_and_says_so(tmp_path: Path) -> None:
    from shardkit.statistics.sketches import DISTINCT_EXACT

    count = DISTINCT_EXACT * 3 // 2
    _written(tmp_path / "names.tfrecord", [{"name": b"item-%06d" % i} for i in range(count)])
    proto = shardkit.stats([str(tmp_path / "names.tfrecord")]).proto
    name = proto.datasets[0].features[0]
    assert {c.name for c in name.custom_stats} >= {"unique_is_estimate", "top_values_max_error"}
    assert abs(name.string_stats.unique - count) <= 0.05 * count  # HyperLogLog, lg_k 12: about 1.6 % one sigma
