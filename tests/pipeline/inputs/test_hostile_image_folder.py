"""ImageFolder trees as they come from other tools and careless copies: images in folders under
a class folder (torchvision's ``ImageFolder`` walks them), links that lead nowhere or in circles,
names that are not UTF-8. Nothing is left out silently: each image is a record, or an entry
error naming its path."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.reader import ShardReader
from tests.hostile import digests, one_line_error, run_cli
from tests.object_stores import Store

pytestmark = pytest.mark.slow  # the shardkit command in child processes, a few seconds a test


def _image(path: Path, shade: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), shade, np.uint8)).save(path)


def _labels(out: Path) -> list[tuple[str, str]]:
    """(source_id, class name) of every record, sorted."""
    classes = json.loads((out / "manifest.json").read_text())["config"]["features"]["label"]["classes"]
    return sorted((r["source_id"], classes[r["label"]]) for r in ShardReader(str(out), "train"))


@pytest.fixture()
def nested(tmp_path: Path) -> Path:
    """ROOT/<class>/... with images one and two folders down, and a link to a folder of images
    (torchvision lists every one of them, with the class of the first-level folder)."""
    root = tmp_path / "photos"
    for name in ("cat/a.jpg", "cat/more/x.jpg", "cat/more/deeper/y.png", "dog/b.jpg", ".shared/z.jpg", "cat/.cache/hidden.jpg"):
        _image(root / name)
    (root / "cat" / "notes.txt").write_text("not an image\n")
    (root / "dog" / "shared").symlink_to("../.shared")
    return root


def test_images_in_folders_under_a_class_are_built_with_the_class_of_the_first_level(nested: Path, tmp_path: Path) -> None:
    result = shardkit.build(out=tmp_path / "out", from_folder=nested, workers=1, progress=False)
    assert (result.records, result.skipped) == (5, 0)
    assert _labels(tmp_path / "out") == [
        ("cat/a.jpg", "cat"),
        ("cat/more/deeper/y.png", "cat"),
        ("cat/more/x.jpg", "cat"),
        ("dog/b.jpg", "dog"),
        ("dog/shared/z.jpg", "dog"),  # through the link, as os.walk(followlinks=True); hidden folders are not walked
    ]


def test_broken_links_and_link_loops_are_entry_errors_naming_the_path(nested: Path, tmp_path: Path) -> None:
    (nested / "dog" / "gone.jpg").symlink_to("nothere.jpg")
    (nested / "dog" / "self.jpg").symlink_to("self.jpg")
    (nested / "cat" / "more" / "up").symlink_to("..")  # back to a folder it is in: walked forever by os.walk
    (nested / "dog" / "album").symlink_to("../../moved-away")  # a folder of images, perhaps: not left out unsaid
    (nested / "cat" / "LICENSE").symlink_to("notes.txt")  # a link to a file that is no image: not one, as notes.txt
    before = digests(tmp_path)
    failed = run_cli(["build", "--from-folder", nested, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    loop = f"photos/cat/more/up: a symbolic link back to {nested.resolve()}/cat, a folder it is in: remove the link"
    assert one_line_error(failed).endswith(loop)
    skipped = run_cli(["build", "--from-folder", nested, "-o", tmp_path / "out", "-w", "1", "--on-error", "skip"], tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    errors = [json.loads(line)["reason"] for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert [e.split(": ", 1)[1] for e in errors] == [
        f"a symbolic link back to {nested.resolve()}/cat, a folder it is in: remove the link",
        "a symbolic link to ../../moved-away, which does not exist: remove the link or restore its target",
        "a symbolic link to nothere.jpg, which does not exist: remove the link or restore its target",
        "a symbolic link loop: remove the link or point it at the image",
    ]
    named = [f"{nested}/{path}" for path in ("cat/more/up", "dog/album", "dog/gone.jpg", "dog/self.jpg")]
    assert [e.split(": ", 1)[0] for e in errors] == named
    assert len(_labels(tmp_path / "out")) == 5
    assert digests(nested) == {k: v for k, v in before.items() if k.startswith(str(nested))}


def test_a_name_that_is_not_utf8_is_an_entry_error_naming_it(tmp_path: Path) -> None:
    # As an archive from an old Windows or Latin-1 machine unpacks: the name's bytes as they were.
    root = tmp_path / "photos"
    _image(root / "cat" / "a.jpg")
    _image(root / "dog" / "b.jpg")
    shutil.copy(root / "cat" / "a.jpg", os.fsencode(root / "cat") + b"/caf\xe9.jpg")
    before = digests(root)
    failed = run_cli(["build", "--from-folder", "photos", "-o", "out", "-w", "1"], tmp_path)
    assert one_line_error(failed) == (
        "Error: photos:2: photos/cat/caf\\xe9.jpg: the name is not UTF-8, and a record stores it as text: "
        "rename it (e.g. convmv -f latin1 -t utf-8 -r --notest photos)"
    )
    skipped = run_cli(["build", "--from-folder", "photos", "-o", "out", "-w", "1", "--on-error", "skip"], tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert _labels(tmp_path / "out") == [("cat/a.jpg", "cat"), ("dog/b.jpg", "dog")]
    assert "caf\\\\xe9.jpg: the name is not UTF-8" in (tmp_path / "out" / "errors.jsonl").read_text()
    assert digests(root) == before


def test_images_in_folders_under_a_class_in_a_bucket_as_on_a_disk(store: Store, bucket: str, nested: Path, tmp_path: Path) -> None:
    shutil.rmtree(nested / ".shared")
    (nested / "dog" / "shared").unlink()  # a store has no links
    store.fs().put(str(nested), f"{bucket}/photos".split("://", 1)[1], recursive=True)
    local = shardkit.build(out=tmp_path / "local", from_folder=nested, workers=1, progress=False)
    remote = shardkit.build(out=tmp_path / "remote", from_folder=f"{bucket}/photos", workers=1, progress=False)
    assert remote.records == local.records == 4
    assert _labels(tmp_path / "remote") == _labels(tmp_path / "local")
