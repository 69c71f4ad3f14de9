"""Hostile Label Studio exports, made the way an attacker or a careless tool makes them: nesting and
strings past ``bounded_json``'s limits, an export cut short, image paths that leave the dataset
or name a cloud's metadata server, tasks that are not tasks. Each ends in the right records, or
one line naming the file and where; no input byte changes. The command runs under a memory limit
(``tests/hostile.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats import bounded_json
from tests.detection_sets import photo
from tests.hostile import digests, one_line_error, run_cli
from tests.labelling_sets import ls_annotation, ls_rectangle, ls_task, write_label_studio

SIZE = (32, 24)


def _export(root: Path, images: list[str], result: list[dict[str, Any]] | None = None) -> Path:
    """An export of one task an image, each with one box; ``1a2b-ok.jpg`` written beside it."""
    root.mkdir(parents=True, exist_ok=True)
    photo(root / "1a2b-ok.jpg", *SIZE, 0)
    regions = result if result is not None else [ls_rectangle("r1", "car", 10, 10, 50, 50, SIZE)]
    tasks = [ls_task(i, image, [ls_annotation(i, i, regions, "2024-05-01")]) for i, image in enumerate(images, start=1)]
    return write_label_studio(root / "project-3-at-2024-05-01-10-00-8f3a2b1c.json", tasks)


@pytest.mark.slow  # the shardkit command, under a memory limit
def test_nesting_past_the_limit_is_one_line_at_its_place(tmp_path: Path) -> None:
    export = _export(tmp_path / "ls", ["/data/upload/3/1a2b-ok.jpg"])
    text = export.read_text().replace('"origin": "manual"', '"origin": ' + "[" * 100_000 + "]" * 100_000, 1)
    export.write_text(text)
    before = digests(tmp_path / "ls")
    start = text.index("[" * 50)
    before_run = text[:start]
    outer = before_run.count("[") + before_run.count("{") - before_run.count("]") - before_run.count("}")  # no string holds one
    line_number = before_run.count("\n") + 1
    column = start + bounded_json.MAX_DEPTH - outer - before_run.rindex("\n")  # the bracket one level too deep, 1-based
    result = run_cli(["build", export, "-o", tmp_path / "out", "-q"], tmp_path)
    assert one_line_error(result) == f"Error: {export}:{line_number}:{column}: {bounded_json.too_deep()}"
    assert digests(tmp_path / "ls") == before


def test_a_string_past_the_limit_is_one_line(tmp_path: Path) -> None:
    export = _export(tmp_path / "ls", ["/data/upload/3/1a2b-ok.jpg"])
    export.write_text(export.read_text().replace('"origin": "manual"', '"origin": "' + "n" * (bounded_json.MAX_STRING + 1) + '"', 1))
    with pytest.raises(ShardkitError, match=rf"^{export}:\d+:\d+: a string longer than 16 MiB"):
        shardkit.build([export], tmp_path / "out", workers=1, progress=False)


def test_an_export_cut_short_is_one_line_with_its_line_and_column(tmp_path: Path) -> None:
    export = _export(tmp_path / "ls", ["/data/upload/3/1a2b-ok.jpg"] * 3)
    text = export.read_text()
    export.write_text(text[: len(text) // 2])
    with pytest.raises(ShardkitError, match=rf"^{export}:\d+:\d+: not valid JSON: it ends before its last value does \(cut short\?\)$"):
        shardkit.build([export], tmp_path / "out", workers=1, progress=False, on_error="skip")


@pytest.mark.slow  # the shardkit command, under a memory limit
def test_a_local_files_path_out_of_the_dataset_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.jpg"
    photo(secret, *SIZE, 1)
    export = _export(tmp_path / "ls", ["/data/upload/3/1a2b-ok.jpg", "/data/local-files/?d=../secret.jpg"])
    before = digests(tmp_path / "ls", secret)
    result = run_cli(["build", export, "-o", tmp_path / "out", "-q"], tmp_path)
    root = tmp_path / "ls"
    refused = f"{secret} is outside the dataset's root {root}: refused (pass --allow-outside-root to read it)"
    assert one_line_error(result) == f"Error: {export}: /data/local-files/?d=../secret.jpg: image/encoded: {refused}"
    assert digests(tmp_path / "ls", secret) == before
    allowed = shardkit.build([export], tmp_path / "allowed", workers=1, progress=False, allow_outside_root=True)
    assert allowed.records == 2


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        ("http://169.254.169.254/latest/meta-data/iam/security-credentials/", "http:// URLs are not read unless allowed"),
        ("s3://bucket/images/a.jpg", "is outside the dataset's root"),
        ("/data/upload/3/../../../../etc/hostname", "hostname: file not found"),  # the file name alone, in the root
    ],
)
def test_urls_and_upload_paths_stay_where_the_rule_says(tmp_path: Path, image: str, refused: str) -> None:
    export = _export(tmp_path / "ls", [image])
    with pytest.raises(EntryError) as error:
        shardkit.build([export], tmp_path / "out", workers=1, progress=False)
    assert str(error.value).startswith(f"{export}: ") and refused in str(error.value)


_A = "tasks[1] (id 1, a.jpg)"


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        ("a string", "tasks[1]: expected a task (an object), got a string"),
        ({"id": 1, "data": {"image": 7}, "annotations": []},
         "tasks[1] (id 1): data has no image (expected data.image, or one string in data)"),
        ({"id": 1, "data": {"image": "a.jpg"}, "annotations": {}}, f"{_A}: annotations: expected a list of annotations (objects)"),
        ({"id": 1, "data": {"image": "a.jpg"}, "annotations": [{"result": "x"}]},
         f"{_A}: result: expected a list of regions, got a string"),
        ({"id": 1, "data": {"image": "a.jpg"}, "annotations": [{"result": [{"type": ["rectanglelabels"]}]}]},
         f"{_A}: result[0]: ['rectanglelabels'] regions are not read (rectanglelabels and polygonlabels are)"),
    ],
)  # fmt: skip
def test_a_task_that_is_not_one_is_an_entry_error_naming_its_place(tmp_path: Path, task: Any, reason: str) -> None:
    export = tmp_path / "train.json"
    export.write_text(json.dumps([{"id": 2, "data": {"image": "a.jpg"}, "annotations": []}, task]))
    photo(tmp_path / "a.jpg", *SIZE, 0)
    with pytest.raises(EntryError) as error:
        shardkit.build([export], tmp_path / "out", workers=1, progress=False)
    assert str(error.value) == f"{export}: {reason}"
    result = shardkit.build([export], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (1, 1)
