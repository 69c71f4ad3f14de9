"""CVAT for images 1.1 XML, as CVAT exports a project (subsets) and a task: told by its content
and its export folder, a split per subset, and a build TensorFlow reads back with every box, class,
attribute and mask the XML holds; what is no object (polylines, points, tags) counted, not lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.cvat import CVAT
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import labelimg_xml, write_voc
from tests.labelling_tools import CvatImage, Shape, cvat_xml, write_cvat
from tests.tfread import decode, read_each

LABELS = [("car", "rectangle", ["truncated"]), ("traffic light", "polygon", []), ("person", "any", [])]
BLOB = np.zeros((6, 5), np.uint8)
BLOB[1:5, 1:4] = 1
BLOB[2, 4] = 1
IMAGES = [
    CvatImage("frame_000000.jpg", 64, 48, subset="Train", shapes=[
        Shape("box", "car", (3.5, 4.25, 30.0, 40.0), occluded=1, attributes={"truncated": "true", "model": "hatchback"}),
        Shape("polygon", "traffic light", (10.0, 10.0, 30.5, 12.0, 20.25, 30.75)),
        Shape("polyline", "car", (1.0, 1.0, 5.0, 5.0)),
        Shape("tag", "person"),
    ]),
    CvatImage("frame_000001.jpg", 40, 32, subset="Train"),  # no objects: a negative example, kept
    CvatImage("frame_000002.jpg", 40, 32, subset="Validation", shapes=[
        Shape("mask", "person", (10, 8), mask=BLOB),
        Shape("box", "car", (0.0, 0.0, 40.0, 32.0), attributes={"truncated": "false"}),
        Shape("points", "person", (4.0, 5.0, 6.0, 7.0)),
    ]),
    CvatImage("frame_000003.jpg", 48, 40, subset="Train", shapes=[Shape("polygon", "car", (1.0, 2.0, 9.0, 2.0, 9.0, 12.0, 1.0, 12.0))]),
]  # fmt: skip
MASKS_CONFIG = """\
features:
  image/encoded: {kind: encoded_image, column: image, encoding: raw}
  image/filename: {kind: string, column: filename}
  image/object: {kind: objects, column: objects, masks: true}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cvat") / "streets"
    write_cvat(root, IMAGES, LABELS, project=True)
    return root


def rows(path: Path) -> list[Row | EntryError]:
    return [item for index in discover([path]) for item in index.rows()]


def test_a_cvat_xml_is_told_by_its_content_and_its_export_folder_by_its_annotations_xml(project: Path, tmp_path: Path) -> None:
    assert registry.file_format(str(project / "annotations.xml")) is CVAT
    assert registry.layout_format(str(project)) is CVAT and registry.folder_format(str(project)) is CVAT
    other = tmp_path / "a.xml"
    other.write_text(labelimg_xml("a.jpg", tmp_path, 32, 24, [("cat", (1, 2, 20, 22))]))
    assert registry.file_format(str(other)) is None  # a Pascal VOC annotation is no CVAT XML
    voc = write_voc(tmp_path / "VOC2012")
    (voc / "annotations.xml").write_text(cvat_xml([], LABELS))  # even beside one, a VOC folder stays VOC's
    assert registry.layout_format(str(voc)).name == "voc"
    assert registry.layout_format(str(tmp_path)) is None


def test_a_project_export_is_a_split_per_subset_each_image_a_row_at_its_line(project: Path) -> None:
    xml = str(project / "annotations.xml")
    found = discover([project])
    assert [(f.split, f.path) for f in found] == [("train", xml), ("validation", xml)]
    assert discover([xml]) == found  # the file itself names its splits too
    assert CVAT.label_map(xml) == ((1, "car"), (2, "traffic light"), (3, "person"))  # the skeleton's point "1" is no class
    got = [r for r in rows(project) if isinstance(r, Row)]
    lines = Path(xml).read_text().splitlines()
    assert [(r.values[0], r.values[2]) for r in got] == [
        ("Train/frame_000000.jpg", "0"), ("Train/frame_000001.jpg", "1"), ("Train/frame_000003.jpg", "3"),
        ("Validation/frame_000002.jpg", "2"),
    ]  # fmt: skip
    assert all(lines[r.line - 1].lstrip().startswith(f'<image id="{r.values[2]}"') for r in got)  # the <image>'s own line
    first = got[0].values[3]
    assert first == {
        "size": [64, 48],
        "bbox": [[3.5, 4.25, 30.0, 40.0], [10.0, 10.0, 30.5, 30.75]],
        "text": ["car", "traffic light"],
        "occluded": [1, 0],
        "truncated": [1, 0],
        "segmentation": [[[3.5, 4.25, 30.0, 4.25, 30.0, 40.0, 3.5, 40.0]], [[10.0, 10.0, 30.5, 12.0, 20.25, 30.75]]],
        "left_out": ["polyline", "tag"],
    }


def _boxes(record: dict[str, Any], width: int, height: int) -> np.ndarray:
    corners = [record[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")]
    return np.stack(corners, axis=1).astype(np.float64) * np.array([width, height, width, height])


def test_a_build_gives_every_box_class_attribute_and_mask_back_to_tensorflow(project: Path, tmp_path: Path) -> None:
    from pycocotools import mask as coco_mask

    config = tmp_path / "masks.yaml"
    config.write_text(MASKS_CONFIG)
    out = tmp_path / "out"
    result = shardkit.build([project], out, config=config, workers=1, progress=False)
    assert result.records == len(IMAGES)  # records = images, the one without objects too
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["classes"]["image/object"] == ["car", "traffic light", "person"]
    assert (out / "label_map.pbtxt").read_text().startswith("item {\n  id: 1\n  name: 'car'\n}\nitem {\n  id: 2\n  name: 'traffic light'")
    labels = {split: manifest["splits"][split]["labels"] for split in ("train", "validation")}
    assert labels["train"]["image/object/left_out"] == {"polyline": 1, "tag": 1}
    assert labels["validation"]["image/object/left_out"] == {"points": 1}
    by_name = {image.name: image for image in IMAGES}
    seen = []
    for split in ("train", "validation"):
        for record in read_each(str(out), split):
            image = by_name[record["image/filename"].decode()]
            seen.append(image.name)
            kept = [s for s in image.shapes if s.kind in ("box", "polygon", "mask")]
            assert [t.decode() for t in record["image/object/class/text"]] == [s.label for s in kept]
            assert list(record["image/object/class/label"]) == [[n for n, _, _ in LABELS].index(s.label) + 1 for s in kept]
            assert list(record["image/object/occluded"]) == [s.occluded for s in kept]
            assert list(record["image/object/truncated"]) == [int(s.attributes.get("truncated") == "true") for s in kept]
            pixels = decode(record["image/encoded"])
            assert pixels.shape[:2] == (image.height, image.width)
            masks = [decode(m)[..., 0] for m in record["image/object/mask"]]
            for shape, box, mask in zip(kept, _boxes(record, image.width, image.height), masks, strict=True):
                if shape.kind == "mask":
                    assert shape.mask is not None
                    want = np.zeros((image.height, image.width), np.uint8)
                    left, top = int(shape.points[0]), int(shape.points[1])
                    want[top : top + shape.mask.shape[0], left : left + shape.mask.shape[1]] = shape.mask
                    ys, xs = np.nonzero(want)
                    extent = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
                else:
                    xs, ys = shape.points[0::2], shape.points[1::2]
                    extent = [min(xs), min(ys), max(xs), max(ys)]
                    polygon = (
                        [list(shape.points)] if shape.kind == "polygon" else [[xs[0], ys[0], xs[1], ys[0], xs[1], ys[1], xs[0], ys[1]]]
                    )
                    rle = coco_mask.merge(coco_mask.frPyObjects(polygon, image.height, image.width))
                    want = coco_mask.decode(rle)
                np.testing.assert_allclose(box, extent, atol=0.5)
                np.testing.assert_array_equal(mask, want)  # as pycocotools draws the same polygon
    assert sorted(seen) == sorted(by_name)


def test_a_task_export_is_split_train_with_its_images_in_images_or_beside_it(tmp_path: Path) -> None:
    task = [CvatImage("a.jpg", 32, 24, [Shape("box", "car", (1.0, 2.0, 20.0, 22.0))]), CvatImage("b.jpg", 32, 24)]
    xml = write_cvat(tmp_path / "task", task, LABELS)
    [index] = discover([xml.parent])
    assert (index.split, index.path) == ("train", str(xml))
    assert CVAT.folder_of(str(xml)) == str(xml.parent / "images")
    result = shardkit.build([xml], tmp_path / "out", workers=1, progress=False)
    assert result.records == 2
    [record] = [r for r in read_each(str(tmp_path / "out"), "train") if r["image/filename"] == b"a.jpg"]
    np.testing.assert_allclose(_boxes(record, 32, 24), [[1.0, 2.0, 20.0, 22.0]], atol=0.5)
    flat = tmp_path / "flat"  # the XML dropped beside its pictures, renamed for its split
    flat.mkdir()
    for name in ("a.jpg", "b.jpg"):
        (flat / name).write_bytes((xml.parent / "images" / name).read_bytes())
    (flat / "val.xml").write_text(xml.read_text())
    assert [(f.split, f.name) for f in discover([flat / "val.xml"])] == [("val", "val.xml")]
    assert shardkit.build([flat / "val.xml"], tmp_path / "flat-out", workers=1, progress=False).records == 2


def _one_image(tmp_path: Path, shape: str) -> Path:
    xml = write_cvat(tmp_path / "task", [CvatImage("a.jpg", 32, 24, [Shape("box", "car", (1.0, 2.0, 20.0, 22.0))])], LABELS)
    text = xml.read_text()
    xml.write_text(text.replace(text[text.index("    <box") : text.index("    </box>") + len("    </box>")], shape))
    return xml


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ('<box label="car" occluded="0" xtl="1.00" ytl="2.00" xbr="wide" ybr="22.00">\n    </box>', "xbr 'wide' is not a number"),
        ('<box label="bus" occluded="0" xtl="1" ytl="2" xbr="3" ybr="4">\n    </box>', "label 'bus' is not in <meta>'s labels"),
        (
            '<box label="car" occluded="0" xtl="1" ytl="2" xbr="3" ybr="4" rotation="15.00">\n    </box>',
            "rotated by 15 degrees: rotated boxes are not read (their extent is no box drawn)",
        ),
        ('<polygon label="car" occluded="0" points="1.00,2.00;3.00,4.00">\n    </polygon>', "points: a polygon needs three points or more"),
        ('<mask label="car" occluded="0" rle="3, 4" left="0" top="0" width="2" height="2">\n    </mask>', "rle: its runs add up to 7"),
    ],
)
def test_a_bad_shape_is_an_entry_error_at_its_own_line(tmp_path: Path, shape: str, reason: str) -> None:
    xml = _one_image(tmp_path, shape)
    line = next(n for n, text in enumerate(xml.read_text().splitlines(), start=1) if text.lstrip().startswith(shape[:6]))
    [error] = rows(xml)
    assert isinstance(error, EntryError)
    assert str(error).startswith(f"{xml}:{line}: image 0 (a.jpg): <{shape[1 : shape.index(' ')]} label=")
    assert reason in str(error)


def test_a_track_of_cvat_for_video_is_refused_in_one_line(tmp_path: Path) -> None:
    xml = tmp_path / "annotations.xml"
    track = '\n  <track id="0" label="car" source="manual">\n    <box frame="0" keyframe="1" outside="0" occluded="0" xtl="1" ytl="2" xbr="3" ybr="4" z_order="0">\n    </box>\n  </track>'  # noqa: E501
    xml.write_text(cvat_xml([], LABELS, tracks=track))
    line = xml.read_text().splitlines().index('  <track id="0" label="car" source="manual">') + 1
    with pytest.raises(ShardkitError, match=rf"^{xml}:{line}: <track> is CVAT for video: export the task as 'CVAT for images 1.1'$"):
        rows(xml)
