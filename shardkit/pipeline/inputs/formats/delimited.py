"""``.csv`` and ``.tsv`` index files: a header row names the columns, then one row per entry.

Read as a table (``reads_tables``): blocks of rows parsed by pyarrow into columns of text
(``csv_columns``), planned and encoded a column batch at a time as Parquet rows are, each value
typed by its feature's kind as it would type the text. A row is named by the line it starts on
(a quoted field may hold line breaks). Planning stages the columns a config maps beside the plan
(``plan.staged_rows``), where the shards take their rows from; an OUT in a bucket has them read
again from the file. ``read_rows`` reads rows one by one (a config inferred from the first row).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import numpy as np

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats import csv_columns
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, TableBatch, found_at
from shardkit.pipeline.inputs.formats.text_lines import TextFormat, explained
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
        with self._opened(path) as handle:
            return csv_columns.header(path, handle, self.delimiter).names

    def read_tables(self, piece: Piece, columns: Sequence[str] | None) -> Iterator[TableBatch]:
        """The file's rows as batches of text columns (None: every column), numbered by line."""
        with self._opened(piece.path) as handle:
            head = csv_columns.header(piece.path, handle, self.delimiter)
            handle.seek(head.offset)
            wanted = list(dict.fromkeys(head.names)) if columns is None else list(columns)
            for name in wanted:
                if name not in head.names:
                    raise ShardkitError(f"{piece.path}: no column {name!r} (columns: {', '.join(head.names)})")
            for found in csv_columns.read(piece.path, handle, head, self.delimiter, wanted):
                yield TableBatch(piece.path, 0, found.columns, found.lines, tuple(found.errors))

    def table_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> TableBatch:
        """The rows starting on lines ``numbers``, in that order: the file read again, only those
        rows kept (where planning staged none: an OUT in a bucket)."""
        import pyarrow as pa

        wanted = np.asarray(numbers, dtype=np.int64)
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        parts = []
        for batch in self.read_tables(Piece(source), columns):
            at, hit = found_at(batch.lines, ordered)
            if hit.any():
                parts.append({name: column.take(pa.array(at[hit])) for name, column in batch.columns.items()})
        found = sum(len(next(iter(p.values()))) for p in parts) if parts else 0
        if found != len(wanted):
            raise ShardkitError(f"{source}: the plan names rows the file no longer has at those lines: it changed since planning")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        names = list(parts[0]) if parts else list(columns or ())
        joined = {n: pa.concat_arrays([p[n] for p in parts]).take(pa.array(back)) if parts else pa.array([], pa.string()) for n in names}
        return TableBatch(source, 0, joined, wanted)

    def rows_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> list[Row]:
        batch = self.table_at(source, numbers, columns)
        names = tuple(batch.columns)
        values = [column.to_pylist() for column in batch.columns.values()]
        return [Row(source, number, row, names) for number, row in zip(numbers, zip(*values, strict=True), strict=True)]

    @contextlib.contextmanager
    def _opened(self, path: str) -> Iterator[Any]:
        try:
            handle = location.open_read(path)
        except FileNotFoundError:
            raise ShardkitError(f"{path}: cannot read index file: file not found") from None
        except OSError as exc:
            raise ShardkitError(f"{path}: cannot read index file: {exc.strerror or exc}") from None
        with handle, explained(path):
            yield handle


CSV = Delimited("csv", (".csv",), ",")
TSV = Delimited("tsv", (".tsv",), "\t")
