"""YOLO datasets as Ultralytics (and Roboflow) export them: a data.yaml naming its splits, read as
a file or as the folder holding it, labels from the parallel labels/ tree (boxes and YOLO-seg
polygons), one-line errors naming the label file and line, and a build TensorFlow reads back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError, ShardkitWarning
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.yolo import YOLO, label_path
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import YOLO_IMAGES, YOLO_NAMES, photo, write_yolo
from tests.yolo_exports import NAMES, TRUTH, assert_truth, write_labelimg, write_supervision


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_yolo(tmp_path_factory.mktemp("yolo") / "coco8")


@pytest.fixture()
def dataset_copy(dataset: Path, tmp_path: Path) -> Path:
    """A private copy a test may damage (its data.yaml's path: pointing at the copy)."""
    root = Path(shutil.copytree(dataset.parent, tmp_path / "coco8"))
    (root / "data.yaml").write_text((root / "data.yaml").read_text().replace(str(dataset.parent), str(root)))
    return root / "data.yaml"


def test_data_yaml_and_its_folder_are_told_by_content_and_name_their_splits(dataset: Path, tmp_path: Path) -> None:
    assert registry.file_format(str(dataset)) is YOLO
    assert registry.layout_format(str(dataset.parent)) is YOLO and registry.folder_format(str(dataset.parent)) is YOLO
    config = tmp_path / "config.yaml"
    config.write_text("features:\n  image: {kind: image, column: 0}\n")  # a shardkit config is no dataset
    assert registry.file_format(str(config)) is None and registry.layout_format(str(tmp_path)) is None
    for given in (dataset, dataset.parent):
        found = discover([given])
        assert [(f.split, f.path, f.format) for f in found] == [("train", str(dataset), YOLO), ("val", str(dataset), YOLO)]  # test: empty
    assert YOLO.label_map(str(dataset)) == ((1, "person"), (2, "car"), (3, "dog"))


def test_rows_are_the_images_with_their_labels(dataset: Path) -> None:
    root = dataset.parent
    train, val = discover([dataset])
    got = [r for r in train.rows() if isinstance(r, Row)]
    names = ("a.jpg", "b.jpg", "c.png")
    # line 0: an image found in a folder has no line of data.yaml (errors name the image instead)
    assert [(r.source, r.line, r.key) for r in got] == [(str(dataset), 0, f"images/train/{n}") for n in names]
    assert got[0].values == (
        str(root / "images" / "train" / "a.jpg"),
        "a.jpg",
        "a",
        {
            "units": "normalized",
            "bbox": [[0.375, 0.25, 0.625, 0.75], [0.1875, 0.625, 0.3125, 0.875]],
            "text": ["person", "dog"],
            "label": [1, 3],
            "ref": ["labels/train/a.txt:1", "labels/train/a.txt:2"],  # what a message about an object calls it
        },
    )
    assert got[1].values[3]["bbox"] == [[0.1, 0.2, 0.3, 0.6]]  # a YOLO-seg polygon: its extent, no segmentation
    assert got[2].values[3] == {"units": "normalized", "bbox": [], "text": [], "label": [], "ref": []}  # no label file
    assert [r.values[3]["text"] for r in val.rows() if isinstance(r, Row)] == [["dog"], []]  # an empty label file
    assert label_path(str(root / "images" / "train" / "a.jpg")) == str(root / "labels" / "train" / "a.txt")


def test_a_roboflow_export_with_a_names_list_and_split_folders(tmp_path: Path) -> None:
    """Roboflow's layout: train/images beside train/labels, the splits written as ../train/images."""
    root = tmp_path / "export"
    for split, name in (("train", "x.jpg"), ("valid", "y.jpg")):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir()
        photo(root / split / "images" / name, 32, 32, 0)
        (root / split / "labels" / f"{name[0]}.txt").write_text("1 0.5 0.5 0.5 0.5\n")
    (root / "data.yaml").write_text("train: ../train/images\nval: ../valid/images\n\nnc: 2\nnames: ['cat', 'dog']\n")
    found = discover([root])
    assert [f.split for f in found] == ["train", "val"]
    [row] = [r for r in found[1].rows() if isinstance(r, Row)]
    assert (row.values[0], row.key, row.values[3]["text"]) == (str(root / "valid" / "images" / "y.jpg"), "valid/images/y.jpg", ["dog"])


def test_a_split_may_be_a_list_of_images_or_of_folders(dataset_copy: Path) -> None:
    root = dataset_copy.parent
    (root / "train.txt").write_text("./images/train/b.jpg\nimages/val/d.jpg\n\n")
    dataset_copy.write_text(f"path: {root}\ntrain: train.txt\nval: [images/val, images/train]\nnames: {YOLO_NAMES}\n")
    train, val = discover([dataset_copy])
    assert [r.values[1] for r in train.rows() if isinstance(r, Row)] == ["b.jpg", "d.jpg"]
    # sorted, as Ultralytics lists them
    assert [r.values[1] for r in val.rows() if isinstance(r, Row)] == ["a.jpg", "b.jpg", "c.png", "d.jpg", "e.jpg"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("3 0.5 0.5 0.2 0.2", "class 3 is not in names (0 to 2)"),
        ("-1 0.5 0.5 0.2 0.2", "class -1 is not in names (0 to 2)"),
        ("0.5 0.5 0.5 0.2 0.2", "class 0.5 is not in names (0 to 2)"),
        ("0 0.5 0.5 0.2", "4 values: expected class cx cy w h, or class and a polygon x1 y1 x2 y2 ..."),
        ("0 0.1 0.1 0.2 0.1 0.2", "6 values: expected class cx cy w h, or class and a polygon x1 y1 x2 y2 ..."),
        ("0 0.5 0.5 0,2 0.2", "'0,2' is not a number"),
        ("0 nan 0.5 0.2 0.2", "a value is not finite"),
    ],
)
def test_a_bad_label_line_names_the_label_file_and_line(dataset_copy: Path, line: str, reason: str) -> None:
    labels = dataset_copy.parent / "labels" / "train" / "a.txt"
    labels.write_text(f"0 0.5 0.5 0.25 0.5\n{line}\n")
    train, _ = discover([dataset_copy])
    errors = [str(r) for r in train.rows() if isinstance(r, EntryError)]
    assert errors == [f"{labels}:2: {reason}"]


def test_a_bad_image_is_skipped_and_listed(dataset_copy: Path, tmp_path: Path) -> None:
    labels = dataset_copy.parent / "labels" / "val" / "d.txt"
    labels.write_text("7 0.5 0.5 1 1\n")
    with pytest.raises(EntryError, match=rf"^{labels}:1: class 7 is not in names \(0 to 2\)$"):
        shardkit.build([dataset_copy], tmp_path / "out", workers=1, progress=False)
    result = shardkit.build([dataset_copy], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (4, 1)
    [listed] = [json.loads(line) for line in (tmp_path / "skip" / "errors.jsonl").read_text().splitlines()]
    assert (listed["split"], listed["source"], listed["line"]) == ("val", str(labels), 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("train: images/train\nnames: {0: a, 2: b}\n", "names: expected the class indexes 0 to 1, got 0, 2"),
        ("train: images/train\nnc: 3\nnames: [a, b]\n", "nc is 3, but names has 2"),
        ("train: images/train\nnames: [a, a]\n", "names: 'a' names two classes"),
        ("train: images/missing\nnames: [a]\n", "train: images/missing: no such folder or image list (looked for {root}/images/missing)"),
        ("train: images/train\nnames: [a]\nkpt_shape: [17, 3]\n", "YOLO pose labels (kpt_shape) are not supported yet"),
    ],
)
def test_a_bad_data_yaml_is_one_line(dataset_copy: Path, tmp_path: Path, text: str, message: str) -> None:
    dataset_copy.write_text(text)
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([dataset_copy], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == f"{dataset_copy}: {message.format(root=dataset_copy.parent)}"


def test_a_build_gives_the_od_apis_records_with_yolos_classes(dataset: Path, tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    out = tmp_path / "out"
    result = shardkit.build([dataset], out, workers=1, progress=False)
    assert result.records == 5
    assert (out / "label_map.pbtxt").read_text() == "".join(f"item {{\n  id: {i}\n  name: '{n}'\n}}\n" for i, n in enumerate(YOLO_NAMES, 1))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["classes"]["image/object"] == YOLO_NAMES
    assert sorted(manifest["splits"]) == ["train", "val"]
    records: dict[str, Any] = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            records[feature["image/filename"].bytes_list.value[0].decode()] = feature
    for entries in YOLO_IMAGES.values():
        for name, width, height, lines in entries:
            feature = records[name]
            assert feature["image/source_id"].bytes_list.value == [name.rsplit(".", 1)[0].encode()]
            assert (feature["image/width"].int64_list.value[0], feature["image/height"].int64_list.value[0]) == (width, height)
            values = [[float(v) for v in line.split()] for line in lines or []]
            boxes = [_box(rest) for _, *rest in values]
            want = np.clip(np.array(boxes, np.float64).reshape(-1, 4), 0, 1).astype(np.float32)
            got = np.array([list(feature[f"image/object/bbox/{k}"].float_list.value) for k in ("xmin", "ymin", "xmax", "ymax")]).T
            np.testing.assert_allclose(got.reshape(-1, 4), want, rtol=0, atol=1e-6)  # scaled to pixels and back
            assert list(feature["image/object/class/label"].int64_list.value) == [int(v[0]) + 1 for v in values]
            assert list(feature["image/object/class/text"].bytes_list.value) == [YOLO_NAMES[int(v[0])].encode() for v in values]
    folder = shardkit.build([dataset.parent], tmp_path / "folder", workers=1, progress=False)
    from_folder = shardkit.build([], tmp_path / "from-folder", from_folder=dataset.parent, workers=1, progress=False)
    assert folder.records == from_folder.records == result.records
    for name in ("train-00000-of-00001.tfrecord", "val-00000-of-00001.tfrecord"):
        assert (tmp_path / "folder" / name).read_bytes() == (out / name).read_bytes()


def _box(values: list[float]) -> list[float]:
    """A label line's box, as Ultralytics reads it: from its centre and size, or a polygon's extent."""
    if len(values) == 4:
        cx, cy, w, h = values
        return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    return [min(values[0::2]), min(values[1::2]), max(values[0::2]), max(values[1::2])]


# -- Roboflow / supervision, LabelImg's classes.txt, absent splits, rows with no line ------------


@pytest.mark.parametrize("layout", ["roboflow", "images-split"])
def test_a_data_yaml_with_nc_and_names_alone_takes_the_split_folders_beside_it(tmp_path: Path, layout: str) -> None:
    """supervision's ``as_yolo(data_yaml_path=...)`` writes ``nc`` and ``names`` alone. Before:
    "unknown index format '.yaml'". Roboflow's ``<split>/images``, or ``images/<split>``; a
    split is named as its folder is (``valid`` stays ``valid``, as Roboflow's COCO folders)."""
    pytest.importorskip("tensorflow")
    data = write_supervision(tmp_path / "export")
    if layout == "images-split":  # the same files in Ultralytics' tree
        for split in TRUTH:
            for kind in ("images", "labels"):
                (tmp_path / "export" / kind).mkdir(exist_ok=True)
                (tmp_path / "export" / split / kind).rename(tmp_path / "export" / kind / split)
            (tmp_path / "export" / split).rmdir()
    assert "train:" not in data.read_text() and registry.file_format(str(data)) is YOLO
    assert [(f.split, f.path) for f in discover([data.parent])] == [("train", str(data)), ("valid", str(data))]
    result = shardkit.build([data.parent], tmp_path / "out", workers=1, progress=False)
    assert (result.records, result.skipped) == (5, 0)
    assert_truth(tmp_path / "out", {"train": "train", "valid": "valid"})


def test_a_split_data_yaml_names_that_is_not_there_is_left_out_with_a_warning(tmp_path: Path) -> None:
    """Roboflow's own data.yaml names ``test: ../test/images`` where the export has no test set;
    Ultralytics accepts it. No split there at all is one line."""
    data = write_supervision(tmp_path / "export")
    data.write_text(f"train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 3\nnames: {NAMES}\n")
    with pytest.warns(ShardkitWarning, match=r"data.yaml: test: \.\./test/images: no such folder or image list: the split is left out$"):
        found = discover([data])
    assert [f.split for f in found] == ["train", "val"]
    shutil.rmtree(tmp_path / "export" / "train")
    shutil.rmtree(tmp_path / "export" / "valid")
    with pytest.raises(
        ShardkitError, match=r"data.yaml: train: \.\./train/images: no such folder or image list \(looked for .*/train/images\); val: "
    ):
        discover([data])
    data.write_text(f"nc: 3\nnames: {NAMES}\n")
    with pytest.raises(
        ShardkitError, match=r"data.yaml: no split: it names none, and .* has no <split>/images, images/<split> or images folder$"
    ):
        discover([data])


@pytest.mark.parametrize("splits", [False, True])
def test_a_folder_with_classes_txt_images_and_labels_is_a_yolo_dataset(tmp_path: Path, splits: bool) -> None:
    """LabelImg's YOLO mode: ``classes.txt`` with the labels (flat), or beside ``images/<split>``.
    Before: ``classes.txt`` read as an image list (``classes.txt:3: 2 columns, but line 1 has 1``)."""
    pytest.importorskip("tensorflow")
    classes = write_labelimg(tmp_path / "set", splits)
    root = tmp_path / "set"
    assert registry.layout_format(str(root)) is YOLO
    assert [f.split for f in discover([root])] == (["train", "valid"] if splits else ["train"])
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert (result.records, result.skipped) == (5, 0)  # the images LabelImg wrote no labels for: kept, no objects
    assert_truth(tmp_path / "out", {"train": "train", "valid": "valid" if splits else "train"})
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([classes], tmp_path / "alone", workers=1, progress=False)
    assert str(refused.value) == (
        f"{classes}: the class names of a YOLO dataset, not an image list: "
        f"give the dataset's folder to read its images and labels (shardkit build {root})"
    )


def test_a_classes_txt_with_no_dataset_near_is_still_an_index_file(tmp_path: Path) -> None:
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    assert registry.file_format(str(tmp_path / "classes.txt")) is registry.named("txt")


def test_an_image_found_in_a_folder_is_named_with_no_line_of_data_yaml(dataset_copy: Path, tmp_path: Path) -> None:
    """Before: ``data.yaml:2: image/encoded: ...b.jpg: not an image``, line 2 of data.yaml being
    ``train: ...``. A folder's image has no line: it is named instead."""
    (dataset_copy.parent / "images" / "train" / "b.jpg").write_bytes(b"not a jpeg at all")
    config = tmp_path / "decode.yaml"
    config.write_text("features:\n  image/encoded: {kind: encoded_image, column: image, encoding: png}\n")
    with pytest.raises(EntryError) as refused:
        shardkit.build([dataset_copy], tmp_path / "out", config=config, workers=1, progress=False)
    assert (refused.value.source, refused.value.line) == (str(dataset_copy), 0)
    assert str(refused.value).startswith(f"{dataset_copy}: image/encoded: {dataset_copy.parent}/images/train/b.jpg: ")


def test_an_unshuffled_build_covers_its_dataset_file_once_not_once_an_image(dataset: Path, tmp_path: Path) -> None:
    """``covers`` runs of line 0 (images with no line) are one run, where each image was its own."""
    result = shardkit.build([dataset], tmp_path / "out", workers=1, progress=False, shuffle=False)
    assert result.manifest is not None
    assert [shard.covers for shard in result.manifest.splits["train"].shards] == [((str(dataset), 0, 0),)]


def _labelimg_with_lists(root: Path, labels: dict[str, str]) -> Path:
    """``images/im0..3.jpg``, ``labels/im0..3.<suffix>`` (``labels``: suffix -> what each holds),
    ``classes.txt`` and the lists ``train.txt`` (im0, im1) and ``val.txt`` (im2, im3) the user
    wrote, as ``images/im0.jpg`` lines."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for k in range(4):
        photo(root / "images" / f"im{k}.jpg", 32, 24, k)
        for suffix, content in labels.items():
            if suffix == ".png":
                photo(root / "labels" / f"im{k}.png", 32, 24, 9)  # a segmentation set's mask
            else:
                (root / "labels" / f"im{k}{suffix}").write_text(content)
    (root / "classes.txt").write_text("car\nperson\n")
    (root / "train.txt").write_text("images/im0.jpg\nimages/im1.jpg\n")
    (root / "val.txt").write_text("images/im2.jpg\nimages/im3.jpg\n")
    return root


def test_a_classes_txt_folder_holding_image_lists_of_its_own_is_one_line_naming_them(tmp_path: Path) -> None:
    """Before: built as ``train 4 records``, the images ``val.txt`` lists put in train, unsaid. The
    lists the user wrote are never passed over; the line says how to build them, and it works."""
    root = _labelimg_with_lists(tmp_path / "ds", {".txt": "0 0.500000 0.500000 0.250000 0.500000\n"})
    told = (
        f"{root}: a YOLO folder (classes.txt, images/, labels/) that also holds train.txt, val.txt: which to build is unclear: "
        "to build the image lists with their labels, write a data.yaml beside them (train: train.txt, val: val.txt, "
        "names: the lines of classes.txt) and build it; to build all of images/ as one split, move train.txt, val.txt out"
    )
    for given in (root, root / "classes.txt"):
        with pytest.raises(ShardkitError) as refused:
            shardkit.build([given], tmp_path / "out", workers=1, progress=False)
        assert str(refused.value) == told
    (root / "data.yaml").write_text("train: train.txt\nval: val.txt\nnames: [car, person]\n")  # as the line says
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert result.manifest is not None and {s: m.records for s, m in result.manifest.splits.items()} == {"train": 2, "val": 2}
    (root / "data.yaml").unlink()
    for name in ("train.txt", "val.txt"):  # moved out: the folder is one split; Roboflow's README is no index
        (root / name).rename(tmp_path / name)
    (root / "README.roboflow.txt").write_text("This dataset was exported via roboflow.com\n")
    assert shardkit.build([root], tmp_path / "whole", workers=1, progress=False).records == 4


@pytest.mark.parametrize("labels", [{".png": ""}, {".txt": "a red car on a road\n"}])
def test_a_folder_whose_labels_are_no_yolo_labels_is_not_a_yolo_dataset(tmp_path: Path, labels: dict[str, str]) -> None:
    """A semantic segmentation set (``labels/*.png`` masks, two-column lists), or captions in
    ``labels/*.txt``. Before: claimed as YOLO because ``labels/`` exists, built as detection with
    no object at all."""
    root = _labelimg_with_lists(tmp_path / "seg", labels)
    for name in ("train.txt", "val.txt"):
        (root / name).write_text("".join(f"images/im{k}.jpg labels/im{k}.png\n" for k in ((0, 1) if name == "train.txt" else (2, 3))))
    assert registry.layout_format(str(root)) is None
    assert registry.file_format(str(root / "classes.txt")) is registry.named("txt")
    if ".png" not in labels:
        return
    result = shardkit.build([root], tmp_path / "out", ignore=["classes.txt"], workers=1, progress=False)
    assert result.records == 4 and result.manifest is not None and set(result.manifest.splits) == {"train", "val"}
