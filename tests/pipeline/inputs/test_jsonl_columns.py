"""``.jsonl`` read as Arrow columns a block at a time writes what reading it line by line with
``json.loads`` writes: random files of clean rows with every quirk a JSON line can have mixed in
(numbers of another JSON type, nulls, missing and repeated keys, lists, blank and bad lines, CRLF,
a lone CR, deep nesting, long digit runs), built through both paths, byte for byte, errors.jsonl
too; and the fast path is taken where the rows are clean."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats import json_columns
from shardkit.pipeline.plan import planner, staged_rows
from shardkit.pipeline.shard import worker
from tests.tfread import read_each

FEATURES = """\
features:
  s: {kind: string}
  n: {kind: int64}
  x: {kind: float}
  c: {kind: class_name}
  i: {kind: class_id, classes: [a, b, c]}
"""
QUIRKS: dict[str, list[Any]] = {
    "s": [1, 1.0, True, None, ["a"], " pad ", "é\u2028", "\U0001f600", "", "007", 12345678901234567890],
    "n": [1.0, True, "5", " 7 ", 2**63, -(2**63) - 1, 2**63 - 1, 1e3, [1, 2], None, -0.0, "x", 1.5],
    "x": [7, "nan", float("nan"), float("inf"), 1e39, True, [1.5], 123456789012345678901234567890, -0.0, 3.5e38, "1e3", None, 2**63],
    "c": [1, 1.0, "", None, " cat ", True, ["a"]],
    "i": ["1", 3, -1, 1.0, True, None, " 2 ", "²"],
}
RAW_LINES = [
    "",
    "  \t ",
    "{bad",
    "[1]",
    "1",
    '"text"',
    "{} {}",
    "{}",
    "\u3000",
    "\x0c",
    "null",
]


def _clean(rng: random.Random) -> dict[str, Any]:
    return {
        "s": rng.choice(["a", "bb", "ccc d", "é", "\\", '"q"', "tab\there"]) + str(rng.randrange(1000)),
        "n": rng.choice([rng.randrange(-10, 10), rng.randrange(-(2**63), 2**63)]),
        "x": rng.choice(
            [rng.uniform(-1e6, 1e6), rng.gauss(0, 1), float(rng.randrange(100)), rng.uniform(-1, 1) * 10.0 ** rng.randrange(-40, 39)]
        ),
        "c": rng.choice(["cat", "dog", "7", "007"]),
        "i": rng.randrange(3),
    }


def _line(rng: random.Random, rate: float) -> str:
    row: dict[str, Any] = _clean(rng)
    if rng.random() < rate / 3:
        row["extra"] = rng.choice([{"q": [1, {"r": None}]}, [1, "x", None], "e", None])
    if rng.random() < rate / 3:
        row = dict(rng.sample(list(row.items()), len(row)))  # keys in another order
    if rng.random() >= rate:
        return json.dumps(row)
    quirk = rng.randrange(9)
    if quirk < 4:
        key = rng.choice(list(QUIRKS))
        row[key] = rng.choice(QUIRKS[key])
        return json.dumps(row, ensure_ascii=rng.random() < 0.5)
    if quirk == 4:
        del row[rng.choice(list(row))]
        return json.dumps(row)
    if quirk == 5:
        return rng.choice(RAW_LINES)
    if quirk == 6:  # a key twice; an object split over two lines; two objects on one line; white space around one
        text = json.dumps(row)
        half = len(text) // 2
        return rng.choice([text[:-1] + ', "n": 1}', text[:half] + "\n" + text[half:], text + " " + text, f"  {text}\t", f"\x0c{text}"])
    if quirk == 7:  # nested past bounded_json.MAX_DEPTH; a number of more digits than int() reads
        row[rng.choice(["extra", "s"])] = rng.choice(["DEEP", "DIGITS", "SURROGATE"])
        text = json.dumps(row).replace('"DEEP"', "[" * 120 + "]" * 120).replace('"DIGITS"', "9" * 5000)
        return text.replace('"SURROGATE"', '"\\ud800"')  # a lone surrogate, escaped: Python reads it, Arrow does not
    return json.dumps(row).replace('"x": ', '"x": NaN, "y": ' if rng.random() < 0.5 else '"x": -Infinity, "y": ')


def _text(seed: int, rows: int, rate: float) -> bytes:
    """``rows`` lines, each with a quirk at ``rate`` (and where the rate is high, some lines ending in a lone CR)."""
    rng = random.Random(seed)
    ends = ["\n"] * 20 + ["\r\n"] * 5 + ["\r"] * int(rate * 25)
    text = "\ufeff" if rng.random() < 0.5 else ""
    text += "".join(_line(rng, rate) + rng.choice(ends) for _ in range(rows))
    return text.encode("utf-8", "surrogatepass")[: -1 if rng.random() < 0.3 else None]  # maybe no last line end


def _built(
    tmp_path: Path, name: str, data: bytes, monkeypatch: pytest.MonkeyPatch, how: str, block: int = 512, **options: Any
) -> dict[str, Any]:
    """The output of a build of ``data``: its shards' bytes, errors.jsonl and manifest. ``how``:
    "columns" (as shipped, in blocks of 512 bytes: a few lines, most of them clean), "rows" (every block read line by line, as before
    Arrow read .jsonl), or "records" (columns, encoded record by record)."""
    root = tmp_path  # one input for every build: errors.jsonl names it
    (root / "train.jsonl").write_bytes(data)
    (root / "c.yaml").write_text(FEATURES)
    with monkeypatch.context() as patch:
        patch.setattr(json_columns, "BLOCK_BYTES", block)
        if how == "rows":
            patch.setattr(json_columns, "_columns", lambda *args: None)
        if how == "records":
            patch.setattr(worker, "batched", lambda config, sources: False)
        settings: dict[str, Any] = {"workers": 1, "progress": False, "on_error": "skip", "records_per_shard": 40, "seed": 3, **options}
        shardkit.build([root / "train.jsonl"], root / name, config=str(root / "c.yaml"), **settings)
    out = root / name
    manifest = json.loads((out / "manifest.json").read_text())
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if ".tfrecord" in p.name or p.suffix == ".jsonl"}
    return {"files": files, **{k: manifest[k] for k in ("schema", "classes", "splits", "totals", "errors")}}


@pytest.mark.parametrize(("seed", "rate"), [(1, 0.02), (2, 0.05), (3, 0.2), (4, 0.6)])
def test_columns_and_lines_read_one_by_one_write_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, rate: float
) -> None:
    data = _text(seed, 800, rate)
    clean = []
    parsed = json_columns._columns
    monkeypatch.setattr(json_columns, "_columns", lambda *args: clean.append(parsed(*args) is not None) or parsed(*args))
    columns = _built(tmp_path, "columns", data, monkeypatch, "columns")
    rows = _built(tmp_path, "rows", data, monkeypatch, "rows")
    assert columns == rows
    assert columns == _built(tmp_path, "records", data, monkeypatch, "records")
    assert any(clean)  # some blocks were read as columns
    assert rows["errors"]["skipped"] > 0 and rows["totals"]["records"] > 300


def test_a_clean_file_is_read_as_columns_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _text(5, 400, 0.0)
    payloads = []
    monkeypatch.setattr(worker.BatchMaker, "_entry_blocks", lambda *args: payloads.append(1) or iter(()))
    built = _built(tmp_path, "clean", data, monkeypatch, "columns", shuffle=False)
    assert not payloads  # every row read back from the staged columns
    assert built["totals"]["records"] == 400
    records = read_each(str(tmp_path / "clean"), "train")
    expected = [json.loads(line) for line in data.decode("utf-8-sig").splitlines()]
    assert [r["s"].decode() for r in records] == [e["s"] for e in expected]
    assert [int(r["n"]) for r in records] == [e["n"] for e in expected]


@pytest.mark.parametrize("seed", [6, 7])
def test_with_on_error_fail_both_paths_stop_at_the_same_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    data = _text(seed, 300, 0.02)
    stopped = []
    for how in ("columns", "rows"):
        with pytest.raises(EntryError) as caught:
            _built(tmp_path, how, data, monkeypatch, how, on_error="fail")
        stopped.append(str(caught.value).split("/")[-1])
    assert stopped[0] == stopped[1]


def test_two_objects_on_a_line_and_one_over_two_lines_are_bad_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [json.dumps({"s": s, "n": 1, "x": 0.5, "c": "cat", "i": 1}) for s in "abc"]
    cut = rows[2].index(', "x"') + 1
    text = f"{rows[0]}\n{rows[0]} {rows[1]}\n{rows[2][:cut]}\n{rows[2][cut:]}\n{rows[1]}\n"  # Arrow finds as many objects as lines
    columns = _built(tmp_path, "columns", text.encode(), monkeypatch, "columns")
    assert columns == _built(tmp_path, "rows", text.encode(), monkeypatch, "rows")
    assert (columns["totals"]["records"], columns["errors"]["skipped"]) == (2, 3)


def test_pieces_planned_side_by_side_write_what_one_pass_line_by_line_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _text(8, 800, 0.1)
    monkeypatch.setattr(planner, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(planner, "PIECE_BYTES", (8192, 8192))  # pieces of about 50 lines, planned in a pool
    spool_pieces, parts = planner._spool_pieces, []
    monkeypatch.setattr(planner, "_spool_pieces", lambda *args: parts.append(spool_pieces(*args)) or parts[-1])
    columns = _built(tmp_path, "columns", data, monkeypatch, "columns", workers=2)
    assert len(parts[0]) >= 10
    assert columns == _built(tmp_path, "rows", data, monkeypatch, "rows")


@pytest.mark.parametrize("how", ["columns", "rows"])
def test_bytes_that_are_not_utf8_are_named_by_their_offset_in_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    rows = [json.dumps({"s": f"r{i}", "n": i, "x": 0.5, "c": "cat", "i": 1}).encode() for i in range(2000)]
    rows[1500] = rows[1500].replace(b'"r1500"', b'"r\xe9"')  # cp1252's é, past the decoder's first chunks
    data = b"\n".join(rows) + b"\n"
    where = data.index(b"\xe9")
    with pytest.raises(ShardkitError) as caught:
        _built(tmp_path, how, data, monkeypatch, how, block=1 << 20)  # one block: read whole, line by line
    assert str(caught.value) == f"{tmp_path / 'train.jsonl'}: not UTF-8 text (invalid continuation byte near byte {where})"


def test_rows_are_read_again_from_the_file_where_the_staged_rows_cannot_be(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _text(9, 400, 0.1)
    expected = _built(tmp_path, "staged", data, monkeypatch, "columns")
    monkeypatch.setattr(staged_rows, "taken", lambda *args: None)  # a copy a power cut left unfinished
    assert _built(tmp_path, "batches", data, monkeypatch, "columns") == expected
    assert _built(tmp_path, "records", data, monkeypatch, "records") == expected
