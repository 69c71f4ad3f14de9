"""What a command may delete or overwrite: only names it writes itself, never an input.

Each case is the command a user types, run as the ``shardkit`` program under a memory limit,
with every file of the dataset hashed before and after: a refusal is one line, exit 1, before
anything is written, and no input byte changes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shardkit import demo
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # the shardkit command in child processes, a few seconds a test

PREPROCESS = "import tensorflow as tf\n\ndef prep(x):\n    return x\n"


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """An index-file segmentation set with its shards built inside it, as users lay them out."""
    root = demo.make_segmentation(tmp_path / "data", train=6, val=2, width=32, height=24)
    built = run_cli(["build", root, "-o", root / "shards", "-q"], tmp_path)
    assert built.returncode == 0, built.stderr
    (tmp_path / "prep.py").write_text(PREPROCESS)
    return root


def test_snapshot_overwrite_never_deletes_a_folder_holding_its_source(data: Path) -> None:
    before = digests(data)
    args = ["snapshot-materialize", data / "shards", "-o", data, "--preprocess", "prep.py:prep"]
    refused = run_cli(args, data.parent)
    assert "is not a shardkit snapshot" in one_line_error(refused) or "holds an input" in one_line_error(refused)
    forced = run_cli([*args, "--overwrite"], data.parent)
    line = one_line_error(forced)
    assert line == (
        f"Error: {data}: holds an input of snapshot-materialize ({data / 'shards'}), which it never deletes or overwrites; "
        "give -o a new folder"
    )
    assert digests(data) == before


def test_snapshot_overwrite_replaces_only_a_snapshot_it_wrote(data: Path) -> None:
    """A folder with no snapshot metadata is someone's: --overwrite does not make it ours."""
    other = data.parent / "notes"
    other.mkdir()
    (other / "thesis.txt").write_text("four years of work")
    before = digests(other)
    forced = run_cli(["snapshot-materialize", data / "shards", "-o", other, "--preprocess", "prep.py:prep", "--overwrite"], data.parent)
    assert one_line_error(forced) == (
        f"Error: {other}: exists and is not a shardkit snapshot (no shardkit-snapshot.json); snapshot-materialize replaces only "
        "the snapshots it wrote, --overwrite or not: give -o a new folder, or remove this one yourself"
    )
    assert digests(other) == before
    preprocess = run_cli(["snapshot-materialize", data / "shards", "-o", data.parent, "--preprocess", "prep.py:prep"], data.parent)
    assert "holds an input of snapshot-materialize" in one_line_error(preprocess)


def test_preview_never_overwrites_an_image_an_index_file_lists(data: Path) -> None:
    image = data / "images" / "train_00000.jpg"
    before = digests(data)
    refused = run_cli(["preview", data, "-o", image], data.parent)
    assert one_line_error(refused) == f"Error: {image}: exists and is not a picture shardkit preview wrote, which it never overwrites; " + (
        "give -o a new path"
    )
    assert digests(data) == before


def test_preview_replaces_its_own_picture(data: Path, tmp_path: Path) -> None:
    picture = tmp_path / "look.png"
    for _ in range(2):  # the second run replaces the picture the first one wrote
        made = run_cli(["preview", data / "shards", "-o", picture], tmp_path)
        assert made.returncode == 0, made.stderr
    shutil.copy(data / "masks" / "train_00000.png", picture)  # now a picture someone else made
    assert "is not a picture shardkit preview wrote" in one_line_error(run_cli(["preview", data / "shards", "-o", picture], tmp_path))


@pytest.mark.parametrize("given", ["data", "data/train_0.txt"])
def test_build_into_the_folder_its_inputs_are_read_from_is_refused(data: Path, given: str) -> None:
    shutil.rmtree(data / "shards")
    before = sorted(p.name for p in data.iterdir())
    hashes = digests(data)
    for flags in ([], ["--overwrite"]):
        refused = run_cli(["build", given, "-o", "data", *flags], data.parent)
        assert one_line_error(refused) == (
            f"Error: {data}: is the folder the input {given} is read from, where build's own files would be taken for inputs by "
            f"the next run; give -o a folder of its own, such as {data / 'shards'}"
        )
    assert sorted(p.name for p in data.iterdir()) == before and digests(data) == hashes  # nothing written, not even .shardkit/


def test_build_into_an_image_folder_tree_is_refused(tmp_path: Path) -> None:
    photos = demo.make_classification(tmp_path / "photos", per_class=2, width=32, height=24)
    before = digests(photos)
    refused = run_cli(["build", "--from-folder", photos, "-o", photos / "shards"], tmp_path)
    assert one_line_error(refused) == (
        f"Error: {photos / 'shards'}: is inside the input tree {photos}, every folder of which is read as input; "
        "give -o a folder outside it"
    )
    assert digests(photos) == before and not (photos / "shards").exists()


def test_an_input_at_a_name_build_writes_in_out_is_refused(data: Path) -> None:
    """An index file inside OUT's ``.shardkit/`` would be deleted by --overwrite and a fresh plan."""
    hidden = data / "shards" / ".shardkit" / "train.txt"
    shutil.copy(data / "train_0.txt", hidden)
    (hidden.parent / "images").symlink_to(data / "images")
    (hidden.parent / "masks").symlink_to(data / "masks")
    before = digests(data)
    refused = run_cli(["build", hidden, "-o", data / "shards", "--overwrite"], data.parent)
    assert one_line_error(refused) == (
        f"Error: {hidden}: is an input at a name build writes or replaces in {data / 'shards'}, and an input is never "
        "overwritten; move it, or give -o another folder"
    )
    assert digests(data) == before


def test_a_build_beside_its_inputs_still_resumes_and_overwrites_its_own(data: Path) -> None:
    """The layout the rule must keep working: OUT inside the index folder, rerun, --overwrite."""
    again = run_cli(["build", data, "-o", data / "shards"], data.parent)
    assert again.returncode == 0 and "built 0 shards, 2 kept" in again.stdout
    replaced = run_cli(["build", data, "-o", data / "shards", "--seed", "3", "--overwrite", "-q"], data.parent)
    assert replaced.returncode == 0, replaced.stderr


def test_overwrite_deletes_only_what_a_build_it_recognizes_wrote(data: Path, tmp_path: Path) -> None:
    """Files named like a build's outputs but with no build state are anyone's (here a listed
    input); beside a build, only the names that build writes go."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "features.json").write_text('{"mine": true}')
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "blobs.csv").write_text("image,blob\n../data/images/train_00000.jpg,../o/features.json\n")
    (tmp_path / "blobs.yaml").write_text("features:\n  image: {kind: image, column: image}\n  blob: {kind: bytes, column: blob}\n")
    before = digests(out / "features.json")
    args = ["build", tmp_path / "idx" / "blobs.csv", "-c", tmp_path / "blobs.yaml", "-o", out, "--split", "train"]
    for flags in ([], ["--overwrite"]):
        assert one_line_error(run_cli([*args, *flags], tmp_path)) == (
            f"Error: {out}: holds features.json named as a build names its outputs, but no build state (.shardkit/build.json): "
            "nothing shows a build wrote them, so no build replaces them, --overwrite or not; move them, or use another output folder"
        )
    assert digests(out / "features.json") == before  # beside it, only the lock a build takes

    shards = data / "shards"
    (shards / "notes.labels.txt").write_text("a class list of my own\n")  # a built name, but not one this build wrote
    replaced = run_cli(["build", data, "-o", shards, "--seed", "5", "--overwrite", "-q"], tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert (shards / "notes.labels.txt").read_text() == "a class list of my own\n"
