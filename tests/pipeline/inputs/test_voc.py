"""Pascal VOC folders, as VOC2012 and LabelImg write them: told by their layout (as an input and
with --from-folder), a split per main split file, rows from the XML, one-line errors, and a build
TensorFlow reads back with the boxes, classes, difficult and truncated flags of the XML."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.errors import EntryError, ShardkitError, StateError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.voc import VOC
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import VOC_IMAGES, VOC_SPLITS, labelimg_xml, photo, write_voc


@pytest.fixture(scope="module")
def voc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_voc(tmp_path_factory.mktemp("voc"))


@pytest.fixture()
def voc_copy(voc: Path, tmp_path: Path) -> Path:
    """A private copy a test may damage."""
    return Path(shutil.copytree(voc, tmp_path / "VOC2012"))


def rows(path: Path) -> list[Row | EntryError]:
    return [item for index in discover([path]) for item in index.rows()]


def test_a_voc_folder_is_told_by_its_layout_as_an_input_and_with_from_folder(voc: Path, tmp_path: Path) -> None:
    assert registry.layout_format(str(voc)) is VOC and registry.folder_format(str(voc)) is VOC
    assert registry.layout_format(str(voc.parent)) is None  # VOCdevkit itself: no layout of its own
    assert registry.layout_format(str(tmp_path)) is None  # any folder is no VOC folder
    found = discover([voc])
    main = voc / "ImageSets" / "Main"
    # The main split files alone: not aeroplane_train.txt and the other per-class lists, nor Segmentation's
    assert [(f.split, f.path, f.format) for f in found] == [
        ("train", str(main / "train.txt"), VOC),
        ("trainval", str(main / "trainval.txt"), VOC),
        ("val", str(main / "val.txt"), VOC),
    ]
    assert [f.name for f in discover([voc], ignore=["trainval*"])] == ["train.txt", "val.txt"]
    assert VOC.folder_of(str(main / "train.txt")) == str(voc / "JPEGImages")


def test_rows_are_the_split_files_ids_with_the_objects_of_their_xml(voc: Path) -> None:
    main = voc / "ImageSets" / "Main"
    got = [r for r in rows(voc) if isinstance(r, Row)]
    assert [(Path(r.source).name, r.line, r.values[2]) for r in got if r.source.endswith("/train.txt")] == [
        ("train.txt", i, image_id) for i, image_id in enumerate(VOC_SPLITS["train"], start=1)
    ]
    first = got[0]
    assert (first.source, first.line, first.key) == (str(main / "train.txt"), 1, "2008_000008.jpg")
    assert first.names == ("image", "filename", "source_id", "objects")
    assert first.values == (
        "2008_000008.jpg",
        "2008_000008.jpg",
        "2008_000008",
        {
            "size": [64, 48],
            "bbox": [[5.0, 8.0, 47.0, 42.0], [15.0, 2.0, 30.0, 23.0]],  # the person's head <part> is no object
            "text": ["horse", "person"],
            "difficult": [0, 0],
            "truncated": [0, 1],
        },
    )
    bottles = next(r for r in got if r.values[2] == "2008_000015")
    assert bottles.values[3]["bbox"][0] == [27.0, 10.0, 33.5, 39.0]  # as written, fractions too
    assert bottles.values[3]["difficult"] == [0, 1]
    assert VOC.label_map(str(main / "train.txt")) is None  # names alone: the label map is what the data holds


def test_a_folder_with_no_image_sets_is_all_train_in_name_order(tmp_path: Path) -> None:
    root = tmp_path / "labelled"
    (root / "Annotations").mkdir(parents=True)
    (root / "JPEGImages").mkdir()
    for name, width in (("b.jpg", 40), ("a.jpg", 32)):
        photo(root / "JPEGImages" / name, width, 24, 0)
        (root / "Annotations" / f"{name[0]}.xml").write_text(labelimg_xml(name, root / "JPEGImages", width, 24, [("cat", (1, 2, 20, 22))]))
    # Early LabelImg wrote the file name without its suffix, and left out truncated and difficult
    old = labelimg_xml("c", root / "JPEGImages", 32, 24, [("cat", (3, 4, 5, 6))])
    old = old.replace("\t\t<truncated>0</truncated>\n", "").replace("\t\t<difficult>0</difficult>\n", "")
    (root / "Annotations" / "c.xml").write_text(old)
    [index] = discover([root])
    assert (index.split, index.path) == ("train", str(root / "Annotations"))
    got = [r for r in index.rows() if isinstance(r, Row)]
    assert [(r.line, r.values[0], r.values[2]) for r in got] == [(0, "a.jpg", "a"), (0, "b.jpg", "b"), (0, "c.jpg", "c")]
    assert got[2].values[3] == {"size": [32, 24], "bbox": [[3.0, 4.0, 5.0, 6.0]], "text": ["cat"], "difficult": [0], "truncated": [0]}
    assert VOC.folder_of(str(root / "Annotations")) == str(root / "JPEGImages")


def test_malformed_xml_is_one_line_naming_the_file_and_its_line_and_column(voc_copy: Path) -> None:
    xml = voc_copy / "Annotations" / "2008_000019.xml"
    xml.write_text(xml.read_text().replace("\t</object>", "\t</objet>"))
    errors = [r for r in rows(voc_copy) if isinstance(r, EntryError)]
    main = voc_copy / "ImageSets" / "Main"
    # 2008_000019 is line 2 of train.txt and line 3 of trainval.txt
    assert [str(e) for e in errors] == [
        f"{main / 'train.txt'}:2: {xml}:27:4: not valid XML: mismatched tag",
        f"{main / 'trainval.txt'}:3: {xml}:27:4: not valid XML: mismatched tag",
    ]


def test_an_id_with_neither_xml_nor_image_names_the_split_file_and_line(voc_copy: Path, tmp_path: Path) -> None:
    (voc_copy / "Annotations" / "2008_000023.xml").unlink()
    (voc_copy / "JPEGImages" / "2008_000023.jpg").unlink()
    val = voc_copy / "ImageSets" / "Main" / "val.txt"
    errors = [str(r) for r in rows(voc_copy) if isinstance(r, EntryError) and r.source == str(val)]
    xml, image = voc_copy / "Annotations" / "2008_000023.xml", voc_copy / "JPEGImages" / "2008_000023"
    assert errors == [
        f"{val}:2: 2008_000023: no annotation {xml} and no image {image}.jpg (or .jpeg, .jfif, .png, .bmp, .gif, .tif, .tiff, .webp)"
    ]
    trainval = val.parent / "trainval.txt"  # the first split that lists it
    with pytest.raises(EntryError, match=rf"^{trainval}:4: 2008_000023: no annotation .*2008_000023\.xml and no image .*"):
        shardkit.build([voc_copy], tmp_path / "out", workers=1, progress=False)
    result = shardkit.build([voc_copy], tmp_path / "skip", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (len(VOC_IMAGES) * 2 - 2, 2)  # val's and trainval's line for it
    listed = [json.loads(line) for line in (tmp_path / "skip" / "errors.jsonl").read_text().splitlines()]
    where = sorted((e["split"], Path(e["source"]).name, e["line"]) for e in listed)
    assert where == [("trainval", "trainval.txt", 4), ("val", "val.txt", 2)]


def test_bad_values_in_the_xml_name_the_object(voc_copy: Path) -> None:
    xml = voc_copy / "Annotations" / "2008_000028.xml"
    xml.write_text(xml.read_text().replace("<xmax>71</xmax>", "<xmax>71px</xmax>"))
    errors = {str(r) for r in rows(voc_copy) if isinstance(r, EntryError)}
    train = voc_copy / "ImageSets" / "Main" / "train.txt"
    assert f"{train}:3: {xml}: object 1 (dog): bndbox xmax '71px' is not a number" in errors


def _records(out: Path) -> dict[str, Any]:
    tf = pytest.importorskip("tensorflow")
    found = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            example = tf.train.Example.FromString(raw.numpy())
            found[f"{shard.name.split('-')[0]}/{example.features.feature['image/filename'].bytes_list.value[0].decode()}"] = (
                example.features.feature
            )
    return found


def test_a_build_gives_the_od_apis_records(voc: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([voc], out, workers=1, progress=False)
    assert result.records == 10
    records = _records(out)
    classes = ["bottle", "dog", "horse", "person"]  # sorted names: ids 1, 2, ...
    assert json.loads((out / "manifest.json").read_text())["classes"]["image/object"] == classes
    assert (out / "label_map.pbtxt").read_text().startswith("item {\n  id: 1\n  name: 'bottle'\n}\n")
    sizes = {image_id: (w, h, objects) for image_id, w, h, objects in VOC_IMAGES}
    splits = {**VOC_SPLITS, "trainval": [*VOC_SPLITS["train"], *VOC_SPLITS["val"]]}
    assert sorted(records) == sorted(f"{split}/{i}.jpg" for split, ids in splits.items() for i in ids)
    for key, feature in records.items():
        image_id = key.split("/")[1][:-4]
        width, height, objects = sizes[image_id]
        assert feature["image/source_id"].bytes_list.value == [image_id.encode()]
        assert (feature["image/width"].int64_list.value[0], feature["image/height"].int64_list.value[0]) == (width, height)
        want = np.array([[x0 / width, y0 / height, x1 / width, y1 / height] for _, _, _, _, (x0, y0, x1, y1), _ in objects], np.float32)
        got = np.array([list(feature[f"image/object/bbox/{k}"].float_list.value) for k in ("xmin", "ymin", "xmax", "ymax")]).T
        np.testing.assert_array_equal(got, want)
        assert list(feature["image/object/class/text"].bytes_list.value) == [o[0].encode() for o in objects]
        assert list(feature["image/object/class/label"].int64_list.value) == [classes.index(o[0]) + 1 for o in objects]
        assert list(feature["image/object/difficult"].int64_list.value) == [o[3] for o in objects]
        assert list(feature["image/object/truncated"].int64_list.value) == [o[2] for o in objects]

    same = shardkit.build([], tmp_path / "from-folder", from_folder=voc, workers=1, progress=False)
    assert same.records == result.records
    assert sorted(_records(tmp_path / "from-folder")) == sorted(records)


def test_classes_fixed_by_the_config_number_the_labels(voc: Path, tmp_path: Path) -> None:
    config = tmp_path / "voc.yaml"
    config.write_text(
        "features:\n"
        "  image/encoded: {kind: encoded_image, column: image, encoding: raw}\n"
        "  image/object: {kind: objects, column: objects, classes: [person, horse, dog, bottle, cat]}\n"
    )
    shardkit.build([voc], tmp_path / "out", config=config, workers=1, progress=False, split="all", source_id=False)
    tf = pytest.importorskip("tensorflow")
    [shard] = (tmp_path / "out").glob("*.tfrecord")
    labels = set()
    for raw in tf.data.TFRecordDataset(str(shard)):
        feature = tf.train.Example.FromString(raw.numpy()).features.feature
        ids, names = feature["image/object/class/label"].int64_list.value, feature["image/object/class/text"].bytes_list.value
        labels |= set(zip(ids, names, strict=True))
    assert sorted(labels) == [(1, b"person"), (2, b"horse"), (3, b"dog"), (4, b"bottle")]
    config.write_text(config.read_text().replace("bottle, ", ""))
    trainval = voc / "ImageSets" / "Main" / "trainval.txt"  # its line 2 is the first bottle, in the first split that has one
    with pytest.raises(EntryError) as refused:
        shardkit.build([voc], tmp_path / "refused", config=config, workers=1, progress=False)
    assert str(refused.value) == f"{trainval}:2: image/object: object 1: unknown class 'bottle' (the label map has 4 classes)"


def test_an_edited_annotation_is_a_different_build(voc_copy: Path, tmp_path: Path) -> None:
    """The XML is in no index file's hash: the fingerprint keeps the rows, so a resume sees the edit."""
    args: dict[str, Any] = {"workers": 1, "progress": False}
    shardkit.build([voc_copy], tmp_path / "out", **args)
    assert shardkit.build([voc_copy], tmp_path / "out", **args).shards_reused == 3
    xml = voc_copy / "Annotations" / "2008_000008.xml"
    xml.write_text(xml.read_text().replace("<xmin>5</xmin>", "<xmin>6</xmin>"))
    with pytest.raises(StateError, match="already holds a different build"):
        shardkit.build([voc_copy], tmp_path / "out", **args)


def test_a_folder_with_image_sets_but_no_split_file_is_one_line(voc_copy: Path) -> None:
    for name in ("train.txt", "val.txt", "trainval.txt"):
        (voc_copy / "ImageSets" / "Main" / name).unlink()
    with pytest.raises(ShardkitError, match=r"ImageSets/Main: no split files \(train\.txt, val\.txt, trainval\.txt, test\.txt\)$"):
        discover([voc_copy])


def _datumaro_xml(filename: str, width: int, height: int, boxes: list[tuple[str, tuple[float, float, float, float]]]) -> str:
    """An annotation as datumaro's ``VocExporter`` writes one (lxml, ``pretty_print``, no declaration;
    ``bndbox`` corners as ``str(x + w)`` of its float boxes)."""
    out = [
        "<annotation>",
        "  <folder></folder>",
        f"  <filename>{filename}</filename>",
        "  <source>",
        "    <database>Unknown</database>",
        "    <annotation>Unknown</annotation>",
        "    <image>Unknown</image>",
        "  </source>",
        "  <size>",
        f"    <width>{width}</width>",
        f"    <height>{height}</height>",
        "    <depth>3</depth>",
        "  </size>",
        "  <segmented>0</segmented>",
    ]
    for name, corners in boxes:
        out += ["  <object>", f"    <name>{name}</name>", "    <truncated>0</truncated>", "    <occluded>0</occluded>"]
        out += ["    <difficult>0</difficult>", "    <bndbox>"]
        out += [f"      <{k}>{float(v)}</{k}>" for k, v in zip(("xmin", "ymin", "xmax", "ymax"), corners, strict=True)]
        out += ["    </bndbox>", "  </object>"]
    return "\n".join([*out, "</annotation>", ""])


def test_an_image_with_no_objects_and_no_xml_is_a_record_with_no_boxes(tmp_path: Path) -> None:
    """datumaro's VOC export writes an XML only for an image with boxes: the others are listed in
    ImageSets/Main/<split>.txt and saved in JPEGImages/ (in their own format), with no XML."""
    root = tmp_path / "voc_export"
    for sub in ("Annotations", "JPEGImages", "ImageSets/Main", "ImageSets/Segmentation", "ImageSets/Layout", "ImageSets/Action"):
        (root / sub).mkdir(parents=True)
    boxed = {"street_1": (64, 48, [("car", (5.5, 8.0, 47.0, 42.25)), ("traffic light", (50.0, 2.0, 60.0, 20.0))])}
    for name, (width, height, boxes) in boxed.items():
        photo(root / "JPEGImages" / f"{name}.jpg", width, height, 1)
        (root / "Annotations" / f"{name}.xml").write_text(_datumaro_xml(f"{name}.jpg", width, height, boxes))
    photo(root / "JPEGImages" / "empty_road.jpg", 40, 30, 2)  # negatives: no XML
    Image.new("RGB", (36, 20), (9, 9, 9)).save(root / "JPEGImages" / "night.png")
    (root / "ImageSets" / "Main" / "train.txt").write_text("street_1\nempty_road\nnight\n")
    (root / "ImageSets" / "Main" / "car_train.txt").write_text("street_1  1\n")
    (root / "labelmap.txt").write_text("# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:128,0,0::\ntraffic light:0,128,0::\n")
    out = tmp_path / "out"
    result = shardkit.build([root], out, workers=1, progress=False)
    assert (result.records, result.skipped) == (3, 0)  # records = images
    records = _records(out)
    assert sorted(records) == ["train/empty_road.jpg", "train/night.png", "train/street_1.jpg"]
    for name in ("empty_road.jpg", "night.png"):
        feature = records[f"train/{name}"]
        assert feature["image/source_id"].bytes_list.value == [name.rsplit(".", 1)[0].encode()]
        assert list(feature["image/object/bbox/xmin"].float_list.value) == []
        assert list(feature["image/object/class/text"].bytes_list.value) == []
    assert records["train/night.png"]["image/format"].bytes_list.value == [b"png"]
    assert (
        records["train/night.png"]["image/width"].int64_list.value[0],
        records["train/night.png"]["image/height"].int64_list.value[0],
    ) == (36, 20)
    street = records["train/street_1.jpg"]
    got = np.array([list(street[f"image/object/bbox/{k}"].float_list.value) for k in ("xmin", "ymin", "xmax", "ymax")]).T * [64, 48, 64, 48]
    np.testing.assert_allclose(got, [[5.5, 8.0, 47.0, 42.25], [50.0, 2.0, 60.0, 20.0]], atol=0.5)
    assert list(street["image/object/class/text"].bytes_list.value) == [b"car", b"traffic light"]


def test_an_id_without_xml_may_not_name_an_image_outside_jpegimages(voc_copy: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.jpg"
    photo(outside, 8, 8, 0)
    (voc_copy / "JPEGImages" / "leak.jpg").symlink_to(outside)
    (voc_copy / "ImageSets" / "Main" / "val.txt").write_text("leak\n")
    [error] = [r for r in rows(voc_copy) if isinstance(r, EntryError) and r.source.endswith("val.txt")]
    assert str(error).startswith(
        f"{voc_copy / 'ImageSets' / 'Main' / 'val.txt'}:1: leak: image {voc_copy / 'JPEGImages' / 'leak.jpg'} (a link to {outside}"
    )
    assert "--allow-outside-root" in str(error)
