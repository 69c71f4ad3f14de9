"""The hand-written framing and Example encoding, checked against TensorFlow's own reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardkit.errors import CorruptShardError
from shardkit.formats.containers.masked_crc import masked_crc
from shardkit.formats.containers.tfrecord_io import RecordWriter, file_crc32c, frame, read_records
from shardkit.formats.example_proto import decode_example, encode_example

EXAMPLES = [
    {"a": ("bytes", [b"hello", b"", bytes(range(256))]), "n": ("int64", [0, 1, -1, 2**63 - 1, -(2**63)]), "f": ("float", [0.5, -2.25])},
    {"empty_i": ("int64", []), "empty_f": ("float", []), "empty_b": ("bytes", [])},
    {"big": ("bytes", [b"x" * 300_000]), "ids": ("int64", list(range(1000)))},
]


def test_masked_crc_matches_known_tensorflow_value() -> None:
    # An empty tf.train.Example written by tf.io.TFRecordWriter: length 0 -> header crc 0x3d32... is fixed
    assert frame(b"")[:12] == b"\x00" * 8 + masked_crc(b"\x00" * 8).to_bytes(4, "little")
    assert masked_crc(b"") == 0xA282EAD8


@pytest.mark.parametrize("compress", [False, True])
def test_tensorflow_reads_what_we_write(tmp_path: Path, compress: bool) -> None:
    import tensorflow as tf

    path = tmp_path / ("x.tfrecord.gz" if compress else "x.tfrecord")
    with open(path, "wb") as raw:
        sink = gzip.GzipFile(fileobj=raw, mode="wb") if compress else raw
        writer = RecordWriter(sink)  # type: ignore[arg-type]
        for features in EXAMPLES:
            writer.write(encode_example(features))
        if compress:
            sink.close()
    if not compress:
        assert writer.bytes_written == path.stat().st_size
        assert writer.crc32c == file_crc32c(str(path))
    records = list(tf.data.TFRecordDataset([str(path)], compression_type="GZIP" if compress else ""))
    assert len(records) == len(EXAMPLES)
    for record, features in zip(records, EXAMPLES, strict=True):
        parsed = tf.train.Example.FromString(record.numpy())
        for key, (dtype, values) in features.items():
            feature = parsed.features.feature[key]
            got = {"bytes": feature.bytes_list.value, "int64": feature.int64_list.value, "float": feature.float_list.value}[dtype]
            assert list(got) == list(values)
        # and our own decoder agrees with both
        assert decode_example(record.numpy()) == {k: (d, list(v)) for k, (d, v) in features.items()}


def test_decoder_reads_tensorflow_serialized_examples() -> None:
    import tensorflow as tf

    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "b": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"bc"])),
                "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[-5, 7])),
                "f": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5])),
            }
        )
    )
    assert decode_example(example.SerializeToString()) == {"b": ("bytes", [b"a", b"bc"]), "i": ("int64", [-5, 7]), "f": ("float", [1.5])}


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(
            st.tuples(st.just("bytes"), st.lists(st.binary(max_size=40), max_size=4)),
            st.tuples(st.just("int64"), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6)),
            st.tuples(st.just("float"), st.lists(st.floats(width=32, allow_nan=False), max_size=6)),
        ),
        max_size=5,
    )
)
def test_encoding_round_trips_through_tensorflow_protobuf(features: dict) -> None:
    import tensorflow as tf

    data = encode_example(features)
    parsed = tf.train.Example.FromString(data)
    assert set(parsed.features.feature) == set(features)
    for key, (dtype, values) in features.items():
        feature = parsed.features.feature[key]
        got = {"bytes": feature.bytes_list.value, "int64": feature.int64_list.value, "float": feature.float_list.value}[dtype]
        assert list(got) == [np.float32(v) for v in values] if dtype == "float" else list(got) == list(values)
    assert decode_example(data) == {k: (d, list(v)) for k, (d, v) in features.items()}


def test_write_framed_leaves_what_a_write_per_record_leaves(tmp_path: Path) -> None:
    records = [encode_example(features) for features in EXAMPLES] + [b""]
    frames = [frame(r) for r in records]
    with open(tmp_path / "one", "wb") as one, open(tmp_path / "many", "wb") as many:
        by_record, framed = RecordWriter(one), RecordWriter(many)
        for writer in (by_record, framed):
            writer.write(b"before")
        for record in records:
            by_record.write(record)
        framed.write_framed(b"".join(frames), [len(f) for f in frames])
        framed.write_framed(b"", [])
    assert (tmp_path / "one").read_bytes() == (tmp_path / "many").read_bytes()
    assert vars(by_record) | {"_file": None} == vars(framed) | {"_file": None}
    assert framed.crc32c == file_crc32c(str(tmp_path / "many"))
    with pytest.raises(ValueError, match="add up"):
        framed.write_framed(b"".join(frames), [len(f) for f in frames[1:]])


def test_reader_checks_crcs_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    path.write_bytes(frame(b"one") + frame(b"two"))
    assert list(read_records(str(path))) == [b"one", b"two"]
    data = bytearray(path.read_bytes())
    data[14] ^= 0x01  # a payload byte of record 0
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match=r"data CRC mismatch.*record 0, byte offset 0"):
        list(read_records(str(path)))
    path.write_bytes(frame(b"one") + frame(b"two")[:-2])
    with pytest.raises(CorruptShardError, match=r"truncated record footer.*record 1"):
        list(read_records(str(path)))
