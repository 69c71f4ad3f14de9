"""Objects read back: ``ShardReader`` (NumPy arrays) and TFDS (a Sequence of the OD API's lists),
each compared with TensorFlow's own parse and decode of the shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shardkit.reader import ShardReader
from tests.tfread import shard_files, spec_from_manifest

tf = pytest.importorskip("tensorflow")

P = "image/object"
COCO_IDS = {1: 0, 3: 1, 7: 2, 9: 3}  # tests.detection_sets' category ids -> places in the class list


def tf_records(out: Path, split: str) -> dict[bytes, dict[str, Any]]:
    """Every record of a split by its image/filename, each parsed alone by TensorFlow (lists at their own lengths)."""
    spec = spec_from_manifest(str(out))
    found = {}
    for data in tf.data.TFRecordDataset(shard_files(str(out), split)):
        parsed = tf.io.parse_single_example(data, spec)
        record = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()}
        found[record["image/filename"]] = record
    return found


def expected(record: dict[str, Any], ids: dict[int, int] = COCO_IDS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A record's boxes (ymin, xmin, ymax, xmax), class places and masks, from TensorFlow's parse and decode."""
    boxes = np.stack([record[f"{P}/bbox/{k}"] for k in ("ymin", "xmin", "ymax", "xmax")], axis=1).astype(np.float32)
    classes = np.array([ids[int(v)] for v in record[f"{P}/class/label"]], dtype=np.int64)
    height, width = int(record["image/height"]), int(record["image/width"])
    masks = [tf.io.decode_png(png, channels=1).numpy()[..., 0] for png in record[f"{P}/mask"]]
    return boxes.reshape(-1, 4), classes, np.stack(masks) if masks else np.zeros((0, height, width), np.uint8)


@pytest.fixture(scope="module")
def coco_records(coco_shards: Path) -> dict[bytes, dict[str, Any]]:
    return tf_records(coco_shards, "val")


def test_shard_reader_gives_numpy_arrays(coco_shards: Path, coco_records: dict[bytes, dict[str, Any]]) -> None:
    plain, decoded = ShardReader(str(coco_shards), "val"), ShardReader(str(coco_shards), "val", decode_images=True)
    for i in range(len(plain)):
        boxes, classes, masks = expected(coco_records[plain[i]["image/filename"].encode()])
        got = decoded[i]
        assert got[f"{P}/boxes"].dtype == np.float32 and got[f"{P}/boxes"].shape == (len(classes), 4)
        np.testing.assert_array_equal(got[f"{P}/boxes"], boxes)
        np.testing.assert_array_equal(got[f"{P}/classes"], classes)
        assert got[f"{P}/mask"].dtype == np.uint8
        np.testing.assert_array_equal(got[f"{P}/mask"], masks)  # (0, H, W) where there are no objects
        assert plain[i][f"{P}/mask"] == list(coco_records[plain[i]["image/filename"].encode()][f"{P}/mask"])  # PNGs, undecoded


def test_tfds_reads_the_objects_as_a_sequence(coco_shards: Path, coco_records: dict[bytes, dict[str, Any]]) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(str(coco_shards))
    objects = builder.info.features[P]
    assert isinstance(objects, tfds.features.Sequence)
    assert set(objects.feature.keys()) == {"bbox", "class", "is_crowd", "area", "mask", "keypoint"}
    seen = 0
    for x in tfds.as_numpy(builder.as_dataset(split="val", shuffle_files=False)):
        record = coco_records[x["image/filename"]]
        got = x[P]
        for corner in ("xmin", "ymin", "xmax", "ymax"):
            np.testing.assert_array_equal(got["bbox"][corner], record[f"{P}/bbox/{corner}"])
        np.testing.assert_array_equal(got["class"]["label"], record[f"{P}/class/label"])
        assert list(got["class"]["text"]) == list(record[f"{P}/class/text"])
        np.testing.assert_array_equal(got["is_crowd"], record[f"{P}/is_crowd"])
        np.testing.assert_array_equal(got["area"], record[f"{P}/area"])
        for name in ("x", "y", "visibility"):  # 3 keypoints per object (tests.detection_sets.CATEGORIES)
            np.testing.assert_array_equal(got["keypoint"][name], record[f"{P}/keypoint/{name}"].reshape(-1, 3))
        _, _, masks = expected(record)
        if len(masks):
            np.testing.assert_array_equal(got["mask"][..., 0], masks)
        else:
            assert got["mask"].shape[0] == 0
        seen += 1
    assert seen == 6
    assert not list(coco_shards.glob("*.labels.txt"))  # no ClassLabel reads them: the names are in each record and label_map.pbtxt
