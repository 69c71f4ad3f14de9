"""Objects read back: ``shardkit.tfdata`` (boxes, classes, masks; ragged batches and padded ones),
``ShardReader`` (NumPy arrays) and TFDS (a Sequence of the OD API's lists), each compared with
TensorFlow's own parse and decode of the shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
import shardkit.tfdata
from shardkit import demo
from shardkit.errors import UsageError
from shardkit.reader import ShardReader
from tests.paths import REPO
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


@pytest.fixture(scope="module")
def same_size(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A COCO set of 64x48 images, 1-5 objects each (demo.make_detection), built with masks: images that batch."""
    root = demo.make_detection(tmp_path_factory.mktemp("same-size"), train=6, val=1, width=64, height=48)
    out = tmp_path_factory.mktemp("same-size-out") / "out"
    annotations = root / "annotations" / "instances_train2017.json"
    shardkit.build([annotations], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, progress=False)
    return out


def test_tfdata_gives_boxes_classes_and_masks_per_record(coco_shards: Path, coco_records: dict[bytes, dict[str, Any]]) -> None:
    seen = 0
    for x in shardkit.tfdata.load(str(coco_shards), "val"):
        boxes, classes, masks = expected(coco_records[x["image/filename"].numpy()])
        np.testing.assert_array_equal(x[f"{P}/boxes"].numpy(), boxes)
        np.testing.assert_array_equal(x[f"{P}/classes"].numpy(), classes)
        np.testing.assert_array_equal(x[f"{P}/mask"].numpy(), masks)  # (N, H, W); (0, H, W) for an image with no objects
        assert x[f"{P}/mask"].dtype == tf.uint8 and x[f"{P}/boxes"].shape == (len(classes), 4)
        seen += 1
    assert seen == 6


def test_parsed_singly_or_in_batches_the_records_are_the_same(coco_shards: Path) -> None:
    def values(ds: Any) -> list[tuple[bytes, list[float], list[int]]]:
        return [(x["image/filename"].numpy(), x[f"{P}/boxes"].numpy().ravel().tolist(), x[f"{P}/classes"].numpy().tolist()) for x in ds]

    batched = values(shardkit.tfdata.load(str(coco_shards), "val", decode_images=False))
    assert values(shardkit.tfdata.load(str(coco_shards), "val", decode_images=False, parse="single")) == batched
    assert values(shardkit.tfdata.load(str(coco_shards), "val")) == batched


def test_batches_are_ragged_or_padded_to_max_objects(coco_shards: Path, coco_records: dict[bytes, dict[str, Any]]) -> None:
    for parse in ("batched", "single"):
        batch = next(iter(shardkit.tfdata.load(str(coco_shards), "val", decode_images=False, batch_size=6, parse=parse)))
        assert isinstance(batch[f"{P}/boxes"], tf.RaggedTensor) and batch[f"{P}/boxes"].shape.as_list() == [6, None, 4]
        for i, name in enumerate(batch["image/filename"].numpy()):
            boxes, classes, _ = expected(coco_records[name])
            np.testing.assert_array_equal(batch[f"{P}/boxes"][i].numpy(), boxes)
            np.testing.assert_array_equal(batch[f"{P}/classes"][i].numpy(), classes)
    padded = next(iter(shardkit.tfdata.load(str(coco_shards), "val", decode_images=False, batch_size=6, max_objects=4)))
    assert padded[f"{P}/boxes"].shape == (6, 4, 4) and padded[f"{P}/classes"].shape == (6, 4)
    for i, name in enumerate(padded["image/filename"].numpy()):
        boxes, classes, _ = expected(coco_records[name])
        n = len(classes)
        np.testing.assert_array_equal(padded[f"{P}/boxes"][i, :n].numpy(), boxes)
        assert (padded[f"{P}/boxes"][i, n:].numpy() == -1).all() and (padded[f"{P}/classes"][i, n:].numpy() == -1).all()


def test_decoded_images_and_masks_batch_densely_or_raggedly(same_size: Path) -> None:
    records = tf_records(same_size, "train")
    ids = {1: 0, 3: 1}  # demo.DETECTION_CLASSES: circle 1, box 3
    ragged = next(iter(shardkit.tfdata.load(str(same_size), "train", batch_size=6)))
    assert ragged["image/encoded"].shape == (6, 48, 64, 3)
    assert ragged[f"{P}/mask"].shape.as_list() == [6, None, 48, 64] and ragged[f"{P}/bbox/xmin"].shape.as_list() == [6, None]
    dense = next(iter(shardkit.tfdata.load(str(same_size), "train", batch_size=6, max_objects=5)))
    assert dense[f"{P}/mask"].shape == (6, 5, 48, 64) and dense[f"{P}/boxes"].shape == (6, 5, 4)
    for i, name in enumerate(dense["image/filename"].numpy()):
        boxes, classes, masks = expected(records[name], ids)
        n = len(classes)
        np.testing.assert_array_equal(ragged[f"{P}/mask"][i].numpy(), masks)
        np.testing.assert_array_equal(dense[f"{P}/mask"][i, :n].numpy(), masks)
        assert not dense[f"{P}/mask"][i, n:].numpy().any()
        np.testing.assert_array_equal(dense[f"{P}/boxes"][i, :n].numpy(), boxes)
        np.testing.assert_array_equal(dense[f"{P}/classes"][i, :n].numpy(), classes)


def test_max_objects_is_checked(coco_shards: Path, seg_data: Path, tmp_path: Path) -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than max_objects=2 objects"):
        list(shardkit.tfdata.load(str(coco_shards), "val", max_objects=2))
    with pytest.raises(UsageError, match="max_objects must be at least 1"):
        shardkit.tfdata.load(str(coco_shards), "val", max_objects=0)
    shardkit.build([seg_data / "val.txt"], tmp_path / "seg", workers=1, progress=False)
    with pytest.raises(UsageError, match="has no objects feature to pad"):
        shardkit.tfdata.load(str(tmp_path / "seg"), "val", max_objects=3)


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


def test_images_of_different_sizes_need_image_size_to_batch(coco_shards: Path) -> None:
    """coco_shards' images are 64 to 104 px wide: a plain batch of them cannot stack."""
    with pytest.raises(UsageError) as refused:
        shardkit.tfdata.load(str(coco_shards), "val", batch_size=6)
    assert str(refused.value) == (
        f"{coco_shards}: the images of 'image/encoded' differ in size (height 48 to 48, width 64 to 104), so they do not batch: "
        "pass image_size=(H, W) to resize and pad each one (boxes, keypoints and masks moved to match), or batch_size=None and resize them "
        "in your own map"
    )
    assert len(list(shardkit.tfdata.load(str(coco_shards), "val", batch_size=1))) == 6  # one a batch: nothing to stack
    with pytest.raises(UsageError, match=r"^image_size must be \(height, width\), two positive integers, not \(64, 0\)$"):
        shardkit.tfdata.load(str(coco_shards), "val", image_size=(64, 0))
    with pytest.raises(UsageError, match="image_size resizes decoded images: it cannot be used with decode_images=False"):
        shardkit.tfdata.load(str(coco_shards), "val", image_size=(64, 64), decode_images=False)


def test_image_size_resizes_and_pads_as_model_garden_with_boxes_and_masks_moved(
    coco_shards: Path, coco_records: dict[bytes, dict[str, Any]]
) -> None:
    from tests import model_garden

    ops = model_garden.preprocess_ops()
    # 48 px high, 64 to 104 wide: the narrow images fill the height (scale 1.25), the wide ones the width
    size = height, width = 60, 100
    batches = list(shardkit.tfdata.load(str(coco_shards), "val", batch_size=4, image_size=size))
    assert [b["image/encoded"].shape for b in batches] == [(4, height, width, 3), (2, height, width, 3)]
    assert batches[0][f"{P}/mask"].shape.as_list() == [4, None, height, width]
    seen = 0
    for batch in batches:
        for i, name in enumerate(batch["image/filename"].numpy()):
            record = coco_records[name]
            boxes, _, masks = expected(record)
            image = tf.io.decode_image(record["image/encoded"], channels=3, expand_animations=False)  # as load decodes raw images
            h, w = int(record["image/height"]), int(record["image/width"])
            # Model Garden's own resize: scaled to fit, bilinear, padded bottom and right with zeros
            want, info = ops.resize_and_crop_image(image, size, size)
            got = batch["image/encoded"][i].numpy()
            np.testing.assert_array_equal(got, np.clip(np.round(want.numpy()), 0, 255).astype(np.uint8))
            scale = info[2].numpy()  # scaled / original, per axis
            scaled = np.round(np.array([h, w]) * scale).astype(int)
            assert not got[scaled[0] :].any() and not got[:, scaled[1] :].any()  # the padding is zeros
            # Boxes: the same pixels of the original, scaled (within 0.5 px), and as Model Garden moves them
            new = batch[f"{P}/boxes"][i].numpy() * [height, width, height, width]
            np.testing.assert_allclose(new / np.tile(scale, 2), boxes * [h, w, h, w], atol=0.5)
            garden = ops.resize_and_crop_boxes(tf.constant(boxes * [h, w, h, w], tf.float32), info[2], size, info[3]).numpy()
            np.testing.assert_allclose(new, garden, atol=1e-3)
            corners = np.stack([batch[f"{P}/bbox/{k}"][i].numpy() for k in ("ymin", "xmin", "ymax", "xmax")], axis=-1)
            np.testing.assert_array_equal(corners.reshape(-1, 4), batch[f"{P}/boxes"][i].numpy())
            # Keypoints: the same pixels of the original, scaled (within 0.5 px); visibility as stored
            points = np.stack([batch[f"{P}/keypoint/{k}"][i].numpy() * n for k, n in (("x", width), ("y", height))], axis=-1)
            stored = np.stack([record[f"{P}/keypoint/x"] * w, record[f"{P}/keypoint/y"] * h], axis=-1)
            assert len(stored) == 3 * len(boxes) and stored.any() == (len(boxes) > 0)  # 3 per object, the person's labelled
            np.testing.assert_allclose(points / scale[::-1], stored, atol=0.5)
            np.testing.assert_array_equal(batch[f"{P}/keypoint/visibility"][i].numpy(), record[f"{P}/keypoint/visibility"])
            # Masks: Model Garden's nearest-neighbour resize and padding, on the same pixels as the image
            got_masks = batch[f"{P}/mask"][i].numpy()
            assert got_masks.shape == (len(masks), height, width)
            if len(masks):
                garden_masks = ops.resize_and_crop_masks(tf.constant(masks[..., None]), info[2], size, info[3]).numpy()[..., 0]
                np.testing.assert_array_equal(got_masks, garden_masks)
            seen += 1
    assert seen == 6


@pytest.mark.slow  # two tf.data pipelines traced: about 4 s
def test_image_size_with_max_objects_pads_the_resized_objects(coco_shards: Path) -> None:
    size = height, width = 60, 100
    ragged = next(iter(shardkit.tfdata.load(str(coco_shards), "val", batch_size=6, image_size=size)))
    dense = next(iter(shardkit.tfdata.load(str(coco_shards), "val", batch_size=6, image_size=size, max_objects=4, parse="single")))
    assert dense[f"{P}/mask"].shape == (6, 4, height, width) and dense[f"{P}/boxes"].shape == (6, 4, 4)
    names = list(ragged["image/filename"].numpy())
    for i, name in enumerate(dense["image/filename"].numpy()):
        j = names.index(name)
        n = len(ragged[f"{P}/classes"][j])
        np.testing.assert_array_equal(dense[f"{P}/boxes"][i, :n].numpy(), ragged[f"{P}/boxes"][j].numpy())
        np.testing.assert_array_equal(dense[f"{P}/mask"][i, :n].numpy(), ragged[f"{P}/mask"][j].numpy())
        assert (dense[f"{P}/boxes"][i, n:].numpy() == -1).all() and not dense[f"{P}/mask"][i, n:].numpy().any()


def test_image_size_refuses_a_list_under_the_objects_it_does_not_know_how_to_move(coco_shards: Path) -> None:
    """A build from a later shardkit may hold a position this one does not know: refused, not left unmoved."""
    from shardkit.features import objects
    from shardkit.read import tf_objects, tf_resize

    spec = shardkit.tfdata.feature_spec(shardkit.tfdata.read_manifest(str(coco_shards)))
    lists = tf_objects.lists_of(shardkit.tfdata.read_manifest(str(coco_shards)), spec)
    (one,) = lists
    # Every list the objects kind writes is moved by a resize or holds no position: none is left to chance
    placed = {*one.corners, *(one.points or ()), one.masks, *one.unplaced}
    assert {f"{P}/{sub}" for sub, _ in objects.FIELDS} == placed
    tf_resize.check_movable(str(coco_shards), spec, lists)  # the build's own lists: all known
    with pytest.raises(UsageError) as refused:
        tf_resize.check_movable(str(coco_shards), {**spec, f"{P}/center/x": tf.io.RaggedFeature(tf.float32)}, lists)
    assert str(refused.value) == (
        f"{coco_shards}: image_size cannot move '{P}/center/x' with the resized image (this shardkit does not know what it holds): "
        "load without image_size and resize in your own map"
    )
