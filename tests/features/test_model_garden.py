"""shardkit's COCO instance-mask records (configs/coco-instance-masks.yaml) against TensorFlow
Model Garden's own converter (``create_coco_tf_record``, run in this process) on the same COCO
set, and read back by the decoder Model Garden's detection models read records with
(``TfExampleDecoder``): see tests/model_garden.py.

Every object Model Garden writes, shardkit writes too, with the same class, crowd flag, area and
mask and the same box, float32 for float32. Where the two differ, by design, the tests say so:

- a box past the right or bottom border: Model Garden drops it
  (``coco_annotations_to_lists``: ``x + width > image_width or y + height > image_height``,
  counted only in a log line), shardkit keeps it, clipped to the image;
- a box starting before the left or top border: Model Garden writes it as given (a negative
  ``xmin``), shardkit clipped to 0 (Model Garden's parsers clip boxes to the image before
  training anyway);
- an image whose objects Model Garden all drops gets no ``image/object/*`` keys from it, and
  empty lists from shardkit;
- ``image/format``: Model Garden writes ``jpg`` for every image, shardkit the format the bytes
  are (``jpeg``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from tests import model_garden
from tests.detection_sets import write_coco
from tests.paths import REPO

tf = pytest.importorskip("tensorflow")

CORNERS = ("xmin", "ymin", "xmax", "ymax")


@dataclasses.dataclass
class Written:
    """One object of a record, as its features hold it."""

    box: np.ndarray  # float32 xmin, ymin, xmax, ymax, normalized
    label: int
    text: bytes
    is_crowd: int
    area: np.float32
    mask: np.ndarray  # (H, W) uint8, the PNG decoded


def _records(out: Path) -> dict[str, tuple[bytes, Any]]:
    """Every record under ``out`` by its image/source_id: the serialized bytes and the parsed features."""
    found = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            data = raw.numpy()
            feature = tf.train.Example.FromString(data).features.feature
            found[feature["image/source_id"].bytes_list.value[0].decode()] = (data, feature)
    return found


def _objects(feature: Any) -> list[Written]:
    def values(key: str) -> list[Any]:
        if key not in feature:
            return []
        return list(getattr(feature[key], feature[key].WhichOneof("kind")).value)

    boxes = np.array([values(f"image/object/bbox/{k}") for k in CORNERS], dtype=np.float32).T.reshape(-1, 4)
    masks = [tf.io.decode_png(png, channels=1).numpy()[..., 0] for png in values("image/object/mask")]
    fields = zip(
        boxes, values("image/object/class/label"), values("image/object/class/text"), values("image/object/is_crowd"),
        values("image/object/area"), masks, strict=True,
    )  # fmt: skip
    return [Written(box, label, text, crowd, np.float32(area), mask) for box, label, text, crowd, area, mask in fields]


def _clipped(ann: dict[str, Any], width: int, height: int) -> np.ndarray:
    """The annotation's box clipped to the image and normalized, float32 as a record stores it."""
    x, y, w, h = ann["bbox"]
    return np.array([max(x, 0) / width, max(y, 0) / height, min(x + w, width) / width, min(y + h, height) / height], dtype=np.float32)


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"), edges=True)


@pytest.fixture(scope="module")
def document(coco: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(coco.read_text())
    return data


@pytest.fixture(scope="module")
def theirs(coco: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, Any]]:
    shard = model_garden.convert(coco, coco.parent.parent / "val2017", tmp_path_factory.mktemp("model-garden") / "val")
    return _records(shard.parent)


@pytest.fixture(scope="module")
def mine(coco: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, Any]]:
    out = tmp_path_factory.mktemp("shardkit") / "out"
    shardkit.build([coco], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, progress=False)
    return _records(out)


def _annotations(document: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    by_image: dict[int, list[dict[str, Any]]] = {image["id"]: [] for image in document["images"]}
    for ann in document["annotations"]:
        by_image[ann["image_id"]].append(ann)
    return by_image


def test_every_object_model_garden_writes_shardkit_writes_too(
    document: dict[str, Any], theirs: dict[str, tuple[bytes, Any]], mine: dict[str, tuple[bytes, Any]]
) -> None:
    assert sorted(mine) == sorted(theirs) == sorted(str(image["id"]) for image in document["images"])
    by_image = _annotations(document)
    compared, past_the_border, before_the_border, neither = [], [], [], []
    for image in document["images"]:
        width, height, anns = image["width"], image["height"], by_image[image["id"]]
        which = {np.float32(a["area"]): a for a in anns}  # the test set gives each annotation of an image its own area
        assert len(which) == len(anns)
        ours = {which[o.area]["id"]: o for o in _objects(mine[str(image["id"])][1])}
        their_objects = [(which[o.area]["id"], o) for o in _objects(theirs[str(image["id"])][1])]
        assert [i for i, _ in their_objects] == [i for i in ours if i in dict(their_objects)], "the objects' order differs"
        for ann_id, expected in their_objects:
            assert ann_id in ours, f"annotation {ann_id}: Model Garden writes it, shardkit does not"
            got = ours[ann_id]
            assert (got.label, got.text, got.is_crowd, got.area) == (expected.label, expected.text, expected.is_crowd, expected.area)
            np.testing.assert_array_equal(got.mask, expected.mask, err_msg=f"annotation {ann_id}")
            if not ((expected.box >= 0) & (expected.box <= 1)).all():
                before_the_border.append(ann_id)
            assert got.box.tolist() == np.clip(expected.box, 0, 1).tolist(), f"annotation {ann_id}"
            compared.append(ann_id)
        for ann_id in ours.keys() - dict(their_objects).keys():
            ann = next(a for a in anns if a["id"] == ann_id)
            assert ours[ann_id].box.tolist() == _clipped(ann, width, height).tolist()
            past_the_border.append(ann_id)
        neither += [a["id"] for a in anns if a["id"] not in ours]
    by_id = {a["id"]: a for a in document["annotations"]}

    def where(ids: list[int]) -> list[tuple[int, list[float], int]]:
        return sorted((by_id[i]["image_id"], by_id[i]["bbox"], by_id[i]["category_id"]) for i in ids)

    # Model Garden drops these, shardkit keeps them clipped: the cars 0.4 px past the right border
    # of images 102, 103 and 107 (107's only object) and the train 0.4 px past the bottom of 106.
    assert where(past_the_border) == [
        (102, [30.0, 10.0, 50.4, 20.0], 3),
        (103, [30.0, 10.0, 58.4, 20.0], 3),
        (106, [12.0, 28.0, 16.0, 20.4], 7),
        (107, [110.0, 8.0, 10.4, 10.0], 3),
    ]
    # Model Garden writes this box with xmin -0.3 / 112; shardkit clips it to 0.
    assert where(before_the_border) == [(106, [-0.3, 4.0, 10.3, 20.0], 1)]
    # Neither writes a box left with no area: wholly outside image 105, zero width in 106.
    assert where(neither) == [(105, [200.0, 10.0, 20.0, 10.0], 3), (106, [40.0, 30.0, 0.0, 5.0], 3)]
    assert len(compared) == 7  # 4 persons, the crowd of trains as an RLE, 106's person in two parts and car ending on the border
    assert "image/object/bbox/xmin" not in theirs["107"][1]  # all dropped: no object keys at all from Model Garden
    assert list(mine["107"][1]["image/object/bbox/xmax"].float_list.value) == [1.0]


def test_the_images_pass_through_as_model_garden_writes_them(
    theirs: dict[str, tuple[bytes, Any]], mine: dict[str, tuple[bytes, Any]]
) -> None:
    for source_id, (_, expected) in theirs.items():
        got = mine[source_id][1]
        for key in ("image/encoded", "image/key/sha256", "image/filename", "image/height", "image/width"):
            assert got[key] == expected[key], key
        assert (got["image/format"].bytes_list.value, expected["image/format"].bytes_list.value) == ([b"jpeg"], [b"jpg"])


def test_model_garden_decodes_every_record(
    document: dict[str, Any], theirs: dict[str, tuple[bytes, Any]], mine: dict[str, tuple[bytes, Any]]
) -> None:
    decoder = model_garden.decoder(include_mask=True)
    sizes = {str(image["id"]): (image["height"], image["width"]) for image in document["images"]}
    same = 0
    for source_id, (data, feature) in mine.items():
        decoded = {k: v.numpy() for k, v in decoder.decode(tf.constant(data)).items()}
        objects = _objects(feature)
        n, (height, width) = len(objects), sizes[source_id]
        assert decoded["source_id"] == source_id.encode()
        assert decoded["image"].shape == (height, width, 3) and (decoded["height"], decoded["width"]) == (height, width)
        boxes = np.array([o.box for o in objects], dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(decoded["groundtruth_boxes"], boxes[:, [1, 0, 3, 2]])  # ymin, xmin, ymax, xmax, normalized
        assert decoded["groundtruth_classes"].tolist() == [o.label for o in objects]
        assert decoded["groundtruth_is_crowd"].tolist() == [bool(o.is_crowd) for o in objects]
        assert decoded["groundtruth_area"].tolist() == [o.area for o in objects]
        masks = decoded["groundtruth_instance_masks"]
        assert masks.shape == (n, height, width) and masks.dtype == np.float32
        np.testing.assert_array_equal(masks, np.array([o.mask for o in objects], dtype=np.float32).reshape(n, height, width))
        # Where Model Garden keeps every object as shardkit writes it, its decoder cannot tell the records apart.
        expected = {k: v.numpy() for k, v in decoder.decode(tf.constant(theirs[source_id][0])).items()}
        if expected["groundtruth_boxes"].shape == boxes.shape and (expected["groundtruth_boxes"] == decoded["groundtruth_boxes"]).all():
            for key in expected:
                if key != "groundtruth_instance_masks_png":  # the same pixels, compressed differently
                    np.testing.assert_array_equal(decoded[key], expected[key], err_msg=f"{source_id}: {key}")
            same += 1
    assert same == 4  # 100 and 104 (no objects), 101 and 105 (a person each; 105's other box is dropped by both)
