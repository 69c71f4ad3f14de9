"""KITTI object labels, as the benchmark and datumaro's kitti export lay them out: told by their
layout, a split per folder, and a build TensorFlow reads back with every box, class, truncation and
occlusion of the label files; DontCare regions left out and counted, images without objects kept."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import shardkit
from shardkit.errors import EntryError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.kitti import KITTI
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import write_voc, write_yolo
from tests.labelling_tools import KittiObject, write_kitti
from tests.tfread import read_each

IMAGES = [
    ("000000", 96, 48, [
        KittiObject("Car", (3.5, 4.25, 60.0, 39.5), truncated=0.25, occluded=2),
        KittiObject("DontCare", (61.0, 1.0, 90.0, 20.0)),
        KittiObject("Pedestrian", (70.0, 5.0, 80.0, 35.0), truncated=0.0, occluded=0),
        KittiObject("Person_sitting", (0.0, 30.0, 9.0, 48.0), truncated=0.88, occluded=3),
    ]),
    ("000001", 80, 40, []),  # an empty label file: a negative example
    ("000002", 80, 40, [KittiObject("DontCare", (1.0, 1.0, 9.0, 9.0)), KittiObject("Cyclist", (20.5, 10.0, 41.0, 39.0), 0.5, 1)]),
    ("000003", 64, 40, None),  # no label file at all: no objects, kept
]  # fmt: skip


@pytest.fixture(scope="module")
def kitti(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kitti") / "KITTI"
    write_kitti(root / "training", IMAGES)
    (root / "testing" / "image_2").mkdir(parents=True)  # the benchmark's test images come without labels
    return root


def test_kitti_is_told_by_its_layout_the_root_and_a_split_folder_alike(kitti: Path, tmp_path: Path) -> None:
    assert registry.layout_format(str(kitti)) is KITTI and registry.layout_format(str(kitti / "training")) is KITTI
    assert registry.folder_format(str(kitti)) is KITTI
    label_2 = str(kitti / "training" / "label_2")
    assert [(f.split, f.path) for f in discover([kitti])] == [("train", label_2)]  # testing/ has no labels: no split
    assert [(f.split, f.path) for f in discover([kitti / "training"])] == [("train", label_2)]
    assert KITTI.folder_of(label_2) == str(kitti / "training" / "image_2")
    assert registry.layout_format(str(write_voc(tmp_path / "VOC2012"))).name == "voc"  # theirs stay theirs
    assert registry.layout_format(str(write_yolo(tmp_path / "yolo").parent)).name == "yolo"
    assert registry.layout_format(str(tmp_path / "VOC2012" / "JPEGImages")) is None


def test_each_image_is_a_row_with_its_label_files_objects(kitti: Path) -> None:
    got = [r for index in discover([kitti]) for r in index.rows()]
    assert all(isinstance(r, Row) for r in got)
    assert [(r.line, r.values[0], r.values[2]) for r in got if isinstance(r, Row)] == [
        (0, "000000.png", "000000"), (0, "000001.png", "000001"), (0, "000002.png", "000002"), (0, "000003.png", "000003"),
    ]  # fmt: skip
    assert got[0].values[3] == {  # type: ignore[union-attr]
        "bbox": [[3.5, 4.25, 60.0, 39.5], [70.0, 5.0, 80.0, 35.0], [0.0, 30.0, 9.0, 48.0]],
        "text": ["Car", "Pedestrian", "Person_sitting"],
        "truncation": [0.25, 0.0, 0.88],
        "occluded": [2, 0, 3],
        "left_out": ["DontCare"],
    }


def test_a_build_gives_every_box_class_truncation_and_occlusion_back_to_tensorflow(kitti: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([kitti], out, workers=1, progress=False)
    assert result.records == len(IMAGES)  # records = images, those without objects too
    manifest = json.loads((out / "manifest.json").read_text())
    classes = ["Car", "Cyclist", "Pedestrian", "Person_sitting"]  # the names found, sorted: DontCare is no class
    assert manifest["classes"]["image/object"] == classes
    assert manifest["splits"]["train"]["labels"]["image/object/left_out"] == {"DontCare": 2}
    fields = {e["key"]: e["dtype"] for e in manifest["schema"]}
    assert (fields["image/object/truncation"], fields["image/object/occluded"]) == ("float", "int64")
    sizes = {stem: (width, height, objects or []) for stem, width, height, objects in IMAGES}
    records = read_each(str(out), "train")
    assert sorted(r["image/filename"].decode() for r in records) == [f"{stem}.png" for stem in sizes]
    for record in records:
        width, height, objects = sizes[record["image/filename"].decode()[:-4]]
        kept = [o for o in objects if o.type != "DontCare"]
        boxes = np.stack([record[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], axis=1).reshape(-1, 4)
        np.testing.assert_allclose(boxes * [width, height, width, height], [o.box for o in kept] or np.zeros((0, 4)), atol=0.5)
        assert [t.decode() for t in record["image/object/class/text"]] == [o.type for o in kept]
        assert list(record["image/object/class/label"]) == [classes.index(o.type) + 1 for o in kept]
        assert list(record["image/object/truncation"]) == [np.float32(o.truncated) for o in kept]  # the fraction, as a float
        assert list(record["image/object/occluded"]) == [o.occluded for o in kept]  # 0 to 3, as written


def test_datumaros_kitti_export_is_a_split_per_subset_folder(tmp_path: Path) -> None:
    root = tmp_path / "exported"
    write_kitti(root / "default", [("frame_1", 32, 24, [KittiObject("car", (1.0, 2.0, 20.0, 22.0))])])
    write_kitti(root / "val", [("frame_2", 32, 24, [])])
    assert [(f.split, Path(f.path).parent.name) for f in discover([root])] == [("default", "default"), ("val", "val")]
    assert shardkit.build([root], tmp_path / "out", workers=1, progress=False).records == 2


def test_a_relative_path_builds(kitti: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``shardkit build KITTI`` from the folder above: rows named the split's source by its absolute
    path, which the plan did not know (a KeyError in the planner)."""
    monkeypatch.chdir(kitti.parent)
    assert shardkit.build([kitti.name], tmp_path / "out", workers=1, progress=False).records == len(IMAGES)


def test_split_folders_of_other_names_in_one_root_keep_their_names(tmp_path: Path) -> None:
    """``training`` and ``training_old`` side by side were both ``train``, merged with their ids
    repeating; a folder of another name given alone is still ``train``."""
    root = tmp_path / "kitti"
    write_kitti(root / "training", [("000000", 32, 24, [])])
    write_kitti(root / "training_old", [("000000", 32, 24, [])])
    assert [f.split for f in discover([root])] == ["train", "training_old"]
    assert [f.split for f in discover([root / "training_old"])] == ["train"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "Car 0.00 0 -1.57 1.00 2.00 20.00 22.00",
            "8 values: expected type truncated occluded alpha x1 y1 x2 y2 h w l x y z rotation_y [score]",
        ),
        ("Car 1.50 0 -1.57 1.00 2.00 20.00 22.00 1 1 1 1 1 1 1", "truncated 1.50 is not a fraction from 0 to 1"),
        ("Car 0.00 4 -1.57 1.00 2.00 20.00 22.00 1 1 1 1 1 1 1", "occluded 4 is not 0, 1, 2 or 3"),
        ("Car 0.00 0 -1.57 1.00 2.00 wide 22.00 1 1 1 1 1 1 1", "'wide' is not a number"),
        ("Car 0.00 0 -1.57 1.00 2.00 nan 22.00 1 1 1 1 1 1 1", "'nan' is not a finite number"),
    ],
)
def test_a_bad_label_line_is_an_entry_error_naming_the_label_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    split = write_kitti(tmp_path / "training", [("000000", 32, 24, [KittiObject("Car", (1.0, 2.0, 20.0, 22.0))])])
    label = split / "label_2" / "000000.txt"
    label.write_text(label.read_text() + line + "\n")
    [error] = [r for index in discover([split]) for r in index.rows()]
    assert isinstance(error, EntryError) and str(error) == f"{label}:2: {reason}"


def test_a_label_file_with_no_image_is_an_entry_error_of_its_own(tmp_path: Path) -> None:
    split = write_kitti(tmp_path / "training", [("000000", 32, 24, [])])
    (split / "label_2" / "000009.txt").write_text("Car 0.00 0 -1.57 1.00 2.00 20.00 22.00 1 1 1 1 1 1 1\n")
    found = [r for index in discover([split]) for r in index.rows()]
    assert [str(r) for r in found if isinstance(r, EntryError)] == [
        f"{split / 'label_2' / '000009.txt'}: no image 000009.* in {split / 'image_2'}"
    ]
    assert [r.values[0] for r in found if isinstance(r, Row)] == ["000000.png"]
