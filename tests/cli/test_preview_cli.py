"""`shardkit preview` and `shardkit.preview`: which picture PATHS ask for, written whole, errors in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import shardkit
from shardkit.errors import UsageError


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardkit.cli", "preview", *args], capture_output=True, text=True, timeout=300)


def test_the_cli_draws_augmentations_before_a_build_and_records_after_it(augmented: Path, tmp_path: Path) -> None:
    before = _cli(str(augmented), "-c", str(augmented / "config.yaml"), "-o", str(tmp_path / "aug.png"), "-n", "2", "--copies", "2")
    assert before.returncode == 0, before.stderr
    assert before.stdout.startswith(f"wrote {tmp_path / 'aug.png'} (")
    with Image.open(tmp_path / "aug.png") as picture:
        assert picture.format == "PNG" and picture.width <= 2000

    shardkit.build([augmented], tmp_path / "out", config=str(augmented / "config.yaml"), workers=1, progress=False)
    after = _cli(str(tmp_path / "out"), "-o", str(tmp_path / "records.jpg"), "-n", "5", "--split", "val")
    assert after.returncode == 0, after.stderr
    with Image.open(tmp_path / "records.jpg") as picture:
        assert picture.format == "JPEG"
    assert not list(tmp_path.glob(".*incomplete*"))  # written whole


def test_bad_input_is_the_builds_one_line_error(seg_copy: Path, tmp_path: Path) -> None:
    line, first = next((n, t.split()[0]) for n, t in enumerate((seg_copy / "train_0.txt").read_text().splitlines(), 1) if t[:1] not in "#")
    (seg_copy / first).unlink()
    done = _cli(str(seg_copy), "-o", str(tmp_path / "x.png"))
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert f"train_0.txt:{line}: image: " in done.stderr and "file not found" in done.stderr
    assert not (tmp_path / "x.png").exists()
    labels = _cli(str(seg_copy), "--labels", "-o", str(tmp_path / "y.png"))
    assert labels.returncode == 1 and labels.stderr.count("\n") == 1, labels.stderr


def test_preview_writes_only_a_picture_and_never_over_an_input(seg_copy: Path, cls_data: Path, tmp_path: Path) -> None:
    index, config = seg_copy / "train_0.txt", tmp_path / "x.yaml"
    config.write_text("features:\n  image: {kind: image, column: 0}\n")
    kept = {path: path.read_bytes() for path in (index, config)}
    done = _cli(str(seg_copy), "-o", str(index))  # an index file where the picture goes
    assert (done.returncode, done.stderr) == (1, f"Error: {index}: not a picture's name; give -o a .png, .jpg or .webp path\n")
    with pytest.raises(UsageError, match="^" + re.escape(f"{config}: not a picture's name")):
        shardkit.preview([seg_copy], config)  # a config passed where ``out`` goes
    with pytest.raises(UsageError, match="is a folder"):
        shardkit.preview([seg_copy], seg_copy)
    with pytest.raises(UsageError, match="is one of preview's inputs"):
        shardkit.preview([seg_copy], tmp_path / "c.webp", config=tmp_path / "c.webp")
    inside = cls_data / "cat" / "preview.png"
    with pytest.raises(UsageError, match="is inside the ImageFolder tree"):
        shardkit.preview(from_folder=cls_data, out=inside)
    assert {path: path.read_bytes() for path in kept} == kept and not inside.exists()


def test_the_python_call_returns_a_pil_image_and_writes_only_when_asked(
    seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    picture = shardkit.preview([str(seg_data)], count=2, copies=0)
    assert isinstance(picture, Image.Image) and picture.mode == "RGB"
    assert not list(tmp_path.iterdir())
    shardkit.preview([seg_data], tmp_path / "sheet.png", count=1)
    assert Image.open(tmp_path / "sheet.png").size[0] > 0


def test_index_files_named_one_by_one_are_inputs_and_split_filters(seg_data: Path) -> None:
    from shardkit.view.augmentations import augmentation_records
    from shardkit.view.preview import _are_shards

    assert not _are_shards([str(seg_data / "train_0.txt")])
    assert isinstance(shardkit.preview([str(seg_data / "train_0.txt")], count=1, copies=0), Image.Image)
    shown = augmentation_records([seg_data], split="val", entries=3)
    assert {e.split for e in shown.entries} == {"val"} and all(e.source.endswith("val.txt") for e in shown.entries)
    with pytest.raises(shardkit.errors.ShardkitError, match=r"no split 'test' in the inputs \(they have train, val\)"):
        augmentation_records([seg_data], split="test")
    ignored = augmentation_records([seg_data], ignore=["train_1*"], entries=64)
    assert not any(e.source.endswith("train_1.txt") for e in ignored.entries)


def test_a_config_with_its_own_source_id_feature_previews(seg_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "sid.yaml"
    config.write_text(
        "features:\n  image: {kind: image, column: 0}\n  mask: {kind: mask, column: 1}\n  source_id: {kind: string, column: 0}\n"
    )
    assert shardkit.preview([str(seg_data / "val.txt")], config=str(config), count=1).width > 0


def test_a_colour_coded_mask_is_drawn_in_its_own_colours_on_every_tile() -> None:
    import numpy as np

    from shardkit.view import sheet

    mask = np.zeros((2, 3, 3), np.uint8)
    mask[0, 0] = (128, 0, 0)
    mask[0, 1] = (0, 128, 0)
    mask[1, 2] = (128, 128, 0)
    classes = sheet.as_classes(mask)
    assert classes[1, 0] == 0  # black: the background
    assert [sheet.colour(int(v)) for v in (classes[0, 0], classes[0, 1], classes[1, 2])] == [(128, 0, 0), (0, 128, 0), (128, 128, 0)]
    other = np.zeros((2, 3, 3), np.uint8)
    other[1, 1] = (128, 128, 0)  # a tile without the other colours: the same class value
    assert sheet.as_classes(other)[1, 1] == classes[1, 2]
    assert len(sheet.classes_in([sheet.Tile(np.zeros((2, 3, 3), np.uint8), mask), sheet.Tile(np.zeros((2, 3, 3), np.uint8), other)])) == 3
