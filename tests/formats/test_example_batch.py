"""The batch encoder and framing give exactly the per-record bytes, for any schema the columns can hold."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardkit.formats.containers.tfrecord_io import RecordWriter, frame, frame_batch
from shardkit.formats.example_batch import encode_batch
from shardkit.formats.example_proto import encode_example

Column = tuple[str, str, "pa.Array | pa.ChunkedArray"]

VARINT_EDGES = [0, 1, 127, 128, 2**14 - 1, 2**14, 2**21 - 1, 2**21, 2**28, 2**35, 2**42, 2**49, 2**56, 2**63 - 1, -1, -(2**63), -128]
FLOAT_EDGES = [
    0.0,
    -0.0,
    float("inf"),
    float("-inf"),
    float("nan"),
    5e-324,
    1e-40,
    -1e-45,
    1.0000000596046448,
    0.1,
    3.4028235e38,
    3.5e38,
    -1e300,
]
LIST_TYPES = [pa.list_, pa.large_list]


def python_rows(columns: list[Column], rows: int) -> list[dict[str, tuple[str, list[Any]]]]:
    """Each row as encode_example takes it: the column's Python values, strings as UTF-8."""
    out: list[dict[str, tuple[str, list[Any]]]] = [{} for _ in range(rows)]
    for key, wire, array in columns:
        listed = pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or pa.types.is_fixed_size_list(array.type)
        for row, value in zip(out, array.to_pylist(), strict=True):
            values = value if listed else [value]
            row[key] = (wire, [v.encode() if isinstance(v, str) else v for v in values])
    return out


def check(columns: list[Column], rows: int) -> list[bytes]:
    """encode_batch, frame_batch and write_framed against encode_example, frame and write, record by record."""
    records = encode_batch(columns, rows)
    assert records.type == pa.large_binary() and len(records) == rows
    with np.errstate(over="ignore"):  # floats past float32's range: inf, with NumPy's warning
        expected = [encode_example(row) for row in python_rows(columns, rows)]
    got = records.to_pylist()
    for index, (record, want) in enumerate(zip(got, expected, strict=True)):
        assert record == want, f"row {index}: {record.hex()} != {want.hex()}"
    buffer, lengths = frame_batch(records)
    assert bytes(buffer) == b"".join(frame(r) for r in expected)
    assert lengths.tolist() == [len(frame(r)) for r in expected]
    one, many = io.BytesIO(b"head"), io.BytesIO(b"head")
    by_record, batched = RecordWriter(one), RecordWriter(many)
    for writer in (by_record, batched):  # a writer that has written before: offsets and CRC carry on
        writer.write(b"first")
    for record in expected:
        by_record.write(record)
    batched.write_framed(buffer, lengths)
    assert one.getvalue() == many.getvalue()
    assert vars(by_record) | {"_file": None} == vars(batched) | {"_file": None}
    return got


# -- the property: random schemas and rows --

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
VALUE_TYPES = {
    "int64": INT_TYPES,
    "float": [pa.float16(), pa.float32(), pa.float64(), pa.int32(), pa.int64(), pa.uint64()],
    "bytes": [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()],
}


def values_of(kind: pa.DataType, wire: str) -> st.SearchStrategy[Any]:
    if pa.types.is_integer(kind):
        bits = kind.bit_width
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if pa.types.is_signed_integer(kind) else (0, 2**bits - 1)
        if wire == "int64":
            high = min(high, 2**63 - 1)
        edges = [v for v in [*VARINT_EDGES, 2**64 - 1, 2**53 + 1, 2**60 + 2**36 + 1] if low <= v <= high]
        return st.one_of(st.integers(low, high), st.sampled_from(edges))
    if pa.types.is_floating(kind):
        with np.errstate(over="ignore"):
            exact = [v for v in FLOAT_EDGES if v != v or float(np.asarray(v, dtype=f"<f{kind.bit_width // 8}")) == v]
        return st.floats(width=kind.bit_width) | st.sampled_from(exact)
    text = st.text(max_size=40) | st.sampled_from(["", "é", "日本語", "🙂" * 3])
    return text if pa.types.is_string(kind) or pa.types.is_large_string(kind) else st.binary(max_size=40)


@st.composite
def column_sets(draw: st.DrawFn) -> tuple[list[Column], int]:
    rows = draw(st.integers(0, 7))
    keys = draw(
        st.lists(st.text(max_size=12) | st.sampled_from(["image/encoded", "ключ", "k" * 130]), min_size=1, max_size=12, unique=True)
    )
    columns: list[Column] = []
    for key in keys:
        wire = draw(st.sampled_from(sorted(VALUE_TYPES)))
        kind = draw(st.sampled_from(VALUE_TYPES[wire]))
        values = values_of(kind, wire)
        shape = draw(st.sampled_from(["plain", "list", "large_list", "fixed"]))
        pad = draw(st.booleans())  # built with a row ahead and sliced off: arrays with an offset
        count = rows + pad
        if shape == "plain":
            array = pa.array(draw(st.lists(values, min_size=count, max_size=count)), kind)
        elif shape == "fixed":
            size = draw(st.integers(0, 3))
            lists = draw(st.lists(st.lists(values, min_size=size, max_size=size), min_size=count, max_size=count))
            array = pa.array(lists, pa.list_(kind, size))
        else:
            lists = draw(st.lists(st.lists(values, max_size=5), min_size=count, max_size=count))
            array = pa.array(lists, (pa.list_ if shape == "list" else pa.large_list)(kind))
        array = array.slice(int(pad))
        if draw(st.booleans()) and rows:
            cut = draw(st.integers(0, rows))
            array = pa.chunked_array([array.slice(0, cut), array.slice(cut)], array.type)
        columns.append((key, wire, array))
    return columns, rows


@settings(max_examples=200, deadline=None)
@given(column_sets())
def test_every_record_is_the_per_record_encoding(case: tuple[list[Column], int]) -> None:
    columns, rows = case
    check(columns, rows)


# -- edge cases, each named --


def test_zero_columns_give_the_empty_example() -> None:
    assert check([], 3) == [encode_example({})] * 3 == [b"\x0a\x00"] * 3
    assert check([], 0) == []


# Halfway between two float32s (ties go to even), just past halfway, subnormals and their halfway points.
ROUNDING = [1 + 2**-24, 1 + 2**-24 + 2**-50, 1 + 3 * 2**-24, 2.0**-149, 2.0**-150, 1.5 * 2.0**-150, 2.0**-126 * 0.75, 16777217.0]


def test_float64_values_round_to_float32_as_numpy_does() -> None:
    values = FLOAT_EDGES + ROUNDING + [-v for v in ROUNDING] + [float.fromhex("0x1.fffffefffffffp+127"), float.fromhex("0x1.ffffffp+127")]
    with np.errstate(over="ignore"):
        check([("f", "float", pa.array(values)), ("l", "float", pa.array([[v, -v] for v in values]))], len(values))


def test_float32_and_float16_values_pass_unchanged() -> None:
    with np.errstate(over="ignore"):
        singles = pa.array(np.asarray(FLOAT_EDGES + ROUNDING, dtype=np.float32))
        halves = pa.array(np.asarray(FLOAT_EDGES + ROUNDING, dtype=np.float16))
    check([("single", "float", singles), ("half", "float", halves)], len(singles))


def test_integers_cast_to_float_as_numpy_casts_python_ints() -> None:
    values = [2**60 + 2**36 + 1, 2**53 + 1, 16777217, -(2**63), 2**63 - 1]  # exact in neither float32 nor always in float64
    check([("f", "float", pa.array(values, pa.int64())), ("l", "float", pa.array([values] * 5, pa.list_(pa.int64())))], 5)
    check([("u", "float", pa.array([2**64 - 1, 2**63 + 2**39 + 1, 2**63 + 2**40], pa.uint64()))], 3)


def test_every_varint_width() -> None:
    values = VARINT_EDGES + [2 ** (7 * k) - 1 for k in range(1, 10)] + [2 ** (7 * k) for k in range(1, 9)]
    check([("n", "int64", pa.array(values, pa.int64())), ("l", "int64", pa.array([[v] * 3 for v in values]))], len(values))
    check([("u", "int64", pa.array([0, 2**63 - 1, 2**32], pa.uint64()))], 3)


def test_every_row_the_same_width_and_every_row_different() -> None:
    rows = 300
    check([("same", "int64", pa.array([5] * rows)), ("big", "int64", pa.array([2**40 + i for i in range(rows)]))], rows)
    check([("ragged", "int64", pa.array(list(range(rows)))), ("fixed", "float", pa.array([[1.0, 2.0]] * rows))], rows)


def test_long_values_past_the_varint_table() -> None:
    """Lengths past 2**14 (example_proto's table) and entries past 2**21 bytes take three and four byte varints."""
    long = "x" * (20 << 10)
    values = [long, long + "é", "", "a" * 127, "b" * 128]
    check([("s", "bytes", pa.array(values)), ("b", "bytes", pa.array([[v.encode(), b""] for v in values], pa.large_list(pa.binary())))], 5)
    check([("huge", "bytes", pa.array([b"\x00" * (3 << 20)])), ("floats", "float", pa.array([[0.5] * 5000]))], 1)


def test_utf8_text_and_empty_values() -> None:
    check([("t", "bytes", pa.array(["", "é", "日本語", "🙂", "a\x00b"])), ("e", "bytes", pa.array([[], [""], ["", ""], [], ["x"]]))], 5)


@pytest.mark.parametrize("key_length", [0, 1, 100, 117, 118, 119, 120, 125, 126, 127, 128, 129, 200, 16500])
def test_keys_whose_entries_cross_varint_boundaries(key_length: int) -> None:
    """A scalar int64 entry is the key plus 8 bytes: these lengths put the entry's size either side of 127/128."""
    check([("k" * key_length, "int64", pa.array([1, 300])), ("é" * (key_length // 2) + "f", "float", pa.array([1.0, 2.0]))], 2)


def test_keys_are_written_sorted_whatever_the_column_order() -> None:
    columns: list[Column] = [
        ("b", "int64", pa.array([1])),
        ("a", "float", pa.array([1.0])),
        ("Z", "bytes", pa.array(["z"])),
        ("é", "int64", pa.array([2])),
    ]
    assert check(columns, 1) == check(columns[::-1], 1)


def test_empty_lists_of_every_wire() -> None:
    lists = [[], [], []]
    check([(w, w, pa.array(lists, pa.list_(t))) for w, t in [("int64", pa.int64()), ("float", pa.float32()), ("bytes", pa.binary())]], 3)
    check([("z", "int64", pa.array([], pa.list_(pa.int64(), 0)))], 0)
    check([("z", "float", pa.array([[], []], pa.list_(pa.float64(), 0)))], 2)


def test_value_types_beyond_the_plain_ones() -> None:
    check([("v", "bytes", pa.array(["a", "bcd"], pa.string_view())), ("f", "bytes", pa.array([b"ab", b"cd"], pa.binary(2)))], 2)


def test_frame_batch_takes_binary_and_chunked_records() -> None:
    records = [encode_example({"a": ("int64", [i])}) for i in range(5)]
    for given_records in (
        pa.array(records, pa.binary()),
        pa.chunked_array([records[:2], records[2:]], pa.large_binary()),
        pa.array(records).slice(1),
    ):
        buffer, lengths = frame_batch(given_records)
        expected = records[1:] if len(given_records) == 4 else records
        assert bytes(buffer) == b"".join(map(frame, expected))
        assert lengths.dtype == np.int64 and lengths.tolist() == [len(frame(r)) for r in expected]
    buffer, lengths = frame_batch(pa.array([], pa.large_binary()))
    assert bytes(buffer) == b"" and lengths.tolist() == []


def test_write_framed_refuses_lengths_that_do_not_add_up() -> None:
    buffer, lengths = frame_batch(pa.array([b"ab", b"c"]))
    writer = RecordWriter(io.BytesIO())
    with pytest.raises(ValueError, match="add up"):
        writer.write_framed(buffer, lengths[:1])
    assert (writer.records, writer.bytes_written, writer.offsets) == (0, 0, [])


# -- refusals --


@pytest.mark.parametrize(
    ("wire", "array"),
    [
        ("int64", pa.array([1, None])),
        ("int64", pa.array([[1], None])),
        ("int64", pa.array([[1, None], [2]])),
        ("bytes", pa.array(["a", None])),
        ("bytes", pa.array([["a"], [None]])),
        ("float", pa.chunked_array([pa.array([1.0]), pa.array([None], pa.float64())])),
        ("float", pa.FixedSizeListArray.from_arrays(pa.array([1.0, None]), 1)),
    ],
)
def test_nulls_are_refused(wire: str, array: pa.Array) -> None:
    with pytest.raises(ValueError, match="null"):
        encode_batch([("k", wire, array)], 2)


@pytest.mark.parametrize(
    ("column", "rows", "message"),
    [
        (("u", "int64", pa.array([2**63], pa.uint64())), 1, "does not fit"),
        (("f", "int64", pa.array([1.5])), 1, "needs integers"),
        (("b", "int64", pa.array([True])), 1, "needs integers"),
        (("s", "float", pa.array(["1"])), 1, "needs numbers"),
        (("n", "bytes", pa.array([1])), 1, "strings or binary"),
        (("w", "double", pa.array([1.0])), 1, "unknown wire"),
        (("r", "int64", pa.array([1, 2])), 3, "2 values for 3 rows"),
        (("l", "int64", pa.array([[[1]]])), 1, "needs integers"),
    ],
)
def test_values_the_wire_cannot_hold_are_refused(column: Column, rows: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_batch([column], rows)


def test_repeated_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="repeat"):
        encode_batch([("a", "int64", pa.array([1])), ("a", "float", pa.array([1.0]))], 1)


# -- TensorFlow as the oracle --


def test_tensorflow_parses_the_batch_records() -> None:
    import tensorflow as tf

    floats = [[0.1, -0.0, float("inf")], [], [3.5e38, float("nan")]]
    columns: list[Column] = [
        ("image/encoded", "bytes", pa.array([b"\xff\xd8" * 9000, b"", b"x"])),
        ("names", "bytes", pa.array([["猫", "dog"], [], [""]])),
        ("label", "int64", pa.array([0, -1, 2**63 - 1])),
        ("boxes", "float", pa.array(floats)),
        ("ids", "int64", pa.array([[1, 2**40], [-(2**63)], []], pa.large_list(pa.int64()))),
    ]
    records = encode_batch(columns, 3).to_pylist()
    for row, record in enumerate(records):
        parsed = tf.train.Example.FromString(record).features.feature
        assert sorted(parsed) == sorted(key for key, _, _ in columns)
        assert list(parsed["image/encoded"].bytes_list.value) == [columns[0][2][row].as_py()]
        assert [v.decode() for v in parsed["names"].bytes_list.value] == columns[1][2][row].as_py()
        assert list(parsed["label"].int64_list.value) == [columns[2][2][row].as_py()]
        assert list(parsed["ids"].int64_list.value) == columns[4][2][row].as_py()
        with np.errstate(over="ignore"):
            want = np.asarray(floats[row], dtype=np.float32)
        got = np.asarray(parsed["boxes"].float_list.value, dtype=np.float32)
        assert got.tobytes() == want.tobytes()  # bit for bit: -0.0 and NaN included
    parsed_batch = tf.io.parse_example(records, {"label": tf.io.FixedLenFeature([], tf.int64), "ids": tf.io.VarLenFeature(tf.int64)})
    assert parsed_batch["label"].numpy().tolist() == [0, -1, 2**63 - 1]
    assert parsed_batch["ids"].values.numpy().tolist() == [1, 2**40, -(2**63)]
