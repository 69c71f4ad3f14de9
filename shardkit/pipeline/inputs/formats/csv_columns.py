"""A delimited file's rows as Arrow columns of text, a block of bytes at a time, each row with the
line it starts on.

pyarrow parses each block (in C++, on every core); this module finds where rows end and which
line each starts on, with NumPy over the block's bytes: a line end ends a row where an even
number of quote characters precede it in the block. That holds where quotes open and close
fields as RFC 4180 says (``"a ""b"" c"``). A block where a quote sits anywhere else (``ab"c``),
a lone ``\\r`` ends a line, pyarrow refuses a row (the wrong width; bytes that are not UTF-8), or
the row counts disagree, is read by Python's ``csv`` module instead, as shardkit read every CSV
before: one meaning, whichever reader runs. From the first block that is not RFC 4180 clean, the
rest of the file is read the Python way, streamed.

Values are stripped as Python's ``str.strip`` strips them. A blank line (nothing but white
space) is skipped; a row of empty fields (``,``, or ``""`` as ``csv.writer`` writes a row of one
empty text) is a row.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

import numpy as np

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.text_lines import first_bad_byte

BLOCK_BYTES = 4 << 20  # bytes parsed at once (pyarrow splits them among its threads): 8 MB, and a planning process passed 250 MB
PYTHON_ROWS = 65536  # rows the Python reader gathers into one batch
_QUOTE, _LF, _CR = 0x22, 0x0A, 0x0D
# A value whose first or last character is not printable ASCII: where Python's strip and
# Arrow's trim might differ (they agree on every ASCII character), so Python strips it.
_STRIPPABLE = r"^[\x00-\x20\x{7f}-\x{10FFFF}]|[\x00-\x20\x{7f}-\x{10FFFF}]$"


@dataclasses.dataclass(frozen=True)
class TextColumns:
    """Rows of a delimited file: the wanted columns' stripped texts, the line each row starts
    on, and the rows refused (the wrong width)."""

    columns: dict[str, Any]  # name -> pyarrow string Array
    lines: np.ndarray
    errors: list[EntryError]


@dataclasses.dataclass(frozen=True)
class Header:
    names: tuple[str, ...]
    offset: int  # the byte where the first data row begins
    line: int  # ... and its line number


def header(source: str, handle: IO[bytes], delimiter: str) -> Header:
    """The first row that is not blank, as column names (stripped); a BOM before it is skipped."""
    data = b""
    while True:
        more = handle.read(1 << 16)
        data += more
        text = _decoded(source, data, final=not more)
        lines = 0
        for count, values in python_rows(io.StringIO(text, newline=""), delimiter):
            lines += count
            if values is not None:
                consumed = "".join(_first_lines(text, lines))
                if more and len(consumed) == len(text):
                    break  # the row may go on past what was read
                bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
                return Header(tuple(v.strip() for v in values), bom + len(consumed.encode("utf-8")), lines + 1)
        else:
            if not more:
                raise ShardkitError(f"{source}: empty file: a header row is needed")


def cut(handle: IO[bytes], head: Header, delimiter: str, piece_bytes: int) -> list[tuple[int, int | None, int]]:
    """(start, stop, first line) of pieces of about ``piece_bytes`` after ``head`` (``handle`` is
    at ``head.offset``), each ending where a row does: found as ``read`` finds rows, a block at a
    time. From the first block that is not RFC 4180 clean, the rest is one piece (None: to the end)."""
    pieces: list[tuple[int, int | None, int]] = []
    start, line = head.offset, head.line
    offset, lines, carry = head.offset, head.line, b""
    while True:
        more = handle.read(BLOCK_BYTES)
        data = carry + more
        scan = _scan(data, delimiter, final=not more) if more else None
        if scan is None:
            break
        ends, lfs = scan
        if not len(ends):
            carry = data
            continue
        stop = int(ends[-1]) + 1
        carry = data[stop:]
        offset += stop
        lines += int(np.count_nonzero(lfs < stop))
        if offset - start >= piece_bytes:
            pieces.append((start, offset, line))
            start, line = offset, lines
    pieces.append((start, None, line))
    return pieces


def read(
    source: str,
    handle: IO[bytes],
    head: Header,
    delimiter: str,
    columns: Sequence[str],
    block_bytes: int = BLOCK_BYTES,
    limit: int | None = None,
) -> Iterator[TextColumns]:
    """The data rows after ``head`` (``handle`` is at ``head.offset``) as batches of ``columns``;
    ``limit``: the bytes to read, where a piece of the file ends (at a row's end)."""
    wanted = [head.names.index(name) for name in columns]  # a repeated name: its first column, as Row.get
    line, offset, carry = head.line, head.offset, b""
    reader: Any = handle if limit is None else _Limited(handle, limit)
    while True:
        more = reader.read(block_bytes)
        data = carry + more
        if not data:
            return
        scan = _scan(data, delimiter, final=not more)
        if more:
            if scan is None:  # not RFC 4180 clean: the rest the Python way
                yield from _python(source, _Chained(data, reader), line, offset, head, delimiter, wanted)
                return
            ends, lfs = scan
            if not len(ends):  # one row longer than a block
                carry = data
                continue
            cut = int(ends[-1]) + 1
            block, carry, scan = data[:cut], data[cut:], (ends, lfs[lfs < cut])
        else:
            block, carry = data, b""
        yield _parsed(source, block, scan, line, offset, head, delimiter, wanted)
        line += block.count(b"\n") if scan is None else len(scan[1])  # clean: every \r is a \r\n's
        offset += len(block)
        if not more:
            return


def _parsed(
    source: str, block: bytes, scan: Scan | None, line: int, offset: int, head: Header, delimiter: str, wanted: list[int]
) -> TextColumns:
    """One block of whole rows (``scan``: its row ends and line ends): by pyarrow where its line
    ends tell its rows, else by Python."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rows = _rows(block, scan, line)
    if rows is not None:
        starts, begins, stops = rows
        names = [f"c{i}" for i in range(len(head.names))]
        try:
            table = pcsv.read_csv(
                pa.py_buffer(block),
                read_options=pcsv.ReadOptions(column_names=names, block_size=max(1 << 20, len(block) // 2 + 1)),
                parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()),
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                    include_columns=[names[i] for i in dict.fromkeys(wanted)],
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a row of the wrong width, bytes not UTF-8: Python names it
            table = None
        if table is not None and table.num_rows == len(starts):
            ascii_only, trims = block.isascii(), _may_strip(block, scan)
            texts = {i: table.column(f"c{i}").combine_chunks() for i in dict.fromkeys(wanted)}
            texts = {i: stripped(t, ascii_only) for i, t in texts.items()} if trims else texts
            # A line of white space is one empty value, a row of empty values (a tab's), or a row pyarrow refused.
            blank = _blank_rows(texts, block, begins, stops) if len(head.names) == 1 or delimiter.isspace() else None
            if blank is not None:
                keep = pa.array(~blank)
                return TextColumns({head.names[i]: texts[i].filter(keep) for i in wanted}, starts[~blank], [])
            return TextColumns({head.names[i]: texts[i] for i in wanted}, starts, [])
    parts = list(_python(source, _Chained(block, io.BytesIO()), line, offset, head, delimiter, wanted))
    if not parts:  # blank lines only
        return TextColumns({head.names[i]: pa.array([], pa.string()) for i in wanted}, np.zeros(0, dtype=np.int64), [])
    return parts[0] if len(parts) == 1 else _joined(parts)


_SPACES = (b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


def _may_strip(block: bytes, scan: Scan | None) -> bool:
    """Whether a value of ``block`` may begin or end with white space: a space character in it,
    a line end inside a quoted value, or a character beyond ASCII."""
    return not block.isascii() or scan is None or len(scan[1]) > len(scan[0]) or any(c in block for c in _SPACES)


def stripped(column: Any, ascii_only: bool) -> Any:
    """Texts as Python's ``str.strip`` leaves them: Arrow's trim, and Python's own strip for
    the few values whose ends are not plain ASCII."""
    import pyarrow as pa
    import pyarrow.compute as pc

    trimmed = pc.utf8_trim_whitespace(column)
    if ascii_only:
        return trimmed
    suspect = np.flatnonzero(pc.match_substring_regex(column, _STRIPPABLE).to_numpy(zero_copy_only=False))
    if not len(suspect):
        return trimmed
    values = trimmed.to_pylist()
    for i, text in zip(suspect.tolist(), column.take(pa.array(suspect)).to_pylist(), strict=True):
        values[i] = text.strip()
    return pa.array(values, pa.string())


def _blank_rows(texts: dict[int, Any], block: bytes, begins: np.ndarray, stops: np.ndarray) -> np.ndarray | None:
    """Which rows are blank lines (white space alone: pyarrow reads one as a row of empty
    values); None where none is. Only rows empty in every column read can be; those few are told
    by their text."""
    import pyarrow.compute as pc

    blank = np.ones(len(begins), dtype=bool)
    for column in texts.values():
        blank &= pc.equal(pc.utf8_length(column), 0).to_numpy(zero_copy_only=False)
    if not blank.any():
        return None
    for i in np.flatnonzero(blank).tolist():
        blank[i] = not block[begins[i] : stops[i]].decode("utf-8").strip()
    return blank if blank.any() else None


def _joined(parts: list[TextColumns]) -> TextColumns:
    import pyarrow as pa

    return TextColumns(
        {n: pa.concat_arrays([p.columns[n] for p in parts]) for n in parts[0].columns},
        np.concatenate([p.lines for p in parts]),
        [e for p in parts for e in p.errors],
    )


Scan = tuple[np.ndarray, np.ndarray]  # the offsets of a block's row ends, and of all its line ends


def _scan(data: bytes, delimiter: str, final: bool) -> Scan | None:
    """The offsets of the line ends in ``data`` that end rows (an even count of quotes before
    them), and of every line end; None where a quote sits where RFC 4180 puts none or a lone
    ``\\r`` ends a line (up to the last row end, or to the end where ``data`` is the file's last)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    crs = np.flatnonzero(raw[:-1] == _CR)
    if len(crs) and not np.all(raw[crs + 1] == _LF):
        return None
    quotes = np.flatnonzero(raw == _QUOTE)
    lfs = np.flatnonzero(raw == _LF)
    ends = lfs[np.searchsorted(quotes, lfs) % 2 == 0]
    settled = quotes if final else quotes[quotes < ends[-1]] if len(ends) else quotes[:0]
    if len(settled) and not _quotes_clean(raw, settled, ord(delimiter)):
        return None
    return np.asarray(ends, dtype=np.int64), lfs


def _quotes_clean(raw: np.ndarray, quotes: np.ndarray, delimiter: int) -> bool:
    """Whether every quote opens a field (after a delimiter or line end), closes one (before
    one), or is one of a doubled pair inside a quoted field."""
    edges = np.zeros(256, dtype=bool)
    edges[[_LF, _CR, delimiter, _QUOTE]] = True
    opening, closing = quotes[0::2], quotes[1::2]
    before = np.where(opening > 0, raw[np.maximum(opening - 1, 0)], _LF)
    after = raw[np.minimum(closing + 1, len(raw) - 1)]
    return bool(np.all(edges[before]) and np.all(edges[after]))


def _rows(block: bytes, scan: Scan | None, line: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each non-empty row of ``block`` (whole rows): the line it starts on, its first byte and
    the byte after it; None where the block is not RFC 4180 clean."""
    raw = np.frombuffer(block, dtype=np.uint8)
    if scan is None:
        return None
    ends, lfs = scan
    if len(lfs) and (not len(ends) or int(ends[-1]) != int(lfs[-1])):
        return None  # a line end inside an open quote at the end of the file: Python says what it makes of it
    stops = ends.tolist()
    if len(block) and raw[-1] != _LF:
        stops.append(len(block))  # the file's last row, no line end after it
    stop = np.asarray(stops, dtype=np.int64)
    begin = np.concatenate([[0], stop[:-1] + 1]).astype(np.int64)
    length = stop - begin
    empty = (length == 0) | ((length == 1) & (raw[np.minimum(begin, len(raw) - 1)] == _CR))
    starts = line + np.searchsorted(lfs, begin)
    return starts[~empty].astype(np.int64), begin[~empty], stop[~empty]


class _Limited:
    """The first ``limit`` bytes of a file."""

    def __init__(self, handle: IO[bytes], limit: int) -> None:
        self._handle, self._left = handle, limit

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(self._left if size < 0 else min(size, self._left))
        self._left -= len(data)
        return data


class _Chained(io.RawIOBase):
    """Bytes already read, then the rest of a file, as one stream."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = io.BytesIO(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._head.readinto(buffer)
        if n:
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _python(
    source: str, raw: io.RawIOBase, line: int, offset: int, head: Header, delimiter: str, wanted: list[int]
) -> Iterator[TextColumns]:
    """Rows read by Python's ``csv`` module, as shardkit always read them, in batches."""
    import pyarrow as pa

    text = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", newline="")
    width = len(head.names)
    values: list[list[str]] = [[] for _ in wanted]
    lines: list[int] = []
    errors: list[EntryError] = []

    def batch() -> TextColumns:
        columns = {head.names[i]: pa.array(v, pa.string()) for i, v in zip(wanted, values, strict=True)}
        found = TextColumns(columns, np.asarray(lines, dtype=np.int64), list(errors))
        for v in values:
            v.clear()
        lines.clear()
        errors.clear()
        return found

    try:
        number = line
        for count, row in python_rows(text, delimiter):
            number += count
            if row is None:
                continue
            if len(row) != width:
                errors.append(EntryError(source, number - count, f"{len(row)} columns, but the header has {width}"))
            else:
                for out, i in zip(values, wanted, strict=True):
                    out.append(row[i].strip())
                lines.append(number - count)
            if len(lines) + len(errors) >= PYTHON_ROWS:
                yield batch()
    except UnicodeDecodeError as exc:
        raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {first_bad_byte(source, offset)})") from None
    if lines or errors:
        yield batch()


def python_rows(lines: Iterable[str], delimiter: str) -> Iterator[tuple[int, list[str] | None]]:
    """Python's ``csv`` reader over ``lines``: each row with the count of lines it takes (a
    quoted field may hold line breaks); None for a blank line."""
    taken: list[str] = []

    def counted() -> Iterator[str]:
        for text in lines:
            taken.append(text)
            yield text

    for row in csv.reader(counted(), delimiter=delimiter):
        count = len(taken)
        blank = not "".join(taken).strip()
        taken.clear()
        yield count, None if blank else row


def _decoded(source: str, data: bytes, final: bool) -> str:
    """``data`` as text (a character cut off at its end left for the next read)."""
    for cut in range(1 if final else 4):
        try:
            return data[: len(data) - cut].decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            if final or exc.start < len(data) - 4 or cut == 3:
                raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {exc.start})") from None
    raise AssertionError("unreachable")


def _first_lines(text: str, count: int) -> Iterator[str]:
    """The first ``count`` lines of ``text``, line ends kept, as Python's text mode splits them."""
    stream = io.StringIO(text, newline="")
    for _ in range(count):
        yield stream.readline()
