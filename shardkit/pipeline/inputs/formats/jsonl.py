"""``.jsonl`` index files: one JSON object per line, its keys naming the columns; blank lines
skipped. Cut at line ends.

Read as a table (``reads_tables``) a block of lines at a time (``json_columns``): the columns a
config maps, each of the Arrow type its feature's kind takes, planned and encoded as Parquet
rows are, with rows named by line. A block Arrow cannot give back exactly as ``json.loads`` reads
it (``reads_rows_where_unclean``) is planned row by row instead, as every ``.jsonl`` was before:
its rows' plan payload is their line, which the worker reads back with ``plan_row``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats import bounded_json, json_columns
from shardkit.pipeline.inputs.formats.input_format import Piece, Row, TableBatch
from shardkit.pipeline.inputs.formats.text_lines import TextFormat, explained
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class Jsonl(TextFormat):
    cuts_at_line_ends: ClassVar[bool] = True
    keeps_names: ClassVar[bool] = True  # a row read back from its table is named by the columns planning read (a payload's by its keys)
    reads_tables: ClassVar[bool] = True
    stages_rows: ClassVar[bool] = True
    keys_by_identity: ClassVar[bool] = True
    reads_rows_where_unclean: ClassVar[bool] = True

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        source = piece.path
        for number, line in enumerate(lines, start=piece.first_line):
            if not line.strip():
                continue
            try:
                if line.count("[") + line.count("{") > bounded_json.MAX_DEPTH:  # only such a line can nest too deep
                    bounded_json.check(line.encode("utf-8", "surrogateescape"))
                obj = json.loads(line)
            except bounded_json.Exceeded as exc:
                yield EntryError(source, number, f"not an index line: {exc.reason}")
                continue
            except json.JSONDecodeError as exc:
                yield EntryError(source, number, f"not valid JSON: {exc.msg} at column {exc.colno}")
                continue
            except ValueError as exc:  # e.g. an integer past Python's digit limit
                yield EntryError(source, number, f"not valid JSON: {exc}")
                continue
            if not isinstance(obj, dict):
                yield EntryError(source, number, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield Row(source, number, tuple(obj.values()), tuple(obj.keys()), text=line.strip())

    def plan_payload(self, row: Row) -> str:
        return row.text  # type: ignore[return-value]  # every .jsonl row keeps its line

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        obj = json.loads(payload)
        return Row(source, line, tuple(obj.values()), tuple(obj.keys()), text=payload)

    def read_blocks(self, piece: Piece, types: Mapping[str, str]) -> Iterator[TableBatch | Piece]:
        """The rows of ``piece`` as batches of the columns ``types`` names, each of its type (one
        of ``json_columns.TYPES``), numbered by line; a block that is not clean as a piece to read
        with ``read_rows``."""
        try:
            handle = location.open_read(piece.path)
        except OSError as exc:
            raise ShardkitError(f"{piece.path}: cannot read index file: {exc.strerror or exc}") from None
        with handle, explained(piece.path):
            handle.seek(piece.start)
            yield from json_columns.read(piece.path, handle, piece, types)

    def rows_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> list[Row]:
        """The rows on lines ``numbers``, in that order (the file read again, line by line: only
        where the rows planning staged cannot be read)."""
        wanted = set(numbers)
        found = {r.line: r for r in self.read_rows(Piece(source)) if isinstance(r, Row) and r.line in wanted}
        if len(found) != len(wanted):
            raise ShardkitError(f"{source}: the plan names rows the file no longer has at those lines: it changed since planning")
        return [found[n] for n in numbers]

    def table_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> TableBatch:
        """``rows_at`` as columns, where each column's values are of one JSON type (as planning
        read them into a table); else the file changed since planning."""
        import numpy as np
        import pyarrow as pa

        rows = self.rows_at(source, numbers, columns)
        names = list(columns or ())
        out: dict[str, Any] = {}
        for name in names:
            values = [dict(zip(r.names or (), r.values, strict=True)).get(name) for r in rows]
            kinds = {type(v) for v in values}
            if not kinds <= {int} and not kinds <= {str} and not kinds <= {float, int}:
                raise ShardkitError(f"{source}: the plan names rows the file no longer has at those lines: it changed since planning")
            out[name] = pa.array(values, pa.float64() if float in kinds else None)
        lines = np.asarray(numbers, dtype=np.int64)
        return TableBatch(source, 0, out, lines)


JSONL = Jsonl("jsonl", (".jsonl",))
