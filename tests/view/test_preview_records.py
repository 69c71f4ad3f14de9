"""``shardkit preview`` after a build: sampled records on a sheet, and the label balance picture."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.errors import ShardkitError
from shardkit.view import sheet
from shardkit.view.balance import balance_sheet, label_counts
from shardkit.view.records import record_sheet, record_tiles, sample_records
from tests import tfread


@pytest.fixture(scope="module")
def seg_out(seg_data: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("preview-seg") / "out"
    shardkit.build([seg_data], out, records_per_shard=10, workers=1, progress=False)
    return str(out)


@pytest.fixture(scope="module")
def cls_out(cls_data: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("preview-cls") / "out"
    shardkit.build(out=out, from_folder=cls_data, records_per_shard=5, workers=1, progress=False)
    return str(out)


def _jpeg(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A TFRecord file written by TensorFlow, TFDS-style keys: a JPEG, a PNG mask, an int label;
    the last record's image is large (a thumbnail is drawn)."""
    import tensorflow as tf

    path = str(tmp_path_factory.mktemp("foreign") / "photos.tfrecord")
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(10):
            height, width = (900, 1200) if i == 9 else (30, 40)
            image = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
            mask = np.zeros((height, width), np.uint8)
            mask[: height // 2, : width // 2] = 1 + i % 3
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_jpeg(image)])),
                "image/segmentation/class/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(mask)])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
                "image/filename": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"photo_{i}.jpg".encode()])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def _picked(out: str, seed: int, count: int = 6) -> list[tuple[str, int]]:
    return [(r.file, r.number) for r in sample_records([out], count=count, seed=seed).records]


def test_the_seed_fixes_the_sample(cls_out: str) -> None:
    assert _picked(cls_out, 3) == _picked(cls_out, 3)
    assert _picked(cls_out, 3) != _picked(cls_out, 4)
    sample = sample_records([cls_out], count=100, seed=0)
    assert len(sample.records) == sample.total == 18  # all of train, none twice
    assert len({(r.file, r.number) for r in sample.records}) == 18


def test_tiles_are_the_pixels_tensorflow_decodes(seg_out: str) -> None:
    import tensorflow as tf

    drawn = record_tiles([seg_out], split="val", count=5, seed=1)
    assert "[val]: 5 of 8 records, seed 1" in drawn.sample.description
    for tile, record in zip(drawn.tiles, drawn.sample.records, strict=True):
        raw = next(iter(tf.data.TFRecordDataset([record.file]).skip(record.number).take(1))).numpy()
        parsed = tf.io.parse_single_example(raw, tfread.spec_from_manifest(seg_out))
        assert parsed["source_id"].numpy().decode() == tile.caption[0]
        np.testing.assert_array_equal(tile.image, tfread.decode(parsed["image"].numpy()))
        assert tile.mask is not None
        np.testing.assert_array_equal(tile.mask, tfread.decode(parsed["mask"].numpy())[:, :, 0])


def test_masks_are_drawn_where_they_are(seg_out: str) -> None:
    tile = record_tiles([seg_out], count=1, seed=2).tiles[0]
    assert tile.mask is not None and tile.mask.any()
    picture = np.asarray(sheet.render([[tile]]))  # at (GAP, GAP), 64x48 enlarged k times (nearest neighbour)
    height, width = tile.mask.shape
    k = max(1, -(-sheet.MIN_TILE_HEIGHT // height))
    drawn = picture[sheet.GAP : sheet.GAP + height * k : k, sheet.GAP : sheet.GAP + width * k : k].astype(np.float32)
    image = tile.image.astype(np.float32)
    for value in np.unique(tile.mask):
        where = tile.mask == value
        if value == 0:
            np.testing.assert_array_equal(drawn[where], image[where])
        else:
            blended = (1 - sheet.OVERLAY_ALPHA) * image[where] + sheet.OVERLAY_ALPHA * np.array(sheet.colour(int(value)))
            assert np.abs(drawn[where] - blended).max() <= 1


def test_classification_captions_name_the_class(cls_out: str) -> None:
    drawn = record_tiles([cls_out], count=8, seed=5)
    for tile in drawn.tiles:
        source, label, where = tile.caption
        assert source.split("/")[1] == label  # train/<class>/<file>: the class name, not its number
        assert where.startswith("shard ")


def test_a_foreign_file(foreign: str) -> None:
    import tensorflow as tf

    drawn = record_tiles([foreign], count=10, seed=0)
    assert [r.number for r in drawn.sample.records] == list(range(10))
    for tile, record in zip(drawn.tiles, drawn.sample.records, strict=True):
        assert tile.caption[0] == f"photo_{record.number}.jpg"
        assert tile.caption[1] == f"label {record.number % 3}"
        assert tile.mask is not None and set(np.unique(tile.mask)) == {0, 1 + record.number % 3}
        assert tile.mask.shape == tile.image.shape[:2]
    big = drawn.tiles[9]
    assert max(big.image.shape[:2]) == 512  # a thumbnail, not 1200x900
    raw = next(iter(tf.data.TFRecordDataset([foreign]).take(1))).numpy()
    jpeg = tf.io.parse_single_example(raw, {"image/encoded": tf.io.FixedLenFeature([], tf.string)})["image/encoded"]
    np.testing.assert_array_equal(drawn.tiles[0].image, tfread.decode(jpeg.numpy()))
    picture = record_sheet([foreign], count=10)
    assert picture.width <= 2000


def test_gzip_shards_without_indexes_are_walked(seg_data: Path, seg_out: str, tmp_path: Path) -> None:
    out = tmp_path / "gz"
    shardkit.build([seg_data], out, records_per_shard=10, compression="gzip", workers=1, progress=False)
    walked = record_tiles([str(out)], count=4, seed=0)
    indexed = record_tiles([seg_out], count=4, seed=0)  # the same build, uncompressed: read through .idx
    assert [t.caption for t in walked.tiles] == [t.caption for t in indexed.tiles]
    for a, b in zip(walked.tiles, indexed.tiles, strict=True):
        assert a.mask is not None and b.mask is not None
        np.testing.assert_array_equal(a.image, b.image)
        np.testing.assert_array_equal(a.mask, b.mask)


def test_sheets_stay_a_sensible_size(cls_out: str) -> None:
    picture = record_sheet([cls_out], count=64, seed=0)
    assert isinstance(picture, Image.Image) and picture.width <= 2000


def test_bad_requests_say_why(cls_out: str, seg_out: str) -> None:
    with pytest.raises(ShardkitError, match=r"no split 'test' \(splits: train, val\)"):
        record_sheet([cls_out], split="test")
    with pytest.raises(ShardkitError, match="a sheet shows 1 to 256 records"):
        record_sheet([cls_out], count=0)
    with pytest.raises(ShardkitError, match="no label counts to draw: the manifest counts no labels"):
        balance_sheet([seg_out])


def test_label_balance_picture(cls_out: str, foreign: str) -> None:
    counts = label_counts([cls_out])
    assert [(c.split, c.key, c.totals) for c in counts] == [
        ("train", "label", {"cat": 6, "dog": 6, "fox": 6}),
        ("val", "label", {"cat": 1, "dog": 1, "fox": 1}),
    ]
    assert len(counts[0].shards) == 4 and sum(sum(t.values()) for _, t in counts[0].shards) == 18
    picture = balance_sheet([cls_out])
    assert isinstance(picture, Image.Image) and picture.width <= 2000
    assert sheet.colour(1) in {c for _, c in picture.getcolors(1 << 16) or []}  # the first class's bar
    [counted] = label_counts([foreign])  # no manifest: counted from the records
    assert (counted.key, counted.totals) == ("image/class/label", {"0": 4, "1": 3, "2": 3})
    balance_sheet([foreign])


def test_no_tensorflow_for_either_picture(cls_out: str, seg_out: str) -> None:
    code = (
        "import sys; from shardkit.view.records import record_sheet; from shardkit.view.balance import balance_sheet; "
        f"record_sheet([{seg_out!r}]); balance_sheet([{cls_out!r}]); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
