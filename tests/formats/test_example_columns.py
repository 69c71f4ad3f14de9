"""Records decoded as columns hold exactly what ``decode_example`` gives each of them; any record
it fails on, or that is laid out otherwise, is left to it (``by_hand``), never decoded another way."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shardkit.formats.example_columns import decode_columns
from shardkit.formats.example_proto import DecodeError, decode_example, encode_example
from tests.formats.test_example_decoder import _entry, _field, examples


def columns_of(records: list[bytes]) -> tuple[dict[int, dict[str, Any]], set[int]]:
    """Each record's features as the columns give them, and the records left by hand."""
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    found = decode_columns(np.frombuffer(b"".join(records), dtype=np.uint8), starts, lengths)
    by_hand = set(found.by_hand.tolist())
    rows: dict[int, dict[str, Any]] = {i: {} for i in range(len(records)) if i not in by_hand}
    for key, column in found.columns.items():
        for row, values in zip(column.rows.tolist(), column.lists().to_pylist(), strict=True):
            assert row not in by_hand, (row, key)
            rows[row][key] = (column.wire, values)
    return rows, by_hand


def same(mine: tuple[str, list[Any]], theirs: tuple[str, list[Any]]) -> bool:
    if mine[0] != theirs[0]:
        return False
    if mine[0] == "float":  # Arrow gives float32 back as Python floats: compare the float32 bit patterns
        return np.array_equal(np.float32(mine[1]).view(np.uint32), np.float32(theirs[1]).view(np.uint32))
    return list(mine[1]) == list(theirs[1])


def check(records: list[bytes]) -> set[int]:
    rows, by_hand = columns_of(records)
    for i, features in rows.items():
        expected = decode_example(records[i])  # raises if the columns decoded a record it refuses
        assert set(features) == set(expected), i  # a record's keys, in any order: columns have none
        assert all(same(features[k], expected[k]) for k in expected), (i, features, expected)
    return by_hand


@settings(max_examples=40, deadline=None)
@given(st.lists(examples, min_size=1, max_size=12))
def test_canonical_records_decode_as_decode_example_does(batch: list[dict[str, tuple[str, list[Any]]]]) -> None:
    records = [encode_example(features) for features in batch]
    by_hand = check(records)
    wires: dict[str, set[str]] = {}
    for features in batch:
        for key, (wire, _) in features.items():
            wires.setdefault(key, set()).add(wire)
    if all(len(w) == 1 for w in wires.values()):  # one type a key: nothing is left by hand
        assert not by_hand


@settings(max_examples=50, deadline=None)
@given(st.lists(examples, min_size=1, max_size=6), st.data())
def test_damaged_records_are_left_to_decode_example(batch: list[dict[str, tuple[str, list[Any]]]], data: st.DataObject) -> None:
    records = []
    for features in batch:
        record = bytearray(encode_example(features))
        if record and data.draw(st.booleans()):
            at = data.draw(st.integers(0, len(record) - 1))
            change = data.draw(st.sampled_from(["flip", "cut", "insert"]))
            if change == "flip":
                record[at] ^= 1 << data.draw(st.integers(0, 7))
            elif change == "cut":
                del record[at:]
            else:
                record[at:at] = bytes([data.draw(st.integers(0, 255))])
        records.append(bytes(record))
    by_hand = check(records)
    for i, record in enumerate(records):
        try:
            decode_example(record)
        except DecodeError:
            assert i in by_hand


ODD = [
    _entry(b"i", _field(0x1A, b"\x08\x07")),  # an unpacked int64
    _entry(b"f", _field(0x12, b"\x0d\x00\x00\xc0\x3f")),  # an unpacked float
    _entry(b"i", _field(0x1A, _field(0x0A, b"\x05"))) + _entry(b"i", _field(0x1A, _field(0x0A, b"\x06"))),  # a key twice
    _entry(b"b", b""),  # an empty Feature
    _field(0x0A, _field(0x12, _field(0x1A, b"")) + _field(0x0A, b"i")),  # the value before the key
    _entry(b"i", _field(0x1A, _field(0x0A, b"\xff" * 10 + b"\x01"))),  # a varint of eleven bytes
    _entry(b"i", _field(0x1A, _field(0x0A, b"\x80"))),  # a truncated varint
    _entry(b"b", _field(0x0A, b"\x0a\x85\x01" + b"x" * 10)),  # a value that runs past its list
    _entry(b"\xff", _field(0x1A, b"")),  # a key that is not UTF-8
]


def test_other_layouts_go_by_hand_and_the_rest_of_the_batch_does_not() -> None:
    plain = [encode_example({"i": ("int64", [3, -1]), "b": ("bytes", [b"x", b""]), "f": ("float", [0.5])}) for _ in range(3)]
    odd = [_field(0x0A, entries) for entries in ODD]
    records = [plain[0], *odd, plain[1], b"", plain[2]]
    by_hand = check(records)
    assert by_hand == set(range(1, 1 + len(odd)))
    rows, _ = columns_of(records)
    assert rows[len(odd) + 2] == {}  # an empty record: an Example without features


def test_keys_told_apart_by_their_bytes_not_only_their_hash() -> None:
    records = [encode_example({key: ("int64", [n])}) for n, key in enumerate(["a", "b", "a\x00", "ab", "b", "a"])]
    rows, by_hand = columns_of(records)
    assert not by_hand
    assert [next(iter(rows[i])) for i in range(len(records))] == ["a", "b", "a\x00", "ab", "b", "a"]
