"""``tf.train.Example`` records a batch at a time from Arrow columns, byte for byte as ``encode_example`` writes them.

A million rows of scalars are column work, not a million Python calls. Every piece of a record
(a tag and a varint length, a run of float32s, a string's bytes) is built for all rows at once:
as a 2-D NumPy block where every row's piece has the same width (scalars, most lengths), else as
an Arrow binary array (ragged lists, strings). The pieces of a row are then joined in C. A
protobuf length depends on the sizes nested in it (entry -> feature -> list -> values), so each
row's sizes are worked out in NumPy, innermost first, before any byte is written.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, overload

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

# The batch must write exactly the per-record encoder's bytes: it takes each prefix from the same definitions.
from shardkit.formats.example_proto import _DTYPE_FIELD, _LEN_TAGS, _VARINTS, _VARINTS_UP_TO, BYTES, FLOAT, INT64, _map_key, _varint

Ints: TypeAlias = npt.NDArray[np.int64]
# A piece of every row: a (rows, width) uint8 block when all rows' pieces are as wide, else a large_binary array.
Part: TypeAlias = npt.NDArray[np.uint8] | pa.Array
Sizes: TypeAlias = int | Ints  # a size that is the same in every row stays a Python int: no per-row work for it

_TAG1 = _LEN_TAGS[1]
_EMPTY = pa.scalar(b"", pa.large_binary())
# A varint is k + 1 bytes long for values from 2**(7k) up: the thresholds, as unsigned 64-bit integers.
_VARINT_STEPS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
_MERGE_BYTES = 1 << 20
_BINARY_TYPES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string, pa.types.is_fixed_size_binary,
                 pa.types.is_binary_view, pa.types.is_string_view)  # fmt: skip


def encode_batch(columns: Sequence[tuple[str, str, pa.Array | pa.ChunkedArray]], rows: int) -> pa.LargeBinaryArray:
    """Serialize ``rows`` Examples from ``(key, wire, array)`` columns; element ``i`` is row ``i``'s record.

    ``wire`` is ``"int64"``, ``"float"`` or ``"bytes"``; each array holds one element per row: a value
    (integers, floats, strings or binary) or a list of them (``list``, ``large_list``,
    ``fixed_size_list``; ragged and empty lists allowed). Record ``i`` equals ``encode_example`` of
    row ``i``'s values: keys sorted, floats rounded to float32, strings as UTF-8. Nulls, integers
    that are not int64 values and values the wire cannot hold raise ``ValueError``.
    """
    if rows < 0:
        raise ValueError(f"rows must not be negative, got {rows}")
    keys = [key for key, _, _ in columns]
    if len(set(keys)) != len(keys):
        raise ValueError(f"feature keys repeat: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    parts: list[Part] = []
    total: Sizes = 0
    for key, wire, array in sorted(columns, key=lambda column: column[0]):
        column_parts, entry = _encode_column(key, wire, array, rows)
        parts += column_parts
        total = _uniform(total + entry)
    return _join([_varint_part(total, rows, _TAG1), *parts], rows)


def _encode_column(key: str, wire: str, array: pa.Array | pa.ChunkedArray, rows: int) -> tuple[list[Part], Sizes]:
    """One feature's map entry in every row, as parts, and the entry's size with its tag and length."""
    if wire not in _PAYLOADS:
        raise ValueError(f"feature {key!r}: unknown wire type {wire!r}")
    values, offsets = _flatten(array, rows, key)
    counts = np.diff(offsets)
    payload, body, packed = _PAYLOADS[wire](values, offsets, counts, key)
    head = _map_key(key)
    feature = _uniform(1 + _widths(body) + body)
    entry = _uniform(len(head) + _widths(feature) + feature)
    parts = [_varint_part(entry, rows, _TAG1), _varint_part(feature, rows, head), _varint_part(body, rows, _LEN_TAGS[_DTYPE_FIELD[wire]])]
    if packed is not None:  # a packed numeric list; absent for an empty list
        parts.append(_varint_part(packed, rows, _TAG1, present=counts > 0))
    return parts + payload, _uniform(1 + _widths(entry) + entry)


def _flatten(array: pa.Array | pa.ChunkedArray, rows: int, key: str) -> tuple[pa.Array, Ints]:
    """A column's values, one after another, and where each row's values start and end among them."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if len(array) != rows:
        raise ValueError(f"feature {key!r}: {len(array)} values for {rows} rows")
    if array.null_count:
        raise ValueError(f"feature {key!r}: nulls cannot be encoded")
    kind = array.type
    if pa.types.is_fixed_size_list(kind):
        values, offsets = array.flatten(), np.arange(rows + 1, dtype=np.int64) * kind.list_size
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values = array.flatten()
        offsets = array.offsets.to_numpy().astype(np.int64)
        offsets -= offsets[0]  # a sliced list's offsets point into its parent's values; flatten() gives only its own
    else:
        values, offsets = array, np.arange(rows + 1, dtype=np.int64)
    if values.null_count:
        raise ValueError(f"feature {key!r}: nulls cannot be encoded")
    return values, offsets


def _float_payload(values: pa.Array, offsets: Ints, counts: Ints, key: str) -> tuple[list[Part], Sizes, Sizes]:
    kind = values.type
    if pa.types.is_integer(kind):
        # encode_example hands NumPy Python ints, which it rounds to float64 first: so do the same here.
        numbers = values.to_numpy().astype(np.float64)
    elif pa.types.is_floating(kind):
        numbers = values.to_numpy()
    else:
        raise ValueError(f"feature {key!r}: a float feature needs numbers, not {kind}")
    with np.errstate(over="ignore"):  # past float32's range is inf, as in encode_example
        packed_values = numbers.astype("<f4").view(np.uint8)
    size = _uniform(counts)
    if isinstance(size, int):
        payload: Part = packed_values.reshape(len(counts), 4 * size)
    else:
        payload = _from_buffers(offsets * 4, packed_values)
    packed = _uniform(counts * 4)
    return [payload], _list_body(packed, counts), packed


def _int64_payload(values: pa.Array, offsets: Ints, counts: Ints, key: str) -> tuple[list[Part], Sizes, Sizes]:
    kind = values.type
    if not pa.types.is_integer(kind):
        raise ValueError(f"feature {key!r}: an int64 feature needs integers, not {kind}")
    numbers = values.to_numpy()
    if kind == pa.uint64() and len(numbers) and numbers.max() >= 1 << 63:
        raise ValueError(f"feature {key!r}: {numbers.max()} does not fit in an int64")
    # Two's complement: a negative value is a ten-byte varint of its 64 bits, as protobuf writes it.
    unsigned = numbers.astype(np.int64).view(np.uint64)
    varints = _varint_part(unsigned, len(unsigned))
    widths = np.full(len(unsigned), varints.shape[1]) if isinstance(varints, np.ndarray) else np.diff(binary_offsets(varints))
    ends = _run_ends(widths, offsets)
    packed = _uniform(np.diff(ends))
    payload: Part
    if isinstance(varints, np.ndarray) and isinstance(size := _uniform(counts), int):
        payload = varints.reshape(len(counts), size * varints.shape[1])
    elif isinstance(varints, np.ndarray):
        payload = _from_buffers(ends, varints.reshape(-1))
    else:
        payload = _rebased(varints, ends)
    return [payload], _list_body(packed, counts), packed


def _bytes_payload(values: pa.Array, offsets: Ints, counts: Ints, key: str) -> tuple[list[Part], Sizes, None]:
    data = binary_values(values, f"feature {key!r}")
    lengths = np.diff(binary_offsets(data))
    heads = _varint_part(_uniform(lengths), len(lengths), _TAG1)  # BytesList: (tag, length, value) per value
    ends = _run_ends(1 + _widths(lengths) + lengths, offsets)
    body = _uniform(np.diff(ends))
    if len(counts) and (counts == 1).all():
        return [heads, data], body, None  # a value per row: its pieces join the record's, no copy of their own
    return [_rebased(_join([heads, data], len(lengths)), ends)], body, None


_PAYLOADS: dict[str, Callable[[pa.Array, Ints, Ints, str], tuple[list[Part], Sizes, Sizes | None]]] = {
    BYTES: _bytes_payload,
    FLOAT: _float_payload,
    INT64: _int64_payload,
}


def _run_ends(sizes: Ints, offsets: Ints) -> Ints:
    """Where each row's run of pieces ends, in bytes, given each piece's size and each row's first piece."""
    ends = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ends[1:])
    return ends[offsets]


def _list_body(packed: Sizes, counts: Ints) -> Sizes:
    """A numeric list's size: one packed field, or nothing for an empty list."""
    return _uniform(np.where(counts > 0, 1 + _widths(packed) + packed, 0))


def binary_values(array: pa.Array | pa.ChunkedArray, what: str) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if not any(check(kind) for check in _BINARY_TYPES):
        raise ValueError(f"{what}: bytes need strings or binary values, not {kind}")
    if array.null_count:
        raise ValueError(f"{what}: nulls cannot be encoded")
    return array.cast(pa.large_binary())


def binary_offsets(array: pa.Array) -> Ints:
    """A large_binary array's offsets into its data buffer, for its own elements (it may be a slice)."""
    buffer = array.buffers()[1]
    if buffer is None:
        return np.zeros(len(array) + 1, dtype=np.int64)
    return np.frombuffer(buffer, dtype=np.int64)[array.offset : array.offset + len(array) + 1]


def _rebased(array: pa.Array, ends: Ints) -> pa.Array:
    """Rows made of runs of ``array``'s elements: row ``i`` spans elements ``ends[i]`` to ``ends[i + 1]`` by size."""
    start = binary_offsets(array)[0]
    return pa.Array.from_buffers(pa.large_binary(), len(ends) - 1, [None, pa.py_buffer(ends + start), array.buffers()[2]])


def _from_buffers(offsets: Ints, data: npt.NDArray[np.uint8]) -> pa.Array:
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def as_binary_array(part: Part) -> pa.Array:
    if not isinstance(part, np.ndarray):
        return part
    rows, width = part.shape
    return _from_buffers(np.arange(rows + 1, dtype=np.int64) * width, np.ascontiguousarray(part).reshape(-1))


def _join(parts: Sequence[Part], rows: int) -> pa.Array:
    """Each row's pieces, one after another: neighbouring blocks as one NumPy copy, the rest by Arrow in C."""
    merged: list[Part] = []
    blocks: list[npt.NDArray[np.uint8]] = []
    for part in [*parts, None]:
        if isinstance(part, np.ndarray):
            blocks.append(part)
            continue
        if blocks:
            merged.append(_merge(blocks, rows))
            blocks = []
        if part is not None:
            merged.append(part)
    if len(merged) == 1:
        return as_binary_array(merged[0])
    return pc.binary_join_element_wise(*map(as_binary_array, merged), _EMPTY)


def _merge(blocks: list[npt.NDArray[np.uint8]], rows: int) -> npt.NDArray[np.uint8]:
    """Blocks side by side, in fewer passes over memory than ``np.concatenate``.

    The bytes every row shares are laid down as one row repeated; each other block goes in as one
    column of ``width``-byte items (a 2-D copy would pay a loop step per row), a few thousand rows
    at a time so that they stay in cache between blocks.
    """
    if len(blocks) == 1:
        return blocks[0]
    width = sum(block.shape[1] for block in blocks)
    shared = np.zeros(width, dtype=np.uint8)
    varying: list[tuple[int, npt.NDArray[Any]]] = []
    at = 0
    for block in blocks:
        if block.strides[0] == 0 and rows:  # broadcast: one row's bytes, the same in every row
            shared[at : at + block.shape[1]] = block[0]
        elif block.shape[1]:
            varying.append((at, np.ascontiguousarray(block).view(_item(block.shape[1])).reshape(rows)))
        at += block.shape[1]
    merged = np.empty((rows, width), dtype=np.uint8)
    step = max(1, _MERGE_BYTES // width)
    for start in range(0, rows, step):
        count = min(step, rows - start)
        merged[start : start + count] = shared
        for at, items in varying:
            column = np.ndarray((count,), dtype=items.dtype, buffer=merged, offset=start * width + at, strides=(width,))
            column[...] = items[start : start + count]
    return merged


def _item(width: int) -> np.dtype[Any]:
    """A dtype ``width`` bytes wide: a plain integer where there is one, which NumPy copies fastest."""
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(width, np.dtype((np.void, width))))


def _varint_part(
    values: Sizes | npt.NDArray[np.uint64], rows: int, lead: bytes = b"", present: npt.NDArray[np.bool_] | None = None
) -> Part:
    """``lead`` and the varint of each row's value (none of it in rows not ``present``)."""
    if isinstance(values, int):
        piece = np.frombuffer(lead + _varint(values), dtype=np.uint8)
        if present is None or present.all():
            return np.broadcast_to(piece, (rows, len(piece)))
        values = np.full(rows, values, dtype=np.int64)
    unsigned = values.astype(np.uint64, copy=False)
    widths = _widths(unsigned)
    if present is not None and present.all():
        present = None
    if present is None and isinstance(width := _uniform(widths), int):
        if width <= 2:  # values below 2**14: each distinct piece once, from example_proto's varints, gathered
            top = int(unsigned.max())
            pieces = np.empty((top + 1, len(lead) + width), dtype=np.uint8)
            pieces[:, : len(lead)] = np.frombuffer(lead, dtype=np.uint8)
            pieces[:, len(lead) :] = _varint_table()[: top + 1, :width]
            return np.take(pieces, unsigned.astype(np.intp), axis=0)
        block = np.empty((rows, len(lead) + width), dtype=np.uint8)
        block[:, : len(lead)] = np.frombuffer(lead, dtype=np.uint8)
        for k in range(width):
            block[:, len(lead) + k] = ((unsigned >> 7 * k) & 0x7F) | (0x80 if k < width - 1 else 0)
        return block
    sizes = len(lead) + widths if present is None else np.where(present, len(lead) + widths, 0)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    starts = offsets[:-1]
    if present is not None:
        starts, unsigned, widths = starts[present], unsigned[present], widths[present]
    for j, byte in enumerate(lead):
        data[starts + j] = byte
    for k in range(int(np.max(widths, initial=0))):
        more = widths > k
        group = (unsigned[more] >> 7 * k) & 0x7F
        data[starts[more] + len(lead) + k] = group | np.where(widths[more] > k + 1, 0x80, 0).astype(np.uint64)
    return _from_buffers(offsets, data)


@functools.cache
def _varint_table() -> npt.NDArray[np.uint8]:
    """example_proto's varints of the values below 2**14 as rows of two bytes (a one-byte varint padded)."""
    return np.frombuffer(b"".join(varint.ljust(2, b"\0") for varint in _VARINTS), dtype=np.uint8).reshape(_VARINTS_UP_TO, 2)


@overload
def _widths(values: int) -> int: ...
@overload
def _widths(values: npt.NDArray[Any]) -> Ints: ...
def _widths(values: Sizes | npt.NDArray[Any]) -> Sizes:
    """How many bytes each value's varint takes."""
    if isinstance(values, int):
        return len(_varint(values))
    if not len(values) or values.max() < 0x80:
        return np.ones(len(values), dtype=np.int64)
    return np.searchsorted(_VARINT_STEPS, values.astype(np.uint64), side="right").astype(np.int64) + 1


def _uniform(values: Sizes) -> Sizes:
    """A per-row size that is the same in every row, as a Python int; otherwise the array."""
    if isinstance(values, int):
        return values
    if not len(values) or values.min() != values.max():
        return values
    return int(values[0])
