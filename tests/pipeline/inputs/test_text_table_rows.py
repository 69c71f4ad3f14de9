"""Which rows a ``.csv``, ``.tsv`` or ``.jsonl`` index file holds and the line each is named by
(a BOM, CRLF, blank lines, quoted line breaks, quotes, too many columns, bytes that are not UTF-8),
pinned before these files are read as Arrow columns (issue 32); and that a batch at a time and
record by record write the same bytes from the same text tables. Where today's rule is wrong the
test says the right one, marked xfail.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.shard import worker
from tests.text_tables import Built, build_table

# -- the shape of a CSV file: what a row is, and the line it is named by ---------------------------

SN = "  s: {kind: string}\n  n: {kind: int64}\n"
STARTS = "rows are named by their first line once CSV is read by Arrow"


def _seen(table: Built) -> tuple[list[tuple[bytes, bytes, int]], list[tuple[int, str]]]:
    """(source_id, s, n) of each record, and (line, reason) of each error."""
    records = [(r["source_id"], r["s"], int(r["n"])) for r in table.records]
    return records, [e[1:] for e in table.errors]


@pytest.mark.parametrize(("fmt", "header"), [("csv", "\ufeffs,n\r\n"), ("tsv", "\ufeffs\tn\r\n")])
def test_a_spreadsheet_export_with_a_bom_and_crlf_names_its_first_column(tmp_path: Path, fmt: str, header: str) -> None:
    sep = header[2]
    table = build_table(tmp_path, f"train.{fmt}", header + f"a{sep}1\r\nb{sep}2\r\n", SN)
    assert _seen(table) == ([(f"train.{fmt}:2".encode(), b"a", 1), (f"train.{fmt}:3".encode(), b"b", 2)], [])


def test_blank_and_whitespace_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", "s,n\n\na,1\n   \n\t\nb,2\n\nc,x\n", SN)
    assert _seen(table) == ([(b"train.csv:3", b"a", 1), (b"train.csv:6", b"b", 2)], [(8, "n: 'x' is not a valid int64")])


def test_a_line_break_in_a_quoted_field_is_kept_and_later_rows_keep_their_lines(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", 's,n\n"line1\nline2",1\nb,x\n"c\r\nd",2\nq,y\nr,5\n', SN)
    records, errors = _seen(table)
    assert [(s, n) for _, s, n in records] == [(b"line1\nline2", 1), (b"c\r\nd", 2), (b"r", 5)]  # a CRLF inside quotes too
    assert records[-1][0] == b"train.csv:8"
    assert errors == [(4, "n: 'x' is not a valid int64"), (7, "n: 'y' is not a valid int64")]


def test_a_bad_row_spanning_lines_is_named_by_its_first_line(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", 's,n\na,1\n"bad\nrow",x\nz,3\n', SN)
    assert _seen(table)[1] == [(3, "n: 'x' is not a valid int64")]  # today 4: where the row ends


def test_a_record_spanning_lines_is_named_by_its_first_line(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", 's,n\n"a\nb",1\n', SN)
    assert _seen(table)[0] == [(b"train.csv:2", b"a\nb", 1)]  # today train.csv:3, the source_id


def test_a_row_with_too_many_or_too_few_columns_is_a_bad_row(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", "s,n\na,1,2\nb\nc,3\n", SN)
    assert _seen(table) == ([(b"train.csv:4", b"c", 3)], [(2, "3 columns, but the header has 2"), (3, "1 columns, but the header has 2")])
    with pytest.raises(EntryError) as caught:
        build_table(tmp_path / "fail", "train.csv", "s,n\na,1,2\n", SN, on_error="fail")
    assert str(caught.value) == f"{tmp_path / 'fail' / 'train.csv'}:2: 3 columns, but the header has 2"


def test_quotes_inside_a_field_are_read_as_pythons_csv_reads_them(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", 'n,s\n1,ab"c\n2, "b"\n3,"x"y\n4,"b" \n5, "b,c"\n6,"a, b"\n', SN)
    records, errors = _seen(table)
    # A quote opens a quoted field only as its first character: after a space it is text (no skipinitialspace).
    assert [(n, s) for _, s, n in records] == [(1, b'ab"c'), (2, b'"b"'), (3, b"xy"), (4, b"b"), (6, b"a, b")]
    assert errors == [(6, "3 columns, but the header has 2")]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"s,n\r\ncaf\xe9,1\r\n", "not UTF-8 text (invalid continuation byte near byte 8)"),  # Excel's "CSV" (cp1252)
        (b"s,n\r\na,1\r\n\xff,2\r\n", "not UTF-8 text (invalid start byte near byte 10)"),
        (b"", "empty file: a header row is needed"),
        (b"\r\n\r\n", "empty file: a header row is needed"),
    ],
    ids=["cp1252", "later-line", "empty", "blank-lines"],
)
def test_a_file_that_is_not_utf8_text_or_is_empty_stops_the_build_even_with_skip(tmp_path: Path, data: bytes, expected: str) -> None:
    with pytest.raises(ShardkitError) as caught:
        build_table(tmp_path, "train.csv", data, SN)
    assert str(caught.value) == f"{tmp_path / 'train.csv'}: {expected}"


def test_bytes_that_are_not_utf8_past_the_first_8_kb_are_named_by_their_offset(tmp_path: Path) -> None:
    data = b"s,n\r\n" + b"abcdefghi,1\r\n" * 2000 + b"\xff,2\r\n"
    with pytest.raises(ShardkitError) as caught:
        build_table(tmp_path, "train.csv", data, SN)
    assert str(caught.value) == f"{tmp_path / 'train.csv'}: not UTF-8 text (invalid start byte near byte {len(data) - 5})"


@pytest.mark.parametrize("data", ["s,n\r\n", "s,n"])
def test_a_header_alone_is_zero_records(tmp_path: Path, data: str) -> None:
    table = build_table(tmp_path, "train.csv", data, SN)
    manifest = json.loads((table.out / "manifest.json").read_text())
    assert (manifest["totals"]["records"], manifest["splits"]["train"]["num_shards"], table.errors) == (0, 0, [])


ALL_EMPTY = "a row of empty fields is a row, not a blank line: today it is left out, with no error"


@pytest.mark.parametrize(
    ("rows", "features"),
    [
        ([["", ""]], "  a: {kind: string}\n  b: {kind: string}\n"),  # csv.writer: ",\r\n"
        ([[""]], "  a: {kind: string}\n"),  # csv.writer: '""\r\n', quoted to tell it from a blank line
    ],
    ids=["two-columns", "one-column"],
)
def test_a_row_of_empty_fields_is_a_record(tmp_path: Path, rows: list[list[str]], features: str) -> None:
    text = io.StringIO()
    csv.writer(text).writerows([["a", "b"][: len(rows[0])], *rows])
    table = build_table(tmp_path, "train.csv", text.getvalue(), features)
    assert [r["a"] for r in table.records] == [b""]


def test_jsonl_lines_keep_their_numbers_past_a_bom_crlf_and_blank_lines(tmp_path: Path) -> None:
    lines = '\ufeff{"s": "a", "n": 1}\r\n\r\n  \n{"s": "b", "n": "x"}\r\n[1]\n{bad\n{"s": "c", "n": 3}'
    table = build_table(tmp_path, "train.jsonl", lines, SN)
    assert _seen(table) == (
        [(b"train.jsonl:1", b"a", 1), (b"train.jsonl:7", b"c", 3)],
        [
            (4, "n: 'x' is not a valid int64"),
            (5, "expected a JSON object, got list"),
            (6, "not valid JSON: Expecting property name enclosed in double quotes at column 2"),
        ],
    )
    empty = build_table(tmp_path / "empty", "train.jsonl", "", SN)
    assert (empty.records, empty.errors) == ([], [])  # unlike an empty CSV: no header is needed


# -- a batch at a time (nothing augmented) and record by record write the same bytes -------------

EVERY_KIND = """\
  s: {kind: string}
  n: {kind: int64}
  x: {kind: float}
  c: {kind: class_name}
  i: {kind: class_id, classes: [a, b, c]}
"""
BELOW_A_TIE = "1.0000001788139343261718749999"  # float32 of float(): rounded twice, to the tie, then to even
MIXED = [  # s, n, x, c, i as text: each kind's quirks, and rows it refuses
    ["007", "007", "1e3", "007", "01"], [" 12 ", " 3 ", "nan", " 7 ", " 1 "], ["-0", "+5", "-Infinity", "7", "2"],
    ["1e3", "1_000", "3.4e38", "True", "0"], ["x", "1e3", "1", "a", "1"], ["y", "2", "3.5e38", "a", "1"],
    ["z", "3", "1", "", "1"], ["w", "4", "1", "a", "-1"], ["v", "9223372036854775807", BELOW_A_TIE, "NA", "1"],
    ["", "-0", "-0", "", "0"], ["u", "5", "", "b", "2"], ["t", "6", "-0", "b", "2"],
]  # fmt: skip
JSON_MIXED = [
    {"s": 1.0, "n": 1.0, "x": [1, 2.5], "c": 1.5, "i": 2}, {"s": True, "n": "007", "x": "nan", "c": " a ", "i": "1"},
    {"s": [True, "a"], "n": [1, 2], "x": [], "c": "b", "i": 0}, {"s": None, "n": 1, "x": 1, "c": "b", "i": 0},
    {"s": "q", "n": True, "x": 1, "c": "b", "i": 0}, {"s": "q", "n": 2**63, "x": 1, "c": "b", "i": 0},
    {"s": "q", "n": 1, "x": [[1]], "c": "b", "i": 0}, {"s": "q", "n": 1, "x": 1, "c": "b", "i": -1},
    {"s": "", "n": [], "x": -0.0, "c": "7", "i": 1},
]  # fmt: skip


def _mixed(fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(row) + "\n" for row in JSON_MIXED)
    text = io.StringIO()
    csv.writer(text, delimiter={"csv": ",", "tsv": "\t"}[fmt]).writerows([["s", "n", "x", "c", "i"], *MIXED])
    return text.getvalue()


def _written(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / "manifest.json").read_text())
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if ".tfrecord" in p.name or p.suffix in (".jsonl", ".txt")}
    return {"files": files, **{k: manifest[k] for k in ("schema", "classes", "splits", "totals", "errors")}}


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl"])
def test_batches_and_records_one_by_one_write_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    index = tmp_path / f"train.{fmt}"
    index.write_text(_mixed(fmt), newline="")
    (tmp_path / "c.yaml").write_text("features:\n" + EVERY_KIND)
    took: list[bool] = []

    def build(out: Path, batched: Callable[..., bool]) -> dict[str, Any]:
        with monkeypatch.context() as patch:
            patch.setattr(worker, "batched", lambda config, sources: took.append(batched(config, sources)) or took[-1])
            options: dict[str, Any] = {"workers": 1, "progress": False, "on_error": "skip", "records_per_shard": 3, "seed": 5}
            shardkit.build([index], out, config=str(tmp_path / "c.yaml"), **options)
        return _written(out)

    batched = build(tmp_path / "batched", worker.batched)
    assert took and all(took)  # the batch path, where nothing is augmented
    took.clear()
    one_by_one = build(tmp_path / "one-by-one", lambda config, sources: False)
    assert took and not any(took)
    assert batched == one_by_one
    assert batched["totals"]["records"] >= 4 and batched["errors"]["skipped"] >= 4
