"""The objects kind: a COCO set built into the records TensorFlow's detection models read, with
TensorFlow reading them back, pycocotools drawing the masks, and the manifest counting objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from pycocotools import mask as coco_mask

import shardkit
from shardkit.cli import main
from tests.detection_sets import CATEGORIES, write_coco
from tests.paths import REPO

tf = pytest.importorskip("tensorflow")


def _records(out: Path) -> dict[str, Any]:
    """Every record of OUT by its image/filename, as TensorFlow parses it."""
    found = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            example = tf.train.Example.FromString(raw.numpy())
            found[example.features.feature["image/filename"].bytes_list.value[0].decode()] = example.features.feature
    return found


def _floats(feature: Any, key: str) -> list[float]:
    return list(feature[key].float_list.value)


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"))


@pytest.fixture(scope="module")
def built(coco: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    shardkit.build([coco], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1)
    return out


def test_every_image_is_a_record_with_its_boxes_clipped_and_normalized(coco: Path, built: Path) -> None:
    document = json.loads(coco.read_text())
    records = _records(built)
    assert sorted(records) == sorted(image["file_name"] for image in document["images"])
    by_image: dict[int, list[dict[str, Any]]] = {}
    for ann in document["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)
    for image in document["images"]:
        feature = records[image["file_name"]]
        width, height = image["width"], image["height"]
        assert feature["image/width"].int64_list.value == [width] and feature["image/height"].int64_list.value == [height]
        assert feature["image/source_id"].bytes_list.value == [str(image["id"]).encode()]
        assert feature["image/format"].bytes_list.value == [b"jpeg"]
        kept = [a for a in by_image.get(image["id"], []) if a["bbox"][0] < width]  # the box wholly outside is dropped
        want = np.array(
            [[x / width, y / height, min(x + w, width) / width, min(y + h, height) / height] for x, y, w, h in (a["bbox"] for a in kept)]
        )
        got = np.array([_floats(feature, f"image/object/bbox/{k}") for k in ("xmin", "ymin", "xmax", "ymax")]).T
        np.testing.assert_allclose(got.reshape(-1, 4), want.reshape(-1, 4).astype(np.float32), rtol=0, atol=0)
        assert list(feature["image/object/class/label"].int64_list.value) == [a["category_id"] for a in kept]
        names = {c["id"]: c["name"].encode() for c in CATEGORIES}
        assert list(feature["image/object/class/text"].bytes_list.value) == [names[a["category_id"]] for a in kept]
        assert list(feature["image/object/is_crowd"].int64_list.value) == [a["iscrowd"] for a in kept]
        assert _floats(feature, "image/object/area") == [np.float32(a["area"]) for a in kept]


def test_masks_are_pycocotools_drawings_as_zero_one_pngs(coco: Path, built: Path) -> None:
    document = json.loads(coco.read_text())
    records = _records(built)
    for image in document["images"]:
        anns = [a for a in document["annotations"] if a["image_id"] == image["id"] and a["bbox"][0] < image["width"]]
        pngs = records[image["file_name"]]["image/object/mask"].bytes_list.value
        assert len(pngs) == len(anns)
        for png, ann in zip(pngs, anns, strict=True):
            got = tf.io.decode_png(png).numpy()[..., 0]
            segmentation = ann["segmentation"]
            h, w = image["height"], image["width"]
            rle = (
                coco_mask.merge(coco_mask.frPyObjects(segmentation, h, w))
                if isinstance(segmentation, list)
                else coco_mask.frPyObjects(segmentation, h, w)
            )
            np.testing.assert_array_equal(got, coco_mask.decode(rle))
            assert set(np.unique(got)) <= {0, 1}


def test_keypoints_have_the_same_count_for_every_object(coco: Path, built: Path) -> None:
    records = _records(built)
    feature = records["000000000003.jpg"]  # a person (3 keypoints), a car and a crowd (none: invisible ones)
    visibility = list(feature["image/object/keypoint/visibility"].int64_list.value)
    assert visibility == [2, 1, 0] + [0, 0, 0] * 2
    np.testing.assert_allclose(_floats(feature, "image/object/keypoint/x")[:2], [10 / 88, 14 / 88], rtol=1e-6)
    assert records["000000000000.jpg"]["image/object/keypoint/x"].float_list.value == []  # no objects: the keys, empty


def test_label_map_and_counts(built: Path) -> None:
    text = (built / "label_map.pbtxt").read_text()
    assert text.startswith("item {\n  id: 1\n  name: 'person'\n}\n")
    assert "id: 9\n  name: 'boat'" in text  # a category with no instance is still in the map
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["classes"]["image/object"] == ["person", "car", "train", "boat"]
    counts = manifest["splits"]["val"]["labels"]
    assert counts["image/object"] == {"person": 4, "car": 2, "train": 1}
    assert counts["image/object/dropped"] == {"car": 1}  # the box wholly outside image 5, counted, never silent


def test_verify_deep_passes(built: Path) -> None:
    report = shardkit.verify([str(built)], deep=True)
    assert report.ok, report


def test_workers_give_the_same_bytes(coco: Path, built: Path, tmp_path: Path) -> None:
    shardkit.build([coco], tmp_path, config=REPO / "configs" / "coco-instance-masks.yaml", workers=2)
    for shard in built.glob("*.tfrecord"):
        assert (tmp_path / shard.name).read_bytes() == shard.read_bytes()


def test_a_size_that_disagrees_with_the_image_is_one_line(coco: Path, tmp_path: Path) -> None:
    document = json.loads(coco.read_text())
    document["images"][2]["width"], document["images"][2]["height"] = document["images"][2]["height"], document["images"][2]["width"]
    bad = coco.parent / "instances_rotated.json"
    bad.write_text(json.dumps(document))
    with pytest.raises(shardkit.errors.ShardkitError, match=r"the annotation says the image is 48x80, but it is 80x48 \(EXIF-rotated"):
        shardkit.build([bad], tmp_path / "out", workers=1, image_root=coco.parent.parent / "val2017")


def test_the_demo_detection_set_builds_with_the_masks_pycocotools_draws(tmp_path: Path) -> None:
    root = shardkit.demo.make_detection(tmp_path / "coco", train=4, val=2)
    shardkit.build([root / "annotations"], tmp_path / "out", config=REPO / "configs" / "coco-instance-masks.yaml", workers=1)
    document = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    records = _records(tmp_path / "out")
    for image in document["images"]:
        anns = [a for a in document["annotations"] if a["image_id"] == image["id"]]
        pngs = records[image["file_name"]]["image/object/mask"].bytes_list.value
        areas = [int(tf.io.decode_png(png).numpy().sum()) for png in pngs]
        drawn = [
            int(coco_mask.area(coco_mask.merge(coco_mask.frPyObjects(a["segmentation"], image["height"], image["width"])))) for a in anns
        ]
        assert areas == drawn and len(areas) >= 1


def test_the_summary_says_how_many_objects_were_dropped(coco: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["build", str(coco), "-o", str(tmp_path / "out"), "-w", "1"])
    assert result.exit_code == 0, result.output
    assert (
        "dropped 1 object left with no area inside its image: counted by class under image/object/dropped in the manifest\n"
        in result.output
    )


def test_an_annotation_without_area_gets_its_mask_area_not_zero(coco: Path, tmp_path: Path) -> None:
    document = json.loads(coco.read_text())
    for ann in document["annotations"]:
        if ann["image_id"] == 101:  # the person: its polygon is its box
            del ann["area"]
    bare = coco.parent / "instances_noarea.json"
    bare.write_text(json.dumps(document))
    out = tmp_path / "out"
    shardkit.build([bare], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, image_root=coco.parent.parent / "val2017")
    feature = _records(out)["000000000001.jpg"]
    mask = tf.io.decode_png(feature["image/object/mask"].bytes_list.value[0]).numpy()
    assert _floats(feature, "image/object/area") == [float(mask.sum())] and mask.sum() > 0


def test_label_balance_weighs_the_objects_not_the_dropped_ones(built: Path) -> None:
    report = shardkit.inspect([str(built)])
    balanced = {row["key"] for output in report["outputs"] for row in output["label_balance"]}
    assert "image/object" in balanced and "image/object/dropped" not in balanced


def test_a_boxes_only_plan_leaves_the_polygons_out(coco: Path, built: Path, tmp_path: Path) -> None:
    shardkit.build([coco], tmp_path / "boxes", workers=1)

    def plans(out: Path) -> bytes:
        return b"".join(p.read_bytes() for p in (out / ".shardkit").glob("plan-*/*") if p.is_file())

    assert b"segmentation" not in plans(tmp_path / "boxes")  # never read again without masks
    assert b"segmentation" in plans(built)  # the masks are drawn from them


def test_preview_finds_the_images_under_image_root_as_the_build_does(coco: Path, tmp_path: Path) -> None:
    moved = tmp_path / "annotations.json"
    moved.write_text(coco.read_text())  # outside the standard layout: the images are found with --image-root only
    with pytest.raises(shardkit.errors.ShardkitError, match="file not found"):
        shardkit.preview([moved], count=2, copies=0)
    picture = shardkit.preview([moved], count=2, copies=0, image_root=coco.parent.parent / "val2017")
    assert picture.width > 0
