"""The demo data sets at any picture size the parameters allow, down to one pixel: each writes
pictures of the size asked for, and a build reads the small Hub export back."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

import shardkit
from shardkit import demo

SIZES = (1, 2, 7, 16, 20, 21, 33)


@pytest.mark.parametrize("size", SIZES)
def test_a_hub_export_of_any_size(size: int, tmp_path: Path) -> None:
    root = demo.make_hub_export(tmp_path / "hub", train=4, test=2, size=size)
    for split, count in (("train", 4), ("test", 2)):
        rows = pq.read_table(root / "data" / f"{split}-00000-of-00001.parquet").to_pylist()
        assert len(rows) == count and all(0 <= r["label"] < 3 for r in rows)
        for row in rows:
            with Image.open(io.BytesIO(row["image"]["bytes"])) as image:
                assert (image.format, image.size) == ("PNG", (size, size))


@pytest.mark.parametrize("size", SIZES)
def test_segmentation_classification_and_detection_sets_of_any_size(size: int, tmp_path: Path) -> None:
    seg = demo.make_segmentation(tmp_path / "seg", train=2, val=1, width=size, height=size + 3)
    assert {Image.open(p).size for p in (seg / "images").iterdir()} == {(size, size + 3)}
    cls = demo.make_classification(tmp_path / "cls", per_class=1, width=size + 1, height=size)
    assert {Image.open(p).size for p in cls.rglob("*.jpg")} == {(size + 1, size)}
    det = demo.make_detection(tmp_path / "det", train=2, val=1, width=size, height=size)
    coco = json.loads((det / "annotations" / "instances_train2017.json").read_text())
    for box in (a["bbox"] for a in coco["annotations"]):
        assert box[2] > 0 and box[3] > 0 and box[0] + box[2] <= size and box[1] + box[3] <= size


def test_a_small_hub_export_builds(tmp_path: Path) -> None:
    root = demo.make_hub_export(tmp_path / "hub", size=16)
    result = shardkit.build([root / "data"], tmp_path / "out", workers=1, progress=False)
    assert result.records == 80 and result.skipped == 0


def test_a_picture_of_no_pixels_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^size is 0: a demo picture is at least 1x1 pixels$"):
        demo.make_hub_export(tmp_path / "hub", size=0)
    with pytest.raises(ValueError, match=r"^height is -1: "):
        demo.make_segmentation(tmp_path / "seg", width=4, height=-1)
