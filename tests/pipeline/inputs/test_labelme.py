"""LabelMe folders, as LabelMe saves them (one JSON beside each image): told by their layout, one
record per file (negatives kept), split folders, rectangles in any corner order, polygons, circles
and group_id parts as LabelMe's labelme2coco makes them, and a build TensorFlow reads back with
every box within 0.5 px, the class names, and masks as pycocotools draws the same polygons."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pycocotools import mask as coco_mask

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.labelme import LABELME
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.labelling_sets import lm_shape, write_labelme
from tests.paths import REPO
from tests.tfread import decode, read_split

SIZES = {"a.jpg": (64, 48), "b.jpg": (80, 60), "c.jpg": (72, 40)}
CAR_CORNERS = [[40.5, 30.25], [10.0, 5.5]]  # dragged from bottom right to top left
PERSON = [[2.0, 3.0], [30.0, 4.5], [25.5, 40.0], [5.0, 35.0]]
LEAF_PARTS = [[[40.0, 2.0], [60.0, 4.0], [50.0, 18.0]], [[44.0, 22.0], [66.0, 24.0], [52.0, 37.5]]]
WHEEL = [[20.0, 20.0], [28.0, 20.0]]  # centre, a point on the rim: radius 8


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm") / "labelled"
    write_labelme(root, "a.jpg", SIZES["a.jpg"], [lm_shape("car", CAR_CORNERS, "rectangle"), lm_shape("person", PERSON, "polygon")], 0)
    write_labelme(root, "b.jpg", SIZES["b.jpg"], [], 1, embed=True)  # no shapes: a negative; the image embedded too
    parts = [lm_shape("leaf", points, "polygon", group_id=1) for points in LEAF_PARTS]
    write_labelme(root, "c.jpg", SIZES["c.jpg"], [*parts, lm_shape("wheel", WHEEL, "circle")], 2)
    return root


def _want(name: str) -> list[tuple[str, list[list[float]]]]:
    """Each object of ``name``: its class and its polygons in pixels, as labelme2coco makes them."""
    (x2, y2), (x1, y1) = CAR_CORNERS
    found = {
        "a.jpg": [("car", [[x1, y1, x2, y1, x2, y2, x1, y2]]), ("person", [[v for p in PERSON for v in p]])],
        "b.jpg": [],
        "c.jpg": [("leaf", [[v for p in part for v in p] for part in LEAF_PARTS])],
    }[name]
    return found


def test_a_folder_is_told_by_its_layout_and_is_one_split(folder: Path, tmp_path: Path) -> None:
    assert registry.layout_format(str(folder)) is LABELME and registry.folder_format(str(folder)) is LABELME
    assert registry.layout_format(str(tmp_path)) is None
    [index] = discover([folder])
    assert (index.split, index.path, index.format) == ("train", str(folder), LABELME)
    with pytest.raises(
        ShardkitError,
        match=rf"^{folder / 'a.json'}: a LabelMe file \(one image's shapes\): build the folder of them: shardkit build {folder} -o OUT$",
    ):
        discover([folder / "a.json"])


def test_rows_are_the_files_in_name_order(folder: Path) -> None:
    [index] = discover([folder])
    rows = [r for r in index.rows() if isinstance(r, Row)]
    assert [(r.line, r.values[0], r.values[2]) for r in rows] == [(0, "a.jpg", "a"), (0, "b.jpg", "b"), (0, "c.jpg", "c")]
    assert rows[0].values[3]["bbox"][0] == [10.0, 5.5, 40.5, 30.25]  # the corners in either order
    assert rows[1].values[3] == {"size": [80, 60], "bbox": [], "text": [], "ref": [], "segmentation": []}
    assert rows[2].values[3]["text"] == ["leaf", "wheel"]  # two leaf parts of one group: one object
    assert rows[2].values[3]["bbox"][1] == pytest.approx([12.0, 12.0, 28.0, 28.0])  # the circle's extent


def _texts(record: dict[str, Any]) -> list[str]:
    return [t.decode() for t in record["image/object/class/text"] if t]  # read_split pads a batch's lists


def test_a_build_gives_every_image_with_its_boxes_classes_and_masks(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([folder], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, progress=False)
    assert (result.records, result.skipped) == (3, 0)
    classes = ["car", "leaf", "person", "wheel"]
    assert json.loads((out / "manifest.json").read_text())["classes"]["image/object"] == classes
    records = {r["image/filename"].decode(): r for r in read_split(str(out), "train")}
    assert sorted(records) == sorted(SIZES)
    for name, (width, height) in SIZES.items():
        record = records[name]
        want = _want(name) + ([("wheel", [])] if name == "c.jpg" else [])
        assert _texts(record) == [label for label, _ in want]
        assert list(record["image/object/class/label"][: len(want)]) == [classes.index(label) + 1 for label, _ in want]
        boxes = np.array([record[f"image/object/bbox/{k}"][: len(want)] for k in ("xmin", "ymin", "xmax", "ymax")]).T
        masks = record["image/object/mask"]
        for i, (label, polygons) in enumerate(want):
            if label == "wheel":
                np.testing.assert_allclose(boxes[i] * [width, height, width, height], [12, 12, 28, 28], atol=0.5)
                continue
            xs = [v for p in polygons for v in p[0::2]]
            ys = [v for p in polygons for v in p[1::2]]
            np.testing.assert_allclose(boxes[i] * [width, height, width, height], [min(xs), min(ys), max(xs), max(ys)], rtol=0, atol=0.5)
            drawn = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(polygons, height, width)))
            np.testing.assert_array_equal(decode(masks[i])[..., 0], drawn)
        if name == "c.jpg":  # the circle's mask: its rim's polygon, every pixel of the disc well inside it
            disc = decode(masks[1])[..., 0]
            yy, xx = np.mgrid[:height, :width]
            distance = np.hypot(xx + 0.5 - 20, yy + 0.5 - 20)
            assert disc[distance < 7.5].all() and not disc[distance > 8.5].any()
            assert abs(int(disc.sum()) - math.pi * 64) < 12


def test_split_folders_are_splits(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    write_labelme(root / "train", "a.jpg", (32, 24), [lm_shape("cat", [[1, 1], [9, 9]], "rectangle")])
    write_labelme(root / "val", "b.jpg", (32, 24), [])
    found = discover([root])
    assert [(f.split, f.path) for f in found] == [("train", str(root / "train")), ("val", str(root / "val"))]
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert result.records == 2
    write_labelme(root, "c.jpg", (32, 24), [])
    with pytest.raises(ShardkitError, match=r"LabelMe files both here and in the split folders train/, val/: move these into one of them"):
        discover([root])


def test_a_windows_image_path_and_an_image_in_another_folder(tmp_path: Path) -> None:
    root = tmp_path / "set"
    json_path = write_labelme(
        root / "images", "a.jpg", (32, 24), [lm_shape("cat", [[1, 1], [9, 9]], "rectangle")], image_path="..\\images\\a.jpg"
    )
    (root / "labels").mkdir()
    json_path.rename(root / "labels" / "a.json")
    result = shardkit.build([root / "labels"], tmp_path / "out", workers=1, progress=False, allow_outside_root=True)
    assert result.records == 1


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        (lm_shape("nose", [[3, 4]], "point"), "shapes[1] (nose): 'point' shapes are no objects (rectangle, polygon and circle are)"),
        (lm_shape("edge", [[3, 4], [9, 9]], "line"), "shapes[1] (edge): 'line' shapes are no objects (rectangle, polygon and circle are)"),
        (lm_shape("cat", [[3, 4], [9, 9]], "polygon"), "shapes[1] (cat): a polygon of 2 points (three or more make one)"),
    ],
)
def test_a_shape_that_is_no_object_is_one_line_naming_the_file(tmp_path: Path, shape: dict[str, Any], reason: str) -> None:
    path = write_labelme(tmp_path / "lm", "a.jpg", (32, 24), [lm_shape("cat", [[1, 1], [9, 9]], "rectangle"), shape])
    write_labelme(tmp_path / "lm", "b.jpg", (32, 24), [])
    with pytest.raises(EntryError) as refused:
        shardkit.build([tmp_path / "lm"], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == f"{path}: {reason}"
    result = shardkit.build([tmp_path / "lm"], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (1, 1)


def test_a_file_with_only_the_embedded_image_is_one_line(tmp_path: Path) -> None:
    path = write_labelme(tmp_path / "lm", "a.jpg", (32, 24), [], embed=True, image_path="")
    with pytest.raises(EntryError) as refused:
        shardkit.build([tmp_path / "lm"], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == (
        f"{path}: no imagePath (the image is embedded in imageData, which is not read: save it beside the file and name it)"
    )
