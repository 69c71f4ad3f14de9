"""``tf.train.Example`` decoding for records of one schema, in one pass, single values as themselves.

``decode_example`` splits every message into a list of fields before reading it: general, and
about 10 us a feature. Records shardkit (or TensorFlow) writes have one layout: each map entry is
the key, then a Feature holding one list, numbers packed. ``ExampleDecoder`` reads that layout
straight through; any other layout, well-formed or not, goes to ``decode_example``, so the values
and the errors are always exactly its.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from shardkit.formats.example_proto import BYTES, FLOAT, INT64, DecodeError, Dtype, decode_example, read_varint

_FLOAT32 = struct.Struct("<f")
_LIST_TAGS: dict[int, Dtype] = {0x0A: BYTES, 0x12: FLOAT, 0x1A: INT64}  # Feature's oneof: field 1, 2, 3, length-delimited
_KEYS_KEPT = 4096  # a schema's keys, and then some: records of another writer cannot grow it without end


class ExampleDecoder:
    """Decodes Examples of one schema; ``singles`` maps a key to how its single value is wanted as itself.

    ``decode`` gives every feature of the record, in its order, and the keys among them still in
    ``decode_example``'s form ``(dtype, values)``. A key of ``singles`` whose record holds exactly
    one value of its wire type is the value itself: an int, a float, bytes, or for ``"text"``
    (bytes on the wire) a str.
    """

    def __init__(self, singles: Mapping[str, Dtype | Literal["text"]]) -> None:
        self._singles = {key.encode(): (BYTES if want == "text" else want, want == "text") for key, want in singles.items()}
        self._keys: dict[bytes, str] = {}  # each key's bytes decoded once

    def decode(self, data: bytes) -> tuple[dict[str, Any], dict[str, None]]:
        try:
            found = self._canonical(data)
        except (IndexError, DecodeError, UnicodeDecodeError):
            found = None  # decode_example says what is wrong
        if found is not None:
            return found
        features: dict[str, Any] = decode_example(data)
        rest: dict[str, None] = {}
        for key, (dtype, values) in features.items():
            single = self._singles.get(key.encode())
            if single is not None and single[0] == dtype and len(values) == 1:
                features[key] = values[0].decode() if single[1] else values[0]
            else:
                rest[key] = None
        return features, rest

    def _canonical(self, data: bytes) -> tuple[dict[str, Any], dict[str, None]] | None:
        """Example{1: Features{1: entry...}}, entry = {1: key, 2: Feature{N: list}}: or None where it is not."""
        end = len(data)
        if not end or data[0] != 0x0A:
            return None
        size, pos = _size(data, 1, end)
        if pos + size != end:
            return None
        features: dict[str, Any] = {}
        rest: dict[str, None] = {}
        singles, keys = self._singles, self._keys
        # Each entry: 0a LEN 0a KEYLEN KEY 12 LEN TAG LEN (values). Lengths under 128 are one byte,
        # read here in line (a call each would be a third of the time); longer ones by _long_size.
        # A length read past its entry's end is caught by the checks after it, as read_varint's would be.
        while pos < end:
            if data[pos] != 0x0A:
                return None
            size = data[pos + 1]
            pos += 2
            if size > 0x7F:
                size, pos = _long_size(data, pos, size, end)
            entry_end = pos + size
            if entry_end > end or data[pos] != 0x0A:
                return None
            size = data[pos + 1]
            pos += 2
            if size > 0x7F:
                size, pos = _long_size(data, pos, size, entry_end)
            key_bytes = data[pos : pos + size]
            pos += size
            if pos >= entry_end or data[pos] != 0x12:
                return None
            size = data[pos + 1]
            pos += 2
            if size > 0x7F:
                size, pos = _long_size(data, pos, size, entry_end)
            if pos + size != entry_end or pos >= entry_end:
                return None
            dtype = _LIST_TAGS.get(data[pos])
            size = data[pos + 1]
            pos += 2
            if size > 0x7F:
                size, pos = _long_size(data, pos, size, entry_end)
            if dtype is None or pos + size != entry_end:
                return None
            # One value of a few bytes (a number, a short string), the most common feature, in line too.
            values: list[Any] | None
            if data[pos] == 0x0A and data[pos + 1] < 0x80 and pos + 2 + data[pos + 1] == entry_end and (dtype is not FLOAT or size == 6):
                if dtype is BYTES:
                    values = [data[pos + 2 : entry_end]]
                elif dtype is FLOAT:
                    values = [_FLOAT32.unpack_from(data, pos + 2)[0]]
                elif size == 3 and data[pos + 2] < 0x80:
                    values = [data[pos + 2]]
                elif size == 4 and data[pos + 2] > 0x7F and data[pos + 3] < 0x80:  # 128 to 16383: picture sizes
                    values = [(data[pos + 2] & 0x7F) | data[pos + 3] << 7]
                else:
                    values = _values(data, dtype, pos, entry_end)
            elif dtype is BYTES and data[pos] == 0x0A and data[pos + 1] > 0x7F:  # one long value: an image, a mask
                size, start = _long_size(data, pos + 2, data[pos + 1], entry_end)
                values = [data[start:entry_end]] if start + size == entry_end else _values(data, dtype, pos, entry_end)
            else:
                values = _values(data, dtype, pos, entry_end)
            if values is None:
                return None
            key = keys.get(key_bytes)
            if key is None:
                key = key_bytes.decode()
                if len(keys) < _KEYS_KEPT:
                    keys[key_bytes] = key
            single = singles.get(key_bytes)
            if single is not None and single[0] == dtype and len(values) == 1:
                features[key] = values[0].decode() if single[1] else values[0]
                rest.pop(key, None)  # a key written twice: the last wins, as in decode_example
            else:
                features[key] = (dtype, values)
                rest[key] = None
            pos = entry_end
        return features, rest


def _long_size(data: bytes, pos: int, first: int, end: int) -> tuple[int, int]:
    """A length whose first byte ``first`` (0x80 or more) is at ``pos - 1``, and the position after it:
    two or three bytes (up to 2 MB) in line, longer ones by read_varint."""
    second = data[pos]
    if second < 0x80:
        return (first & 0x7F) | second << 7, pos + 1
    third = data[pos + 1]
    if third < 0x80:
        return (first & 0x7F) | (second & 0x7F) << 7 | third << 14, pos + 2
    return read_varint(data, pos - 1, end)


def _size(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length varint and the position after it: one byte, most often."""
    value = data[pos]
    if value < 0x80:
        return value, pos + 1
    return read_varint(data, pos, end)


def _values(data: bytes, dtype: Dtype, pos: int, end: int) -> list[Any] | None:
    """A list's values at ``data[pos:end]``: bytes as (0a LEN VALUE)..., numbers as one packed field; or None."""
    if pos == end:
        return []
    if dtype == BYTES:
        items: list[bytes] = []
        while pos < end:
            if data[pos] != 0x0A:
                return None
            size, pos = _size(data, pos + 1, end)
            if pos + size > end:
                return None
            items.append(data[pos : pos + size])
            pos += size
        return items
    if data[pos] != 0x0A:
        return None
    size, pos = _size(data, pos + 1, end)
    if pos + size != end:
        return None
    if dtype == FLOAT:
        if size == 4:
            return [_FLOAT32.unpack_from(data, pos)[0]]
        return None if size % 4 else np.frombuffer(data, "<f4", size // 4, pos).tolist()
    ints: list[int] = []
    while pos < end:
        value, pos = read_varint(data, pos, end)
        ints.append(value - (1 << 64) if value >= 1 << 63 else value)
    return ints
