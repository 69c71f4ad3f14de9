"""Hostile LabelMe folders, made the way an attacker or a careless tool makes them: nesting and
strings past ``bounded_json``'s limits, files that do not parse, an ``imagePath`` or a JSON link
leading out of the dataset, a FIFO named ``.json``; and the legitimate large case, an embedded
``imageData`` larger than the string limit. Each ends in the right records, or one line naming
the file and where; no input byte changes. The command runs under a memory limit
(``tests/hostile.py``)."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import EntryError
from shardkit.pipeline.inputs.formats import bounded_json
from tests.hostile import digests, one_line_error, run_cli
from tests.labelling_sets import lm_shape, write_labelme

SIZE = (32, 24)
BOX = [lm_shape("cat", [[1, 1], [9, 9]], "rectangle")]


def _folder(root: Path) -> Path:
    write_labelme(root, "a.jpg", SIZE, BOX, 0)
    write_labelme(root, "b.jpg", SIZE, [], 1)
    return root


@pytest.mark.slow  # the shardkit command, under a memory limit
def test_nesting_past_the_limit_is_one_line_naming_the_file_and_its_place(tmp_path: Path) -> None:
    root = _folder(tmp_path / "lm")
    text = (root / "a.json").read_text().replace('"flags": {}', '"flags": ' + "[" * 100_000 + "]" * 100_000, 1)
    (root / "a.json").write_text(text)
    before = digests(root)
    start = text.index("[" * 50)
    column = start - text.rindex("\n", 0, start) + bounded_json.MAX_DEPTH - 1  # inside the document alone
    result = run_cli(["build", root, "-o", tmp_path / "out", "-q"], tmp_path)
    line = text[:start].count("\n") + 1
    assert one_line_error(result) == f"Error: {root / 'a.json'}:{line}: {bounded_json.too_deep()} (column {column})"
    skipped = run_cli(["build", root, "-o", tmp_path / "skip", "-q", "--on-error", "skip"], tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads((tmp_path / "skip" / "manifest.json").read_text())["splits"]["train"]["records"] == 1
    assert digests(root) == before


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"version": "5.5.0", "shapes": [', "1: not valid JSON: Expecting value (column 33)"),
        ('{"version": "5.5.0", "shapes": "none"}', "not a LabelMe file: expected an object with a shapes list"),
        (b'{"version": "5.5.0", "shapes": [], "imagePath": "\xff.jpg"}', "1: not UTF-8 text"),
        ('{"shapes": [{"label": "' + "n" * (bounded_json.MAX_STRING + 1) + '"}]}', f"1: {bounded_json.too_long()} (column 23)"),
        ('{"shapes": [{"label": "cat", "points": [[1, 1], [NaN, 9]], "shape_type": "rectangle"}], "imagePath": "a.jpg"}',
         "not valid JSON: NaN (JSON has no NaN or Infinity)"),
        ('{"shapes": [{"label": "cat", "points": [[1, 1], [true, 9]], "shape_type": "rectangle"}], "imagePath": "a.jpg"}',
         "shapes[0] (cat): points: expected a list of points [x, y]"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_labelme_is_an_entry_error_naming_it(tmp_path: Path, text: str | bytes, reason: str) -> None:
    root = _folder(tmp_path / "lm")
    bad = root / "c.json"
    bad.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(EntryError) as refused:
        shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == (f"{bad}:{reason}" if reason[0].isdigit() else f"{bad}: {reason}")  # a line number, or none
    result = shardkit.build([root], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (2, 1)


def test_an_image_path_out_of_the_dataset_is_refused(tmp_path: Path) -> None:
    root = _folder(tmp_path / "lm")
    write_labelme(tmp_path, "secret.jpg", SIZE, [], 2)
    write_labelme(root, "c.jpg", SIZE, BOX, 3, image_path="../secret.jpg")
    with pytest.raises(EntryError) as refused:
        shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    secret = tmp_path / "secret.jpg"
    refusal = f"{secret} is outside the dataset's root {root}: refused (pass --allow-outside-root to read it)"
    assert str(refused.value) == f"{root}: lm/c.json: image/encoded: {refusal}"  # no line: the file names itself


def test_a_json_file_linked_from_out_of_the_dataset_is_refused_unread(tmp_path: Path) -> None:
    root = _folder(tmp_path / "lm")
    outside = write_labelme(tmp_path / "elsewhere", "z.jpg", SIZE, BOX, 4)
    (root / "c.json").symlink_to(outside)
    with pytest.raises(EntryError) as refused:
        shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == (
        f"{root / 'c.json'}: {root / 'c.json'} (a link to {outside}) is outside the dataset's root {root}: "
        "refused (pass --allow-outside-root to read it)"
    )


def test_a_fifo_named_json_is_an_entry_error_not_a_wait(tmp_path: Path) -> None:
    root = _folder(tmp_path / "lm")
    os.mkfifo(root / "c.json")
    started = time.monotonic()
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (2, 1) and time.monotonic() - started < 30
    [listed] = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert (listed["source"], listed["reason"]) == (str(root / "c.json"), "not a file")


def test_an_embedded_image_past_the_string_limit_is_a_legitimate_file(tmp_path: Path) -> None:
    """LabelMe embeds the image by default: a large photo's base64 is longer than the string limit."""
    root = _folder(tmp_path / "lm")
    path = root / "a.json"
    document = json.loads(path.read_text())
    document["imageData"] = base64.b64encode(os.urandom(bounded_json.MAX_STRING)).decode()  # 21 MiB of base64
    path.write_text(json.dumps(document, indent=2))
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert (result.records, result.skipped) == (2, 0)
