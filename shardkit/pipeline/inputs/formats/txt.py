"""``.txt`` index files: whitespace-separated columns, ``#`` comments and blank lines skipped,
every data line as wide as the first. Cut at line ends.

Read as a table (``reads_tables``), a block of lines at a time: the block's lines become one
Arrow column without a copy (their offsets found with NumPy), split at white space in Arrow, each
position a column of text named by its number ("0", "1", ...; a config's ``columns:`` list names
them). A block that is not plain ASCII (where Python's ``str.split`` and Arrow's may part ways) or
that ends a line with a lone ``\\r`` is read line by line, as ``read_rows`` reads it.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import os
from collections.abc import Iterator, Sequence
from typing import IO, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.detection import darknet
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, TableBatch
from shardkit.pipeline.inputs.formats.text_lines import TextFormat, first_bad_byte
from shardkit.storage import location

BLOCK_BYTES = 1 << 20  # bytes of lines read at once
_ODD_BYTES = (b"\x1c", b"\x1d", b"\x1e", b"\x1f")  # white space to Python's split, not to Arrow's ASCII split


@dataclasses.dataclass(frozen=True)
class Txt(TextFormat):
    cuts_at_line_ends: ClassVar[bool] = True
    reads_tables: ClassVar[bool] = True
    stages_rows: ClassVar[bool] = True
    keys_by_identity: ClassVar[bool] = True

    def cut(self, path: str, piece_bytes: int) -> list[Piece]:
        """Pieces at line ends; those after the first data line carry its width and number, which
        every line is checked against."""
        pieces = super().cut(path, piece_bytes)
        if len(pieces) == 1 and pieces[0].whole:
            return pieces
        first = self._first_row(path)
        return [dataclasses.replace(p, context=first if first and first[1] < p.first_line else None) for p in pieces]

    def _first_row(self, path: str) -> tuple[int, int] | None:
        for row in self.read_rows(Piece(path)):
            if isinstance(row, Row):
                return len(row.values), row.line
        return None

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        source = piece.path
        width, first_line = piece.context or (None, 0)
        for number, line in enumerate(lines, start=piece.first_line):
            text = line.strip()
            if not text or text[0] == "#":
                continue
            values = tuple(text.split())
            if width is None:
                width, first_line = len(values), number
            elif len(values) != width:
                yield EntryError(source, number, f"{len(values)} columns, but line {first_line} has {width}")
                continue
            yield Row(source, number, values, text=text)

    def column_names(self, path: str) -> tuple[str, ...]:
        """The positions of the first data line's columns, as names: ("0", "1", ...); none in a
        file of no data line."""
        first = self._first_row(path)
        return tuple(str(i) for i in range(first[0])) if first else ()

    def read_tables(self, piece: Piece, columns: Sequence[str] | None) -> Iterator[TableBatch]:
        """The piece's data lines as batches of text columns (None: every column), numbered by line."""
        width = piece.context
        line = piece.first_line
        with self.opened(piece.path) as handle:
            if piece.start:
                handle.seek(piece.start)
            left = None if piece.stop is None else piece.stop - piece.start
            carry = b""
            while True:
                more = handle.read(BLOCK_BYTES if left is None else min(BLOCK_BYTES, left))
                if left is not None:
                    left -= len(more)
                data = carry + more
                if not data:
                    return
                if line == 1 and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                cut = data.rfind(b"\n") + 1 if more else len(data)
                if not cut:  # one line longer than a block
                    carry = data
                    continue
                block, carry = data[:cut], data[cut:]
                batch, width = self._block(piece, block, line, width, columns)
                yield batch
                line += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
                if not more:
                    return

    def _block(
        self, piece: Piece, block: bytes, line: int, width: tuple[int, int] | None, columns: Sequence[str] | None
    ) -> tuple[TableBatch, tuple[int, int] | None]:
        """One block of whole lines as a batch; ``width``: the first data line's (width, line), once known."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if not block.isascii() or any(c in block for c in _ODD_BYTES) or block.count(b"\r") != block.count(b"\r\n"):
            return self._python_block(piece, block, line, width, columns)
        raw = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(raw == 0x0A) + 1
        if not len(ends) or ends[-1] != len(block):
            ends = np.append(ends, len(block))
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        lines = pc.ascii_trim_whitespace(pa.StringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(block)))
        words = pc.ascii_split_whitespace(lines)  # of a trimmed line: no empty word but a blank line's one
        counts = pc.list_value_length(words).to_numpy(zero_copy_only=False)
        blank = pc.equal(pc.binary_length(lines), 0).to_numpy(zero_copy_only=False)
        comments = pc.starts_with(lines, "#").to_numpy(zero_copy_only=False)
        data = np.flatnonzero(~blank & ~comments)
        numbers = line + data
        if width is None and len(data):
            width = (int(counts[data[0]]), int(numbers[0]))
        errors: tuple[EntryError, ...] = ()
        if width is not None:
            wrong = counts[data] != width[0]
            if wrong.any():
                errors = tuple(
                    EntryError(piece.path, int(n), f"{int(c)} columns, but line {width[1]} has {width[0]}")
                    for n, c in zip(numbers[wrong].tolist(), counts[data][wrong].tolist(), strict=True)
                )
                data, numbers = data[~wrong], numbers[~wrong]
        kept = words.take(pa.array(data))
        names = [str(i) for i in range(width[0])] if width is not None else []
        wanted = names if columns is None else list(columns)
        return TableBatch(piece.path, 0, {n: pc.list_element(kept, int(n)) for n in wanted}, numbers.astype(np.int64), errors), width

    def _python_block(
        self, piece: Piece, block: bytes, line: int, width: tuple[int, int] | None, columns: Sequence[str] | None
    ) -> tuple[TableBatch, tuple[int, int] | None]:
        """A block read line by line, as ``read_rows`` reads it."""
        import numpy as np
        import pyarrow as pa

        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = first_bad_byte(piece.path, piece.start)
            raise ShardkitError(f"{piece.path}: not UTF-8 text ({exc.reason} near byte {where})") from None
        found = list(self.text_rows(Piece(piece.path, first_line=line, context=width), io.StringIO(text, newline="")))
        rows = [r for r in found if isinstance(r, Row)]
        if width is None and rows:
            width = (len(rows[0].values), rows[0].line)
        names = [str(i) for i in range(width[0])] if width is not None else []
        wanted = names if columns is None else list(columns)
        values = {n: pa.array([r.values[int(n)] for r in rows], pa.string()) for n in wanted}
        errors = tuple(r for r in found if isinstance(r, EntryError))
        return TableBatch(piece.path, 0, values, np.asarray([r.line for r in rows], dtype=np.int64), errors), width

    def unread_annotations(self, path: str, folder: str) -> str | None:
        """A list of images alone (one column) whose first images have YOLO labels beside them,
        or that a Darknet ``obj.data`` names: one line saying what reads the labels."""
        if location.is_url(path):
            return None
        first = [r for r in itertools.islice(self.read_rows(Piece(path)), darknet.SAMPLE) if isinstance(r, Row)]
        if not first or len(first[0].values) != 1:
            return None
        return darknet.unread_labels(path, [(r.line, os.path.join(folder, r.values[0])) for r in first])

    def plan_payload(self, row: Row) -> str:
        return row.text  # type: ignore[return-value]  # every .txt row keeps its line

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        return Row(source, line, tuple(payload.split()), text=payload)


TXT = Txt("txt", (".txt",))
