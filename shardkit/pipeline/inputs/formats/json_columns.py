"""A ``.jsonl`` file's rows as Arrow columns, a block of whole lines at a time, each row with its
line; a block Arrow cannot give back exactly as Python's ``json`` reads it is handed back to be
read line by line.

pyarrow parses a block (in C++, on every core) into the columns a config maps, each of the one
type its feature's kind takes (``int64``, ``double`` or ``string``; a list is read line by line): the
Python values ``to_pylist`` gives are then the ones ``json.loads`` gives (a ``double`` column is
asked for only by float features, for which ``1`` and ``1.0`` are the same number). NumPy over the
block's bytes numbers the rows by line and checks that each line Python would read as a row is
one object alone (``{`` first and ``}`` last, nothing but JSON white space around) and that Arrow
found one row a line. A block is read line by line instead (``json.loads``, as every ``.jsonl``
was before), where a mapped value is null or missing (JSON ``null`` and a missing key are
different errors), a value is not of its column's type (``1`` in a text feature, ``1.0`` in an
int64 one, an integer past int64), a line is invalid or not one object, a line is named twice
(a key repeated), a lone ``\\r`` ends a line, a line nests past ``bounded_json.MAX_DEPTH`` or holds
an integer past Python's digit limit, or its bytes are not UTF-8: one meaning, whichever reader runs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np

from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.input_format import Piece, TableBatch

BLOCK_BYTES = 4 << 20  # bytes parsed at once (pyarrow splits them among its threads), as a CSV's
TYPES = ("int64", "double", "string")  # what a mapped column may be read as
_LF, _CR, _OPEN, _CLOSE = 0x0A, 0x0D, ord("{"), ord("}")


def read(
    source: str, handle: IO[bytes], piece: Piece, types: Mapping[str, str], block_bytes: int | None = None
) -> Iterator[TableBatch | Piece]:
    """``piece`` of the file (``handle`` is at its start) as column batches of ``types`` (column ->
    one of ``TYPES``), and as pieces to read line by line where a block is not clean."""
    block_bytes = block_bytes or BLOCK_BYTES
    offset, line, carry = piece.start, piece.first_line, b""
    while True:
        size = block_bytes if piece.stop is None else min(block_bytes, piece.stop - offset - len(carry))
        more = handle.read(size) if size > 0 else b""
        data = carry + more
        if not data:
            return
        cut = data.rfind(b"\n") + 1 if more else len(data)
        if not cut:  # one line longer than a block
            carry = data
            continue
        block, carry = data[:cut], data[cut:]
        bom = 3 if offset == 0 and block.startswith(bounded_json.BOM) else 0
        found = _parsed(source, block, bom, line, types)
        if found is None:
            yield Piece(source, offset, offset + len(block), line, piece.context, piece.confined)
        elif found.rows:
            yield found
        line += _line_ends(block)
        offset += len(block)


def _line_ends(block: bytes) -> int:
    """The line ends Python's text mode sees in ``block``: ``\\n``, ``\\r\\n`` and a lone ``\\r``."""
    ends = block.count(b"\n")
    return ends + block.count(b"\r") - block.count(b"\r\n") if b"\r" in block else ends


def _parsed(source: str, block: bytes, bom: int, first: int, types: Mapping[str, str]) -> TableBatch | None:
    """One block of whole lines as columns, or None where it is not clean."""
    numbered = _numbered(block, bom, first)
    if numbered is None:
        return None
    numbers, longest = numbered
    if not len(numbers):
        return TableBatch(source, 0, {}, numbers)
    columns = _columns(memoryview(block)[bom:], types, len(numbers), longest)
    return None if columns is None else TableBatch(source, 0, columns, numbers)


def _numbered(block: bytes, bom: int, first: int) -> tuple[np.ndarray, int] | None:
    """The line of each row of ``block`` (its first line numbered ``first``) and the longest line's
    length, or None where a line is not what Arrow and Python read alike (see the module's note)."""
    if (b"\r" in block and block.count(b"\r") != block.count(b"\r\n")) or bounded_json.BOM in block[bom:]:
        return None
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return None
    data = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(data == _LF)
    if not len(ends) or ends[-1] != len(data) - 1:
        ends = np.append(ends, len(data))
    starts = np.concatenate(([bom], ends[:-1] + 1))
    last = ends - 1 - (data[np.maximum(ends - 1, 0)] == _CR)  # before a \r\n's \r
    rows = (last >= starts) & (data[np.minimum(starts, len(data) - 1)] == _OPEN) & (data[np.maximum(last, 0)] == _CLOSE)
    for i in np.flatnonzero(~rows).tolist():  # blank lines, white space around an object, or not one object
        text = block[starts[i] : ends[i]].strip(b" \t\r")
        if text:
            if not (text.startswith(b"{") and text.endswith(b"}")):
                return None
            rows[i] = True
    if not _bounded(data, block, starts, ends, int(rows.sum())):
        return None
    return np.flatnonzero(rows).astype(np.int64) + first, int((ends - starts).max())


def _bounded(data: np.ndarray, block: bytes, starts: np.ndarray, ends: np.ndarray, rows: int) -> bool:
    """No line nests deeper than Python's reader allows, nor holds more digits in a row than
    Python's ``int`` reads (either way that line is an error of its own)."""
    brackets = block.count(b"{") + (block.count(b"[") if b"[" in block else 0)
    if brackets >= rows + bounded_json.MAX_DEPTH:  # each of the rows opens one: only then may a line open more than MAX_DEPTH
        opens = np.flatnonzero((data == _OPEN) | (data == ord("[")))
        if np.bincount(np.searchsorted(ends, opens), minlength=len(ends)).max() > bounded_json.MAX_DEPTH:
            return False
    limit = sys.get_int_max_str_digits()
    if limit:
        digits = re.compile(rb"[0-9]{%d}" % (limit + 1))
        for i in np.flatnonzero(ends - starts > limit).tolist():
            if digits.search(block, int(starts[i]), int(ends[i])):
                return False
    return True


def _columns(body: memoryview, types: Mapping[str, str], rows: int, longest: int) -> dict[str, Any] | None:
    """The block parsed with each column of its type, or None where Arrow refuses it, gives a
    null, or finds another number of rows."""
    import pyarrow as pa
    import pyarrow.json as pjson

    schema = pa.schema([(name, _type(kind)) for name, kind in types.items()])
    read = pjson.ReadOptions(use_threads=True, block_size=max(1 << 20, longest + 2))
    parse = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        table = pjson.read_json(pa.py_buffer(body), read_options=read, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != rows:
        return None
    columns = {name: table.column(name).combine_chunks() for name in types}
    return None if any(column.null_count for column in columns.values()) else columns


def _type(kind: str) -> Any:
    import pyarrow as pa

    return {"int64": pa.int64(), "double": pa.float64(), "string": pa.string()}[kind]
