"""Objects on preview sheets: boxes named by class, instance masks and keypoints, before a build
(the build's own records), after it (from the shards, or from a file another tool wrote), drawn
where they are and in their class's colour."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shardkit.features.drawn import Overlay
from shardkit.view import sheet
from shardkit.view.augmentations import augmentation_records, augmentation_sheet, sheet_rows
from shardkit.view.records import record_sheet, record_tiles
from tests.paths import REPO

CONFIG = REPO / "configs" / "coco-instance-masks.yaml"
P = "image/object"


def _tf_boxes(coco_shards: Path) -> dict[str, np.ndarray]:
    """Each record's boxes (xmin, ymin, xmax, ymax) as TensorFlow parses them, by image file name."""
    tf = pytest.importorskip("tensorflow")
    found = {}
    for data in tf.data.TFRecordDataset([str(p) for p in coco_shards.glob("*.tfrecord")]):
        feature = tf.train.Example.FromString(data.numpy()).features.feature
        corners = [feature[f"{P}/bbox/{k}"].float_list.value for k in ("xmin", "ymin", "xmax", "ymax")]
        found[feature["image/filename"].bytes_list.value[0].decode()] = np.array(corners, dtype=np.float32).T.reshape(-1, 4)
    return found


def test_records_carry_their_objects_to_the_sheet(coco_shards: Path) -> None:
    drawn = record_tiles([str(coco_shards)], count=6, seed=0)
    boxes = _tf_boxes(coco_shards)
    for tile in drawn.tiles:
        (overlay,) = tile.objects
        name = tile.caption[0]
        np.testing.assert_array_equal(overlay.boxes.astype(np.float32), boxes[name])
        assert len(overlay.names) == len(boxes[name])
        assert all(c == {"person": 1, "car": 2, "train": 3}[n] for n, c in zip(overlay.names, overlay.colours, strict=True))
        if len(boxes[name]):
            assert overlay.masks is not None and overlay.masks.shape == (len(boxes[name]), *tile.image.shape[:2])
            assert overlay.keypoints is not None and overlay.keypoints.shape == (len(boxes[name]), 3, 3)
    three = next(t for t in drawn.tiles if t.caption[0] == "000000000003.jpg").objects[0]
    assert three.names == ("person", "train", "car") and three.crowd == (False, True, False)
    assert three.keypoints is not None and three.keypoints[0, :, 2].tolist() == [2, 1, 0]


def test_the_sheet_shows_them_larger_with_their_classes_in_the_legend(coco_shards: Path) -> None:
    picture = record_sheet([str(coco_shards)], count=6, seed=0)
    assert picture.width <= sheet.MAX_WIDTH
    plain = sheet.render([[sheet.Tile(np.zeros((300, 400, 3), np.uint8))]])
    drawn = sheet.render([[sheet.Tile(np.zeros((300, 400, 3), np.uint8), objects=[_one_box()])]])
    assert plain.height - sheet.TILE_HEIGHT == drawn.height - sheet.OBJECTS_TILE_HEIGHT - sheet.LINE - sheet.GAP  # and a legend


def _one_box() -> Overlay:
    mask = np.zeros((1, 100, 200), np.uint8)
    mask[0, 40:80, 50:150] = 1
    keypoints = np.array([[[0.5, 0.6, 2], [0.6, 0.6, 1], [0.7, 0.6, 0]]])
    return Overlay(np.array([[0.25, 0.4, 0.75, 0.8]]), ("car",), (2,), (False,), mask, keypoints)


def test_a_box_its_mask_and_its_keypoints_are_drawn_where_they_are() -> None:
    grey = np.full((100, 200, 3), 100, np.uint8)
    tile = sheet.Tile(grey, objects=[_one_box()])
    picture = np.asarray(sheet.render([[tile]], tile_height=100))
    g = sheet.GAP
    on = picture[g : g + 100, g : g + 200].astype(int)
    car = np.array(sheet.colour(2))
    assert (on[60, 50] == car).all() and (on[60, 149] == car).all()  # the box's left and right edges, in the class's colour
    blended = np.rint(0.6 * 100 + 0.4 * car)
    assert (np.abs(on[70, 80] - blended) <= 1).all()  # inside the mask: tinted
    assert (on[20, 20] == 100).all()  # outside everything: the picture as it was
    assert (on[60, 100] == car).all() and (on[60, 120] == 255).all()  # keypoints: visible filled, hidden hollow (white)
    assert (on[60, 140] != 255).any()  # not labelled: not drawn
    assert (on[37, 50:52] == car).all() and (on[37, 48] == 100).all()  # the name's tab above the box, in its colour
    legend = picture[-sheet.LINE - sheet.GAP :, :]
    assert (legend == car).all(axis=-1).any()


def test_before_a_build_the_objects_are_the_builds_own(coco_set: Path, coco_shards: Path) -> None:
    preview = augmentation_records([coco_set], config=CONFIG, entries=6, full=False)
    after = {t.caption[0]: t.objects[0] for t in record_tiles([str(coco_shards)], count=6, seed=0).tiles}
    rows = sheet_rows(preview)
    assert [len(row) for row in rows] == [1] * 6  # no augment section: originals only
    for row in rows:
        (tile,) = row
        (overlay,) = tile.objects
        built = after[tile.caption[-1]]  # the entry's identity: its image's file name
        np.testing.assert_array_equal(overlay.boxes, built.boxes)
        assert overlay.names == built.names and overlay.colours == built.colours and overlay.crowd == built.crowd
    assert sorted(len(row[0].objects[0].names) for row in rows) == [0, 0, 1, 1, 2, 3]
    picture = augmentation_sheet([coco_set], config=CONFIG, entries=6)
    assert picture.width > picture.height  # six originals in a grid, not a column


def test_a_file_another_tool_wrote_has_its_objects_found_by_their_keys(coco_shards: Path, tmp_path: Path) -> None:
    lone = tmp_path / "lone.tfrecord"
    shutil.copy(next(coco_shards.glob("*.tfrecord")), lone)  # no manifest: keys tell what is what
    drawn = record_tiles([str(lone)], count=6, seed=0)
    boxes = _tf_boxes(coco_shards)
    for tile in drawn.tiles:
        (overlay,) = tile.objects
        np.testing.assert_array_equal(overlay.boxes.astype(np.float32), boxes[tile.caption[0]])
        assert tile.mask is None  # an instance mask is not taken for the record's mask
        assert not any("label" in line or "text" in line for line in tile.caption)  # nor its classes for labels
    colours = {n: c for t in drawn.tiles for o in t.objects for n, c in zip(o.names, o.colours, strict=True)}
    assert len(set(colours.values())) == len(colours)  # a colour per class name, the same on every tile
    picture = record_sheet([str(lone)], count=6, seed=0)
    assert isinstance(picture, Image.Image)


def test_augmented_copies_show_the_boxes_the_build_writes(coco_set: Path, tmp_path: Path) -> None:
    import shardkit
    from shardkit.formats.containers.tfrecord_io import read_records

    config = REPO / "configs" / "coco-detection.yaml"  # two augmented copies besides the original: boxes move
    shardkit.build([coco_set], tmp_path / "out", config=config, workers=1, seed=3, progress=False)
    built = {r for shard in (tmp_path / "out").glob("*.tfrecord") for r in read_records(str(shard))}
    preview = augmentation_records([coco_set], config=config, entries=6, copies=2, seed=3, full=False)
    rows = sheet_rows(preview)
    moved = 0
    for entry, row in zip(preview.entries, rows, strict=True):
        for record, tile in zip(entry.records, row, strict=True):
            assert record.data in built  # the very record the build wrote
            (overlay,) = tile.objects
            corners = [record.features[f"{P}/bbox/{k}"][1] for k in ("xmin", "ymin", "xmax", "ymax")]
            np.testing.assert_array_equal(overlay.boxes, np.array(corners, dtype=np.float64).T.reshape(-1, 4))
            moved += not np.array_equal(overlay.boxes, row[0].objects[0].boxes)
    assert moved  # some copy's boxes moved with its pixels
