"""The TF OD API tutorial's CSV, as its xml_to_csv.py writes it (through pandas): told by its
header among other .csv files, one row per image in the order images first appear, one-line
errors naming the file and line, and a build TensorFlow reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.delimited import CSV
from shardkit.pipeline.inputs.formats.detection.od_csv import OD_CSV
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.index_files import IndexFile, discover
from tests.detection_sets import CSV_LINES, write_od_csv


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_od_csv(tmp_path_factory.mktemp("raccoons"))


def rows(path: Path) -> list[Row | EntryError]:
    return list(IndexFile(path, "train").rows())


def test_its_header_takes_a_csv_ahead_of_the_generic_format(labels: Path, tmp_path: Path) -> None:
    assert registry.file_format(str(labels)) is OD_CSV
    plain = tmp_path / "train.csv"
    plain.write_text("image,label\na.jpg,cat\n")
    assert registry.file_format(str(plain)) is CSV
    more = tmp_path / "val.csv"  # the same columns and one more: a table of the user's own, read as such
    more.write_text("filename,width,height,class,xmin,ymin,xmax,ymax,score\n")
    assert registry.file_format(str(more)) is CSV
    bom = tmp_path / "test.csv"  # a spreadsheet's save: a BOM and CRLF line ends
    bom.write_bytes(b"\xef\xbb\xbffilename,width,height,class,xmin,ymin,xmax,ymax\r\na.jpg,1,1,cat,0,0,1,1\r\n")
    assert registry.file_format(str(bom)) is OD_CSV
    assert registry.file_format(str(tmp_path / "missing.csv")) is CSV  # nothing to peek at: the suffix decides
    assert registry.file_format("gs://bucket/train_labels.csv") is CSV  # a bucket's file is not peeked at
    assert [(f.split, f.format) for f in discover([labels.parent])] == [("train", OD_CSV)]  # train_labels.csv -> train


def test_rows_are_images_in_first_appearance_order_with_their_objects(labels: Path) -> None:
    got = rows(labels)
    assert all(isinstance(r, Row) for r in got)
    assert [(r.line, r.key) for r in got if isinstance(r, Row)] == [(2, "raccoon-1.jpg"), (3, "raccoon-2.jpg"), (6, "raccoon-3.jpg")]
    first = got[0]
    assert isinstance(first, Row)
    assert first.values == (
        "raccoon-1.jpg",
        "raccoon-1.jpg",
        "raccoon-1",
        {"size": [64, 48], "bbox": [[5.0, 6.0, 40.0, 44.0], [30.0, 10.0, 64.0, 40.0]], "text": ["raccoon", "dog"]},
    )
    assert OD_CSV.label_map(str(labels)) is None  # class names alone: the label map is what the data holds


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("raccoon-1.jpg,64,48,dog,30,10,6x,40", "xmax '6x' is not a number"),
        ("raccoon-1.jpg,64,48,dog,30,10,inf,40", "xmax 'inf' is not a finite number"),
        ("raccoon-1.jpg,48,64,dog,30,10,60,40", "raccoon-1.jpg: width x height 48x64, but 64x48 on line 2"),
        ("raccoon-1.jpg,64.5,48,dog,30,10,60,40", "width '64.5' is not a positive whole number of pixels"),
        ("raccoon-1.jpg,64,48,,30,10,60,40", "class is empty"),
        ("raccoon-1.jpg,64,48,dog,30,10,60", "7 columns, but the header has 8"),
    ],
)
def test_a_bad_line_makes_its_image_one_error_naming_the_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    path = write_od_csv(tmp_path, lines=CSV_LINES)
    path.write_text(path.read_text() + line + "\n")
    got = rows(path)
    assert [str(r) for r in got if isinstance(r, EntryError)] == [f"{path}:7: {reason}"]
    assert [r.key for r in got if isinstance(r, Row)] == ["raccoon-2.jpg", "raccoon-3.jpg"]  # raccoon-1 is no row


def test_a_bad_image_is_skipped_and_listed(tmp_path: Path) -> None:
    path = write_od_csv(tmp_path)
    path.write_text(path.read_text().replace("raccoon-2.jpg,56,40,dog", "raccoon-2.jpg,56,41,dog"))
    with pytest.raises(EntryError, match=rf"^{path}:5: raccoon-2\.jpg: width x height 56x41, but 56x40 on line 3$"):
        shardkit.build([path], tmp_path / "out", workers=1, progress=False)
    result = shardkit.build([path], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (2, 1)
    [listed] = [json.loads(line) for line in (tmp_path / "skip" / "errors.jsonl").read_text().splitlines()]
    assert (listed["source"], listed["line"]) == (str(path), 5)


def test_a_file_read_as_the_format_without_its_header_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"  # changed since it was claimed, say
    path.write_text("image,label\na.jpg,cat\n")
    with pytest.raises(ShardkitError) as refused:
        list(OD_CSV.read_rows(Piece(str(path))))
    assert str(refused.value) == f"{path}: expected the header filename,width,height,class,xmin,ymin,xmax,ymax"


def _records(out: Path) -> dict[str, Any]:
    tf = pytest.importorskip("tensorflow")
    found = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            found[feature["image/filename"].bytes_list.value[0].decode()] = feature
    return found


def test_a_build_gives_the_od_apis_records(labels: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert shardkit.build([labels], out, workers=1, progress=False).records == 3
    classes = ["dog", "raccoon"]
    assert json.loads((out / "manifest.json").read_text())["classes"]["image/object"] == classes
    records = _records(out)
    assert sorted(records) == ["raccoon-1.jpg", "raccoon-2.jpg", "raccoon-3.jpg"]
    for filename, feature in records.items():
        lines = [line for line in CSV_LINES if line[0] == filename]
        width, height = lines[0][1], lines[0][2]
        assert feature["image/source_id"].bytes_list.value == [filename[:-4].encode()]
        assert (feature["image/width"].int64_list.value[0], feature["image/height"].int64_list.value[0]) == (width, height)
        want = np.array([[x0 / width, y0 / height, x1 / width, y1 / height] for *_, x0, y0, x1, y1 in lines], np.float32)
        got = np.array([list(feature[f"image/object/bbox/{k}"].float_list.value) for k in ("xmin", "ymin", "xmax", "ymax")]).T
        np.testing.assert_array_equal(got, want)
        assert list(feature["image/object/class/text"].bytes_list.value) == [line[3].encode() for line in lines]
        assert list(feature["image/object/class/label"].int64_list.value) == [classes.index(line[3]) + 1 for line in lines]


def test_the_tutorials_layout_finds_its_images_with_image_root(labels: Path, tmp_path: Path) -> None:
    """The tutorial keeps annotations/train_labels.csv apart from images/train/: --image-root joins them."""
    annotations = tmp_path / "annotations"
    annotations.mkdir()
    moved = annotations / "train_labels.csv"
    moved.write_bytes(labels.read_bytes())
    with pytest.raises(EntryError, match=rf"^{moved}:\d: image/encoded: {annotations}/raccoon-\d\.jpg: file not found$"):
        shardkit.build([moved], tmp_path / "refused", workers=1, progress=False)
    result = shardkit.build([moved], tmp_path / "out", workers=1, progress=False, image_root=labels.parent)
    assert result.records == 3
    assert sorted(_records(tmp_path / "out")) == ["raccoon-1.jpg", "raccoon-2.jpg", "raccoon-3.jpg"]
