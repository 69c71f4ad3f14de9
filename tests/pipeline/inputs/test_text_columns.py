"""CSV, TSV and .txt read as Arrow columns mean what the line-by-line reader makes of them.

Both readers stay in the code: ``read_rows`` (Python's ``csv`` module, ``str.split``) serves a
config inferred from the first row and every block the column reader cannot vouch for. Random
files of awkward rows (quoted line breaks, doubled quotes, quotes inside fields, blank and white
space lines, wrong widths, a BOM, CRLF, characters beyond ASCII), read whole and cut into pieces
and blocks of a few bytes, give the same rows, values, line numbers and errors both ways.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from shardkit.errors import ShardkitError
from shardkit.pipeline.inputs.formats import csv_columns, txt
from shardkit.pipeline.inputs.formats.delimited import CSV, TSV
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.pipeline.inputs.formats.txt import TXT

Read = tuple[list[tuple[int, tuple[str, ...]]], list[tuple[int, str]]]

CSV_WORDS = ["a", "b", "1", "  x ", '"q,w"', '"l1\nl2"', '"l1\r\nl2"', '""', '"a""b"', "", " ", "\xa0z\xa0", "é", 'ab"c', ' "b"', '"x"y']
TXT_WORDS = ["a", "img/x.png", "1", "#c", "é", "\u00a0", "\x1c", "b#", "0", "\x0b"]


def _line_by_line(fmt: InputFormat, path: Path) -> Read:
    rows, errors = [], []
    for row in fmt.read_rows(Piece(str(path))):
        if isinstance(row, Row):
            rows.append((row.line, tuple(row.values)))
        else:
            errors.append((row.line, row.reason))
    return sorted(rows), sorted(errors)


def _as_columns(fmt: InputFormat, pieces: list[Piece]) -> Read:
    rows, errors = [], []
    for piece in pieces:
        for batch in fmt.read_tables(piece, None):
            values = [column.to_pylist() for column in batch.columns.values()]
            rows += [(line, tuple(v[i] for v in values)) for i, line in enumerate(batch.numbers().tolist())]
            errors += [(e.line, e.reason) for e in batch.errors]
    return sorted(rows), sorted(errors)


def _csv_text(rng: random.Random, sep: str) -> str:
    width = rng.randint(1, 3)
    lines = [sep.join(f"h{i}" for i in range(width))]
    for _ in range(rng.randint(0, 12)):
        r = rng.random()
        if r < 0.1:
            lines.append("")
        elif r < 0.15:
            lines.append(sep.join([" "] * width))
        else:
            n = width if rng.random() < 0.9 else max(1, width + rng.choice([-1, 1]))
            lines.append(sep.join(rng.choice(CSV_WORDS) for _ in range(n)))
    return _ended(rng, lines)


def _txt_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 15)):
        words = [rng.choice(TXT_WORDS) for _ in range(rng.randint(0, 4))]
        lines.append(rng.choice(["", " ", "\t"]) + rng.choice([" ", "  ", "\t", " \t "]).join(words) + rng.choice(["", " "]))
    return _ended(rng, lines)


def _ended(rng: random.Random, lines: list[str]) -> str:
    eol = rng.choice(["\n", "\r\n"])
    text = eol.join(lines) + (eol if rng.random() < 0.7 else "")
    return ("\ufeff" if rng.random() < 0.15 else "") + text


@pytest.mark.parametrize("seed", range(4))
def test_csv_and_tsv_columns_are_the_rows_pythons_csv_module_reads(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for case in range(150):
        fmt, sep = rng.choice([(CSV, ","), (TSV, "\t")])
        path = tmp_path / f"{case}.{fmt.name}"
        path.write_bytes(_csv_text(rng, sep).encode())
        expected = _line_by_line(fmt, path)
        for block, piece_bytes in ((7, 16), (64, 1 << 20), (1 << 20, 1 << 20)):
            monkeypatch.setattr(csv_columns, "BLOCK_BYTES", block)
            assert _as_columns(fmt, fmt.cut(str(path), piece_bytes)) == expected, (block, path.read_bytes())


@pytest.mark.parametrize("seed", range(4))
def test_txt_columns_are_the_lines_str_split_reads(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for case in range(150):
        path = tmp_path / f"{case}.txt"
        path.write_bytes(_txt_text(rng).encode())
        expected = _line_by_line(TXT, path)
        for block, piece_bytes in ((8, 16), (64, 1 << 20), (1 << 20, 1 << 20)):
            monkeypatch.setattr(txt, "BLOCK_BYTES", block)
            assert _as_columns(TXT, TXT.cut(str(path), piece_bytes)) == expected, (block, path.read_bytes())


def test_the_columns_of_a_clean_file_come_from_arrow_not_the_line_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is the one taken where nothing calls for the other (else the tests above
    would compare the line reader with itself)."""
    (tmp_path / "t.csv").write_text('a,b\r\n1,"x, y"\r\n2,"two\r\nlines"\r\n\r\n3,z\r\n')
    (tmp_path / "t.txt").write_text("# images\nimg/a.png 1\n\n  img/b.png\t2\n")

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("read line by line")

    monkeypatch.setattr(csv_columns, "_python", refused)
    monkeypatch.setattr(TXT.__class__, "_python_block", refused)
    assert _as_columns(CSV, [Piece(str(tmp_path / "t.csv"))]) == ([(2, ("1", "x, y")), (3, ("2", "two\r\nlines")), (6, ("3", "z"))], [])
    assert _as_columns(TXT, [Piece(str(tmp_path / "t.txt"))]) == ([(2, ("img/a.png", "1")), (4, ("img/b.png", "2"))], [])


@pytest.mark.parametrize("suffix", ["csv", "txt"])
def test_bytes_that_are_not_utf8_deep_in_a_file_are_named_by_their_offset(tmp_path: Path, suffix: str) -> None:
    """Past the first block and the decoder's chunks: the byte's offset in the file."""
    head = b"s,n\r\n" + b"abcdefghi,1\r\n" * 8000 if suffix == "csv" else b"abcdefghi 1\r\n" * 8000
    path = tmp_path / f"train.{suffix}"
    path.write_bytes(head + b"\xff,2\r\n" + b"x,3\r\n" * 10 if suffix == "csv" else head + b"\xff 2\r\n")
    fmt = CSV if suffix == "csv" else TXT
    with pytest.raises(ShardkitError) as caught:
        _as_columns(fmt, [Piece(str(path))])
    assert str(caught.value) == f"{path}: not UTF-8 text (invalid start byte near byte {len(head)})"
