"""``.csv`` and ``.tsv`` index files: a header row names the columns, then one row per entry.

Read as a table (``reads_tables``): blocks of rows parsed by pyarrow into columns of text
(``csv_columns``), planned and encoded a column batch at a time as Parquet rows are, each value
typed by its feature's kind as it would type the text. A row is named by the line it starts on
(a quoted field may hold line breaks). ``read_rows`` reads rows one by one (a config inferred
from the first row).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import IO, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats import csv_columns
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, TableBatch
from shardkit.pipeline.inputs.formats.text_lines import TextFormat
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class Delimited(TextFormat):
    delimiter: str = ","
    keeps_names: ClassVar[bool] = True
    reads_tables: ClassVar[bool] = True
    stages_rows: ClassVar[bool] = True
    keys_by_identity: ClassVar[bool] = True

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        source = piece.path
        names: tuple[str, ...] | None = None
        number = 1
        for count, values in csv_columns.python_rows(lines, self.delimiter):
            number += count  # a row is named by the line it starts on
            if values is None:
                continue
            if names is None:
                names = tuple(v.strip() for v in values)
                continue
            if len(values) != len(names):
                yield EntryError(source, number - count, f"{len(values)} columns, but the header has {len(names)}")
                continue
            yield Row(source, number - count, tuple(v.strip() for v in values), names)
        if names is None:
            raise ShardkitError(f"{source}: empty file: a header row is needed")

    def column_names(self, path: str) -> tuple[str, ...]:
        with self.opened(path) as handle:
            return csv_columns.header(path, handle, self.delimiter).names

    def cut(self, path: str, piece_bytes: int) -> list[Piece]:
        """Pieces of whole rows, of about ``piece_bytes``; those after the first carry the header."""
        size = location.size(path)
        if size is None or size <= piece_bytes:
            return super().cut(path, piece_bytes)
        with self.opened(path) as handle:
            head = csv_columns.header(path, handle, self.delimiter)
            handle.seek(head.offset)
            found = csv_columns.cut(handle, head, self.delimiter, piece_bytes)
        return [Piece(path) if i == 0 and stop is None else Piece(path, 0 if i == 0 else start, stop, line, None if i == 0 else head)
                for i, (start, stop, line) in enumerate(found)]  # fmt: skip

    def read_tables(self, piece: Piece, columns: Sequence[str] | None) -> Iterator[TableBatch]:
        """The piece's rows as batches of text columns (None: every column), numbered by line."""
        with self.opened(piece.path) as handle:
            head = piece.context if piece.start else csv_columns.header(piece.path, handle, self.delimiter)
            handle.seek(head.offset if not piece.start else piece.start)
            wanted = list(dict.fromkeys(head.names)) if columns is None else list(columns)
            for name in wanted:
                if name not in head.names:
                    raise ShardkitError(f"{piece.path}: no column {name!r} (columns: {', '.join(head.names)})")
            if piece.start:
                head = dataclasses.replace(head, offset=piece.start, line=piece.first_line)
            limit = None if piece.stop is None else piece.stop - head.offset
            for found in csv_columns.read(piece.path, handle, head, self.delimiter, wanted, limit=limit):
                yield TableBatch(piece.path, 0, found.columns, found.lines, tuple(found.errors))


CSV = Delimited("csv", (".csv",), ",")
TSV = Delimited("tsv", (".tsv",), "\t")
