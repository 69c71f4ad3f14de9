"""Hostile KITTI folders, made the way an attacker or a careless tool makes them, built by the real
``shardkit`` command under a memory limit (``tests/hostile.py``): each ends in one ``Error:`` line
naming the file and where, exit 1, with no input byte changed; a good set's build prints what it
left out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hostile import refused_build, run_cli
from tests.labelling_tools import KittiObject, picture, write_kitti

pytestmark = pytest.mark.slow  # each case runs the shardkit command (a few seconds each)


@pytest.fixture()
def training(tmp_path: Path) -> Path:
    objects = [KittiObject("Car", (1.0, 2.0, 20.0, 22.0), 0.5, 1), KittiObject("DontCare", (21.0, 2.0, 30.0, 9.0))]
    return write_kitti(tmp_path / "KITTI" / "training", [("000000", 32, 24, objects), ("000001", 32, 24, [])])


def _refused(training: Path, tmp_path: Path) -> str:
    return refused_build(training.parent, training.parent, tmp_path)


def test_a_good_set_builds_and_says_what_it_left_out(training: Path, tmp_path: Path) -> None:
    done = run_cli(["build", training.parent, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "left out 1 annotation as no object to train on (DontCare 1): counted under image/object/left_out" in said


def test_a_short_line_is_one_line_naming_the_label_file_and_line(training: Path, tmp_path: Path) -> None:
    label = training / "label_2" / "000001.txt"
    label.write_text("Car 0.00 0\n")
    assert _refused(training, tmp_path) == (
        f"Error: {label}:1: 3 values: expected type truncated occluded alpha x1 y1 x2 y2 h w l x y z rotation_y [score]"
    )


def test_a_line_with_no_end_is_refused_after_4096_characters(training: Path, tmp_path: Path) -> None:
    label = training / "label_2" / "000001.txt"
    label.write_text("Car " + "0" * (64 << 20))  # 64 MB with no newline: not read whole
    assert _refused(training, tmp_path) == f"Error: {label}:1: longer than 4096 characters: no KITTI label line"


def test_a_label_file_that_is_no_utf8_is_one_line(training: Path, tmp_path: Path) -> None:
    label = training / "label_2" / "000001.txt"
    label.write_bytes(b"Car\xff 0.00 0 -1.57 1 2 20 22 1 1 1 1 1 1 1\n")
    line = _refused(training, tmp_path)
    assert line.startswith(f"Error: {label}: cannot read: 'utf-8' codec can't decode byte 0xff")


def test_a_label_file_linked_out_of_the_set_is_refused(training: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("Car 0.00 0 -1.57 1 2 20 22 1 1 1 1 1 1 1\n")
    label = training / "label_2" / "000001.txt"
    label.unlink()
    label.symlink_to(outside)
    line = _refused(training, tmp_path)
    assert line.startswith(f"Error: {training / 'label_2'}: 000001.png: label file {label} (a link to {outside}) is outside")
    assert line.endswith("(pass --allow-outside-root to read it)")


def test_an_image_linked_out_of_the_set_is_refused(training: Path, tmp_path: Path) -> None:
    picture(tmp_path / "elsewhere.png", 32, 24, 5)
    image = training / "image_2" / "000001.png"
    image.unlink()
    image.symlink_to(tmp_path / "elsewhere.png")
    line = _refused(training, tmp_path)
    assert line.startswith(f"Error: {training / 'label_2'}: ") and "000001.png" in line and "is outside the dataset's root" in line


def test_a_fifo_for_a_label_file_is_an_error_not_a_wait(training: Path, tmp_path: Path) -> None:
    label = training / "label_2" / "000001.txt"
    label.unlink()
    os.mkfifo(label)
    assert _refused(training, tmp_path) == f"Error: {label}: not a file"
