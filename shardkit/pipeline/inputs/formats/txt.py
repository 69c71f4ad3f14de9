"""``.txt`` index files: whitespace-separated columns, ``#`` comments and blank lines skipped,
every data line as wide as the first. Cut at line ends; a row's plan payload is its line."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterator
from typing import IO, ClassVar

from shardkit.errors import EntryError
from shardkit.pipeline.inputs.formats.detection import darknet
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.formats.text_lines import TextFormat
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class Txt(TextFormat):
    cuts_at_line_ends: ClassVar[bool] = True

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
