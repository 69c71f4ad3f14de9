"""A hostile ``.jsonl`` index line, nested without end: an entry error naming its line (which
``--on-error skip`` lists), not a RecursionError traceback (``shardkit`` under a memory limit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # each case runs the shardkit command


def test_a_line_nested_past_the_limit_is_an_entry_error(tmp_path: Path) -> None:
    Image.new("RGB", (8, 6)).save(tmp_path / "a.jpg")
    deep = "[" * 50_000 + "]" * 50_000
    (tmp_path / "train.jsonl").write_text(f'{{"image": "a.jpg"}}\n{{"image": "a.jpg", "x": {deep}}}\n')
    inputs = (tmp_path / "a.jpg", tmp_path / "train.jsonl")
    before = digests(*inputs)
    line = one_line_error(run_cli(["build", "train.jsonl", "-o", "out", "-q"], cwd=tmp_path))
    assert line == f"Error: train.jsonl:2: not an index line: arrays and objects nested more than 100 deep {REASON}"
    skipped = run_cli(["build", "train.jsonl", "-o", "skipped", "-q", "--on-error", "skip"], cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    (listed,) = [json.loads(x) for x in (tmp_path / "skipped" / "errors.jsonl").read_text().splitlines()]
    assert listed["line"] == 2
    assert digests(*inputs) == before


REASON = "(files tools write nest a few levels: this one is broken or hostile)"
