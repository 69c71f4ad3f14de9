"""``tf.train.Example`` encoding and decoding by hand, in the protobuf wire format.

Hand-written so build workers need neither TensorFlow nor generated protobuf classes (classes
generated in package ``tensorflow`` collide with TensorFlow's own in a process that loads both).
The messages are tiny: Example{1: Features}; Features{1: map<string, Feature>};
Feature{oneof 1: BytesList, 2: FloatList, 3: Int64List}; each list has ``repeated value = 1``.
Numeric lists are written packed, as proto3 does and as TensorFlow's parser expects.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

Dtype = Literal["bytes", "float", "int64"]
# The three list types of a Feature (wire types, not feature kinds: a class name or an image
# size is an int64 list, an image or a text a bytes list).
BYTES: Dtype = "bytes"
FLOAT: Dtype = "float"
INT64: Dtype = "int64"
FeatureValue = Sequence[bytes] | Sequence[float] | Sequence[int] | np.ndarray

_BYTES, _FLOAT, _INT64 = 1, 2, 3
_DTYPE_FIELD: dict[str, int] = {BYTES: _BYTES, FLOAT: _FLOAT, INT64: _INT64}
_FIELD_DTYPE: dict[int, Dtype] = {_BYTES: BYTES, _FLOAT: FLOAT, _INT64: INT64}


def _compute_varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64 values are ten-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Tags, keys, short lengths and the lengths of small images: looked up, not computed (0.5 MB).
_VARINTS_UP_TO = 1 << 14
_VARINTS = [_compute_varint(i) for i in range(_VARINTS_UP_TO)]


def _varint(value: int) -> bytes:
    if 0 <= value < _VARINTS_UP_TO:
        return _VARINTS[value]
    return _compute_varint(value)


_LEN_TAGS = {field: _varint((field << 3) | 2) for field in (1, 2, 3)}


def _len_field(field: int, payload: bytes) -> bytes:
    return b"".join((_LEN_TAGS[field], _varint(len(payload)), payload))


def encode_feature(dtype: str, values: FeatureValue) -> bytes:
    """One ``Feature`` message."""
    if dtype == INT64 and len(values) == 1:
        value = int(values[0])  # type: ignore[arg-type]
        if 0 <= value < _SMALL_INT_FEATURES_UP_TO:
            return _SMALL_INT_FEATURES[value]
    if dtype == BYTES:
        body = b"".join(_len_field(1, bytes(v)) for v in values)  # type: ignore[arg-type]
    elif dtype == FLOAT:
        packed = np.asarray(values, dtype="<f4").tobytes()
        body = _len_field(1, packed) if packed else b""
    elif dtype == INT64:
        packed = b"".join(_varint(int(v)) for v in values)  # type: ignore[arg-type]
        body = _len_field(1, packed) if packed else b""
    else:
        raise ValueError(f"unknown feature dtype {dtype!r}")
    return _len_field(_DTYPE_FIELD[dtype], body)


_SMALL_INT_FEATURES_UP_TO = 1 << 12  # image sizes, channels, class ids: most int64 features
_SMALL_INT_FEATURES = [_len_field(_INT64, _len_field(1, _varint(v))) for v in range(_SMALL_INT_FEATURES_UP_TO)]


@functools.lru_cache(maxsize=4096)
def _map_key(key: str) -> bytes:
    """The start of a ``map<string, Feature>`` entry up to its value's length: tag, key, value tag."""
    encoded = key.encode()
    return b"\x0a" + _varint(len(encoded)) + encoded + b"\x12"


def _element(head: bytes, feature: bytes) -> bytes:
    """One entry of ``Features``' map, with its tag and length: (key, feature)."""
    return _len_field(1, head + _varint(len(feature)) + feature)


@functools.lru_cache(maxsize=1 << 16)
def _small_int_element(key: str, value: int) -> bytes:
    return _element(_map_key(key), _SMALL_INT_FEATURES[value])


_TAG1 = _LEN_TAGS[1]
_BYTES_TAG = _LEN_TAGS[_BYTES]


def encode_example(features: Mapping[str, tuple[str, FeatureValue]]) -> bytes:
    """Serialize ``{key: (dtype, values)}`` as a ``tf.train.Example``; keys are written sorted.

    The pieces of every nested message are collected with their lengths worked out ahead, and
    joined once: each value (an image's bytes, most often) is copied once, not once per level.
    """
    pieces: list[bytes] = []
    total = 0
    for key, (dtype, values) in sorted(features.items()):
        head = _map_key(key)
        if dtype == BYTES:
            body = 0  # BytesList: (tag, length, value) per value
            start = len(pieces)
            for value in values:
                data = value if isinstance(value, bytes) else bytes(value)  # type: ignore[arg-type]
                n = len(data)
                size = _VARINTS[n] if n < _VARINTS_UP_TO else _compute_varint(n)
                pieces += (_TAG1, size, data)
                body += 1 + len(size) + n
            list_size = _VARINTS[body] if body < _VARINTS_UP_TO else _compute_varint(body)
            feature = 1 + len(list_size) + body
            feature_size = _VARINTS[feature] if feature < _VARINTS_UP_TO else _compute_varint(feature)
            entry = len(head) + len(feature_size) + feature
            entry_size = _VARINTS[entry] if entry < _VARINTS_UP_TO else _compute_varint(entry)
            pieces[start:start] = (_TAG1, entry_size, head, feature_size, _BYTES_TAG, list_size)
            total += 1 + len(entry_size) + entry
        elif dtype == INT64 and len(values) == 1 and type(values[0]) is int and 0 <= values[0] < _SMALL_INT_FEATURES_UP_TO:
            element = _small_int_element(key, values[0])  # sizes, channels, class ids: the same few, again and again
            pieces.append(element)
            total += len(element)
        else:
            element = _element(head, encode_feature(dtype, values))
            pieces.append(element)
            total += len(element)
    return b"".join((_TAG1, _varint(total), *pieces))


class DecodeError(ValueError):
    """The bytes are not a well-formed ``tf.train.Example``."""


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[pos]`` (its low 64 bits, as protobuf keeps them) and the position after it."""
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            raise DecodeError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos  # protobuf keeps the low 64 bits of a 10-byte varint
        shift += 7


def fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int | tuple[int, int]]]:
    """Split a message into (field, wire type, value or (start, end) for length-delimited)."""
    out: list[tuple[int, int, int | tuple[int, int]]] = []
    while pos < end:
        tag, pos = read_varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise DecodeError("field number 0")
        if wire == 0:
            value, pos = read_varint(buf, pos, end)
            out.append((field, wire, value))
        elif wire == 2:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise DecodeError("length-delimited field runs past its message")
            out.append((field, wire, (pos, pos + length)))
            pos += length
        elif wire == 5:
            if pos + 4 > end:
                raise DecodeError("truncated fixed32")
            out.append((field, wire, struct.unpack_from("<I", buf, pos)[0]))
            pos += 4
        elif wire == 1:
            if pos + 8 > end:
                raise DecodeError("truncated fixed64")
            out.append((field, wire, struct.unpack_from("<Q", buf, pos)[0]))
            pos += 8
        else:
            raise DecodeError(f"unsupported wire type {wire}")
    if pos != end:
        raise DecodeError("message overruns its length")
    return out


def spans(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int]]:
    """The length-delimited fields of a message: (field number, start, end)."""
    return [(field, val[0], val[1]) for field, wire, val in fields(buf, pos, end) if wire == 2 and isinstance(val, tuple)]


def _decode_list(buf: bytes, dtype: Dtype, start: int, end: int) -> list[bytes] | list[float] | list[int]:
    if dtype == BYTES:
        items: list[bytes] = []
        for field, wire, val in fields(buf, start, end):
            if field == 1 and wire == 2 and isinstance(val, tuple):
                items.append(buf[val[0] : val[1]])
        return items
    if dtype == FLOAT:
        floats: list[float] = []
        for field, wire, val in fields(buf, start, end):
            if field != 1:
                continue
            if wire == 2 and isinstance(val, tuple):
                if (val[1] - val[0]) % 4:
                    raise DecodeError("packed float list length is not a multiple of 4")
                floats.extend(np.frombuffer(buf[val[0] : val[1]], dtype="<f4").tolist())
            elif wire == 5 and isinstance(val, int):
                floats.append(struct.unpack("<f", struct.pack("<I", val))[0])
        return floats
    ints: list[int] = []
    for field, wire, val in fields(buf, start, end):
        if field != 1:
            continue
        if wire == 2 and isinstance(val, tuple):
            pos = val[0]
            while pos < val[1]:
                v, pos = read_varint(buf, pos, val[1])
                ints.append(v - (1 << 64) if v >= 1 << 63 else v)
        elif wire == 0 and isinstance(val, int):
            ints.append(val - (1 << 64) if val >= 1 << 63 else val)
    return ints


def decode_example(data: bytes) -> dict[str, tuple[Dtype, list[bytes] | list[float] | list[int]]]:
    """Parse a serialized ``tf.train.Example`` into ``{key: (dtype, values)}``."""
    out: dict[str, tuple[Dtype, list[bytes] | list[float] | list[int]]] = {}
    for field, wire, val in fields(data, 0, len(data)):
        if field != 1 or wire != 2 or not isinstance(val, tuple):
            continue
        for efield, ewire, entry in fields(data, val[0], val[1]):
            if efield != 1 or ewire != 2 or not isinstance(entry, tuple):
                continue
            key = ""
            feature: tuple[int, int] | None = None
            for kfield, kwire, kval in fields(data, entry[0], entry[1]):
                if kfield == 1 and kwire == 2 and isinstance(kval, tuple):
                    try:
                        key = data[kval[0] : kval[1]].decode()
                    except UnicodeDecodeError as exc:
                        raise DecodeError("feature key is not UTF-8") from exc
                elif kfield == 2 and kwire == 2 and isinstance(kval, tuple):
                    feature = kval
            out[key] = ("bytes", []) if feature is None else decode_feature(data, *feature)
    return out


def decode_feature(data: bytes, start: int, end: int) -> tuple[Dtype, list[bytes] | list[float] | list[int]]:
    """One ``Feature`` message at ``data[start:end]``; an empty Feature reads as an empty bytes list."""
    kinds = [(f, v) for f, w, v in fields(data, start, end) if w == 2 and isinstance(v, tuple) and f in _FIELD_DTYPE]
    if not kinds:
        return "bytes", []  # unknown fields are skipped, as protobuf does
    # A oneof seen more than once: the last kind wins, and repeated lists of it merge (protobuf's rule).
    dtype = _FIELD_DTYPE[kinds[-1][0]]
    values: list[Any] = []
    for kind_field, (list_start, list_end) in kinds:
        if _FIELD_DTYPE[kind_field] == dtype:
            values.extend(_decode_list(data, dtype, list_start, list_end))
        else:
            values = []
    return dtype, values


def decode_sequence_example(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """SequenceExample{1: context Features, 2: FeatureLists{1: map<string, FeatureList{1: repeated Feature}>}}."""
    context: dict[str, Any] = {}
    lists: dict[str, list[tuple[str, list[Any]]]] = {}
    for field, start, end in spans(data, 0, len(data)):
        if field == 1:
            context.update(decode_example(_len_field(1, data[start:end])))
            continue
        for _, es, ee in spans(data, start, end):
            key = ""
            steps: list[tuple[str, list[Any]]] = []
            for kfield, ks, ke in spans(data, es, ee):
                if kfield == 1:
                    key = data[ks:ke].decode("utf-8", "replace")
                elif kfield == 2:
                    steps.extend(decode_feature(data, fs, fe) for _, fs, fe in spans(data, ks, ke))
            lists[key] = steps
    return context, lists
