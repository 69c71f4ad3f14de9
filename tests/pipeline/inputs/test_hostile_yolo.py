"""YOLO datasets as careless tools and hand edits leave them: image lists naming ``.jfif`` files
(a browser's JPEG), files with no suffix, missing images and text files; a ``data.yaml`` that does
not parse; ``names`` keyed by strings. An entry of a list the user wrote is built or is one entry
error naming the list and its line; a bad ``data.yaml`` is one line naming its line and column."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import ShardkitError
from shardkit.reader import ShardReader
from tests.detection_sets import photo
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # the shardkit command in child processes, a few seconds a test


def _dataset(root: Path, listed: str, names: str = "[cat, dog]") -> Path:
    """``root/data.yaml`` whose train split is the list ``train.txt`` holding ``listed``; images
    ``a.jpg``, ``b.jfif`` (JPEG), ``c`` (a PNG with no suffix) and ``notes.txt`` in ``images/train``."""
    images = root / "images" / "train"
    images.mkdir(parents=True)
    (root / "labels" / "train").mkdir(parents=True)
    photo(images / "a.jpg", 16, 12, 0)
    photo(images / "b.jfif.jpg", 20, 12, 1)
    (images / "b.jfif.jpg").rename(images / "b.jfif")
    photo(images / "c.png", 24, 12, 2)
    (images / "c.png").rename(images / "c")
    (images / "notes.txt").write_text("taken on a sunny day\n")
    (root / "labels" / "train" / "b.txt").write_text("1 0.5 0.5 0.5 0.5\n")
    (root / "train.txt").write_text(listed)
    (root / "data.yaml").write_text(f"train: train.txt\nnames: {names}\n")
    return root / "data.yaml"


def test_a_listed_jfif_and_a_listed_file_with_no_suffix_are_built(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "set", "images/train/a.jpg\nimages/train/b.jfif\nimages/train/c\n")
    result = shardkit.build([data], tmp_path / "out", workers=1, progress=False)
    assert (result.records, result.skipped) == (3, 0)
    built = {r["image/filename"]: r for r in ShardReader(str(tmp_path / "out"), "train")}
    assert sorted(built) == ["a.jpg", "b.jfif", "c"]
    assert list(built["b.jfif"]["image/object/class/text"]) == [b"dog"]
    assert built["c"]["image/encoded"][:8] == b"\x89PNG\r\n\x1a\n"  # stored as it is: TensorFlow reads PNG


def test_a_missing_or_non_image_list_entry_names_the_list_and_its_line(tmp_path: Path) -> None:
    root = tmp_path / "set"
    data = _dataset(root, "images/train/a.jpg\n\nimages/train/c\nimages/train/gone.jpg\nimages/train/notes.txt\n")
    before = digests(root)
    failed = run_cli(["build", data, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert one_line_error(failed) == f"Error: {root}/train.txt:4: {root}/images/train/gone.jpg: no such image file"
    skipped = run_cli(["build", data, "-o", tmp_path / "out", "-w", "1", "--on-error", "skip"], tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    listed = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert [(e["source"], e["line"], e["reason"]) for e in listed] == [
        (f"{root}/train.txt", 4, f"{root}/images/train/gone.jpg: no such image file"),
        (
            f"{root}/train.txt",
            5,
            f"{root}/images/train/notes.txt: not an image (no image suffix, and Pillow does not know its content): "
            "a list names images only",
        ),
    ]
    assert sorted(r["image/filename"] for r in ShardReader(str(tmp_path / "out"), "train")) == ["a.jpg", "c"]
    assert digests(root) == before


def test_a_jfif_in_a_split_folder_is_built(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "set", "")
    data.write_text("train: images/train\nnames: [cat, dog]\n")  # walked: images by suffix, notes.txt and c are not
    result = shardkit.build([data], tmp_path / "out", workers=1, progress=False)
    assert sorted(r["image/filename"] for r in ShardReader(str(tmp_path / "out"), "train")) == ["a.jpg", "b.jfif"]
    assert result.skipped == 0


@pytest.mark.parametrize("given", ["file", "folder"])
def test_a_data_yaml_that_does_not_parse_is_one_line_with_its_line_column_and_reason(tmp_path: Path, given: str) -> None:
    data = _dataset(tmp_path / "set", "images/train/a.jpg\n")
    data.write_text("train: train.txt\nnames: [cat, dog\nnc: 2\n")  # a bracket left open by hand
    failed = run_cli(["build", data if given == "file" else data.parent, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert one_line_error(failed) == f"Error: {data}:3:3: not valid YAML: expected ',' or ']', but got ':'"


def test_a_dataset_yaml_under_another_name_that_does_not_parse_is_one_line(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "set", "images/train/a.jpg\n")
    broken = data.with_name("coco8.yaml")
    broken.write_text("path: .\ntrain: train.txt\nnames:\n  0: cat\n 1: dog\n")  # indented one space short
    assert one_line_error(run_cli(["build", broken, "-o", tmp_path / "out"], tmp_path)).startswith(f"Error: {broken}:5:2: not valid YAML: ")
    data.write_bytes(b"train: train.txt\nnames: [caf\xe9]\n")  # Latin-1, as an old editor saves it
    assert (
        one_line_error(run_cli(["build", data, "-o", tmp_path / "out"], tmp_path))
        == f"Error: {data}:2: not UTF-8 text (byte 0xe9): save it as UTF-8"
    )


def test_names_keyed_by_strings_of_integers_are_read_as_ultralytics_reads_them(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "set", "images/train/b.jfif\n", names="{'1': dog, '0': cat}")
    result = shardkit.build([data], tmp_path / "out", workers=1, progress=False)
    assert result.manifest is not None and result.manifest.classes == {"image/object": ("cat", "dog")}
    data.write_text("train: train.txt\nnames: {cat: 0, dog: 1}\n")  # keys and values swapped
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([data], tmp_path / "bad", workers=1, progress=False)
    assert str(refused.value) == f"{data}: names: the key 'cat' is not a class index: the keys are YOLO's classes, 0 to 1"


def test_an_image_whose_name_is_not_utf8_in_a_split_folder_is_one_line_naming_it(tmp_path: Path) -> None:
    """A name's bytes that are not UTF-8 (an archive made on an old Windows) reach a record's text
    features as lone surrogates: one line naming the file, where it was a traceback."""
    root = tmp_path / "set"
    (root / "images" / "train").mkdir(parents=True)
    photo(root / "images" / "train" / "a.jpg", 16, 12, 0)
    photo(Path(os.fsdecode(bytes(root / "images" / "train") + b"/caf\xe9.jpg")), 16, 12, 1)
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nnames: [cat]\n")
    before = digests(root)
    line = one_line_error(run_cli(["build", root, "-o", tmp_path / "out"], tmp_path))
    # no line: data.yaml's line 2 is "train: ...", not the folder's second image
    assert line.startswith(f"Error: {root / 'data.yaml'}: images/train/caf\\xe9.jpg: image/filename: ") and line.endswith(
        "caf\\xe9.jpg is not UTF-8 text (a file name's bytes, most often): rename the file"
    )
    assert digests(root) == before


def test_a_fifo_where_a_listed_images_label_file_would_be_is_not_waited_on(tmp_path: Path) -> None:
    """Before: the look for YOLO labels beside a plain list's images opened the FIFO ``a.txt``
    and waited for a writer forever. It is no label file: the list builds as images."""
    root = tmp_path / "set"
    root.mkdir()
    photo(root / "a.jpg", 16, 12, 0)
    os.mkfifo(root / "a.txt")
    (root / "list.txt").write_text("a.jpg\n")
    built = run_cli(["build", root / "list.txt", "-o", tmp_path / "out", "-w", "1"], tmp_path, timeout=60)
    assert built.returncode == 0 and "list 1 record in 1 shard" in built.stdout, built.stderr


def test_a_label_file_that_is_a_fifo_or_has_a_line_past_the_bound_is_an_entry_error_naming_it(tmp_path: Path) -> None:
    """Before: the FIFO ``labels/train/a.txt`` was waited on forever, and a label file was read
    whole by lines of any length. Each is an entry error naming the file (and line)."""
    root = tmp_path / "set"
    data = _dataset(root, "images/train/a.jpg\nimages/train/b.jfif\n")
    os.mkfifo(root / "labels" / "train" / "a.txt")
    (root / "labels" / "train" / "b.txt").write_text("1 0.5 0.5 0.5 0.5\n0" + " 0.5" * 20000 + "\n")  # a line of 80,000 characters
    before = digests(root)
    failed = run_cli(["build", data, "-o", tmp_path / "out", "-w", "1", "--on-error", "skip"], tmp_path, timeout=60)
    assert failed.returncode == 0, failed.stderr
    listed = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert [(e["source"], e["line"], e["reason"]) for e in listed] == [
        (f"{root}/labels/train/a.txt", 0, "not a regular file: a label file is a .txt of lines"),
        (f"{root}/labels/train/b.txt", 2, "longer than 65536 characters: no YOLO label line"),
    ]
    assert digests(root) == before
