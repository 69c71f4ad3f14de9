"""The one-pass decoder gives exactly what ``decode_example`` gives, on any bytes: its values, its order, its errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardkit.formats.example_decoder import ExampleDecoder
from shardkit.formats.example_proto import DecodeError, decode_example, encode_example

SINGLES: dict[str, Any] = {"b": "bytes", "t": "text", "i": "int64", "f": "float", "x": "int64"}  # x: never int64 below


def general(data: bytes) -> tuple[list[tuple[str, Any]], list[str]]:
    """What ``ExampleDecoder(SINGLES)`` must give, worked out from ``decode_example``."""
    items, rest = [], []
    for key, (dtype, values) in decode_example(data).items():
        want = SINGLES.get(key)
        if want is not None and ("bytes" if want == "text" else want) == dtype and len(values) == 1:
            items.append((key, values[0].decode() if want == "text" else values[0]))
        else:
            items.append((key, (dtype, values)))
            rest.append(key)
    return items, rest


def decoded(data: bytes) -> tuple[list[tuple[str, Any]], list[str]]:
    features, rest = ExampleDecoder(SINGLES).decode(data)
    return list(features.items()), list(rest)


def outcome(decode: Any, data: bytes) -> str:
    """Values by repr (NaN equals NaN, -0.0 differs from 0.0), or the error's type."""
    try:
        return repr(decode(data))
    except (DecodeError, UnicodeDecodeError) as exc:
        return type(exc).__name__


texts = st.binary(max_size=300) | st.text(max_size=40).map(str.encode)
ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4) | st.lists(st.integers(0, 20000), min_size=1, max_size=1)
floats = st.lists(st.floats(width=32), max_size=4)
value = st.one_of(
    st.tuples(st.just("bytes"), st.lists(texts, max_size=3)),
    st.tuples(st.just("int64"), ints),
    st.tuples(st.just("float"), floats),
)
examples = st.dictionaries(st.sampled_from(["b", "t", "i", "f", "x", "image/encoded", "k" * 130]), value, max_size=6)


@settings(max_examples=150, deadline=None)
@given(examples)
def test_canonical_records_decode_as_decode_example_does(features: dict[str, tuple[str, list[Any]]]) -> None:
    data = encode_example(features)
    assert outcome(decoded, data) == outcome(general, data)


@settings(max_examples=250, deadline=None)
@given(examples, st.data())
def test_damaged_records_decode_or_fail_as_decode_example_does(features: dict[str, tuple[str, list[Any]]], data: st.DataObject) -> None:
    record = bytearray(encode_example(features))
    for _ in range(data.draw(st.integers(1, 3))):
        if not record:
            break
        at = data.draw(st.integers(0, len(record) - 1))
        change = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if change == "flip":
            record[at] ^= 1 << data.draw(st.integers(0, 7))
        elif change == "cut":
            del record[at:]
        else:
            record[at:at] = bytes([data.draw(st.integers(0, 255))])
    assert outcome(decoded, bytes(record)) == outcome(general, bytes(record))


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _varint(len(payload)) + payload


def _entry(key: bytes, feature: bytes) -> bytes:
    return _field(0x0A, _field(0x0A, key) + _field(0x12, feature))


@pytest.mark.parametrize(
    "entries",
    [
        [_entry(b"i", _field(0x1A, b"\x08\x07"))],  # an unpacked int64 (proto2's encoding)
        [_entry(b"f", _field(0x12, b"\x0d\x00\x00\xc0\x3f"))],  # an unpacked float
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x05"))), _entry(b"i", _field(0x1A, _field(0x0A, b"\x06")))],  # a key twice
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x05\x06"))), _entry(b"i", _field(0x1A, _field(0x0A, b"\x07")))],  # a list, then one
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x05")) + _field(0x12, _field(0x0A, b"\0\0\0\0")))],  # two lists: the last wins
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x05")) + _field(0x22, b"zz"))],  # an unknown field in a Feature
        [_entry(b"b", b"")],  # an empty Feature
        [_field(0x0A, _field(0x12, _field(0x1A, b"")) + _field(0x0A, b"i"))],  # the value before the key
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x80\x01")))],  # 128, in two bytes
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x80\x00")))],  # 0, in two bytes
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\xff" * 9 + b"\x01")))],  # -1
        [_entry(b"i", _field(0x1A, _field(0x0A, b"\x80")))],  # a truncated varint
        [_entry(b"\xff", _field(0x1A, b""))],  # a key that is not UTF-8
        [_entry(b"t", _field(0x0A, _field(0x0A, b"\xff")))],  # a text that is not UTF-8
        [_entry(b"b", _field(0x0A, _field(0x0A, bytes(range(256)) * 80)))],  # one value of 20,480 bytes: lengths of three bytes
        [_entry(b"b", _field(0x0A, b"\x0a\x85\x00hello"))],  # one value whose length takes two bytes for 5
        [_entry(b"b", _field(0x0A, b"\x0a\x85\x80\x00hello"))],  # and three
        [_entry(b"b", _field(0x0A, b"\x0a\x85\x01" + b"x" * 10))],  # one value that runs past its list
        [_entry(b"b", _field(0x0A, b"\x0a\x8a\x01" + b"x" * 138))],  # one value, then bytes that are not one
        [_entry(b"b", _field(0x0A, b"\x0a\x85"))],  # a length cut short at the end of its list
    ],
)
def test_other_layouts_and_damage_decode_as_decode_example_does(entries: list[bytes]) -> None:
    data = _field(0x0A, b"".join(entries))
    assert outcome(decoded, data) == outcome(general, data)
    assert outcome(decoded, data + b"\x10\x01") == outcome(general, data + b"\x10\x01")  # and an unknown field after Features
