"""``.csv`` and ``.tsv`` index files: a header row names the columns, then one row per entry.

Read whole, never cut: a quoted field may hold a line break, so a line end is no row boundary.
A row's plan payload is its values as a JSON list; the header is kept once, with the source.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator
from typing import IO, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.formats.text_lines import TextFormat


@dataclasses.dataclass(frozen=True)
class Delimited(TextFormat):
    delimiter: str = ","
    keeps_names: ClassVar[bool] = True

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        source = piece.path
        reader = csv.reader(lines, delimiter=self.delimiter)
        names: tuple[str, ...] | None = None
        for values in reader:
            number = reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            if names is None:
                names = tuple(v.strip() for v in values)
                continue
            if len(values) != len(names):
                yield EntryError(source, number, f"{len(values)} columns, but the header has {len(names)}")
                continue
            yield Row(source, number, tuple(v.strip() for v in values), names)
        if names is None:
            raise ShardkitError(f"{source}: empty file: a header row is needed")


CSV = Delimited("csv", (".csv",), ",")
TSV = Delimited("tsv", (".tsv",), "\t")
