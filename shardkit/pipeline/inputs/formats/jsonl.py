"""``.jsonl`` index files: one JSON object per line, its keys naming the columns; blank lines
skipped. Cut at line ends; a row's plan payload is its line."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import IO, ClassVar

from shardkit.errors import EntryError
from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.formats.text_lines import TextFormat


@dataclasses.dataclass(frozen=True)
class Jsonl(TextFormat):
    cuts_at_line_ends: ClassVar[bool] = True

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


JSONL = Jsonl("jsonl", (".jsonl",))
