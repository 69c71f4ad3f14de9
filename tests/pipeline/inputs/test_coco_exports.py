"""COCO as the tools export it: Roboflow's split folders (``train/_annotations.coco.json``, 0-based
category ids with the dataset's name as category 0), datumaro's ``annotations/instances_<split>.json``
with ``images/<split>/``, file names that already carry their split folder; each file written as
the tool writes it, built, and read back with TensorFlow: every box (within 0.5 px), class and id.
Inputs that would merge splits or repeat image ids, and category ids the TF OD API cannot load,
are one line each; the label map loads as the API loads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import ShardkitError
from shardkit.formats import label_map
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import photo

DATASET = "traffic-lights-x3k9"  # Roboflow's category 0: the project's name, supercategory "none"
CLASSES = ["car", "traffic light", "person"]  # Roboflow's ids 1, 2, 3; written 2, 3, 4 (0 -> 1 for the root class)


def _objects(split: int, i: int, width: int, height: int) -> list[tuple[int, list[float]]]:
    """(category id, [x, y, w, h]) of image ``i``: ints where whole, as Roboflow writes them; the last image of a split has none."""
    if i == 2:
        return []
    return [(1 + (i + split) % 3, [3, 4.5, width / 2 - 0.25, height / 3]), (2, [width / 2, 10, 12.75, height - 12])][: 1 + i % 2]


def write_roboflow(root: Path) -> dict[str, list[dict[str, Any]]]:
    """A Roboflow "COCO JSON" export: ``train/``, ``valid/``, ``test/``, each its images and an
    ``_annotations.coco.json`` (compact, image and annotation ids from 0 in each file). Returns the
    images of each split as written, with their objects."""
    categories = [{"id": 0, "name": DATASET, "supercategory": "none"}]
    categories += [{"id": n + 1, "name": name, "supercategory": DATASET} for n, name in enumerate(CLASSES)]
    written: dict[str, list[dict[str, Any]]] = {}
    for s, split in enumerate(("train", "valid", "test")):
        (root / split).mkdir(parents=True)
        images, annotations = [], []
        for i in range(3):
            width, height = 64 + 8 * i, 48 + 4 * s
            name = f"frame_{i:04d}_jpg.rf.{s}{i}5d8e0c4b2a1f9e7d6c5b4a3f2e1d0c.jpg"
            photo(root / split / name, width, height, 10 * s + i)
            images.append({"id": i, "license": 1, "file_name": name, "height": height, "width": width,
                           "date_captured": "2024-03-05T10:21:07+00:00"})  # fmt: skip
            for category, bbox in _objects(s, i, width, height):
                annotations.append({"id": len(annotations), "image_id": i, "category_id": category, "bbox": bbox,
                                    "area": bbox[2] * bbox[3], "segmentation": [], "iscrowd": 0})  # fmt: skip
            written.setdefault(split, []).append({**images[-1], "objects": _objects(s, i, width, height)})
        document = {
            "info": {"year": "2024", "version": "3", "description": "Exported from roboflow.com", "contributor": "",
                     "url": "https://public.roboflow.com/object-detection/undefined", "date_created": "2024-03-05T10:21:07+00:00"},
            "licenses": [{"id": 1, "url": "https://creativecommons.org/licenses/by/4.0/", "name": "CC BY 4.0"}],
            "categories": categories,
            "images": images,
            "annotations": annotations,
        }  # fmt: skip
        (root / split / "_annotations.coco.json").write_text(json.dumps(document, separators=(",", ":")))
    return written


def write_datumaro(root: Path) -> dict[str, list[dict[str, Any]]]:
    """``datum export -f coco_instances`` (datumaro's CocoExporter): ``annotations/instances_<subset>.json``
    (licenses, info, categories with ids from 1, images, annotations with ``attributes``) and the
    images in ``images/<subset>/``."""
    (root / "annotations").mkdir(parents=True)
    written: dict[str, list[dict[str, Any]]] = {}
    image_id = 0
    for s, subset in enumerate(("train", "val")):
        (root / "images" / subset).mkdir(parents=True)
        images, annotations = [], []
        for i in range(3):
            image_id += 1
            width, height = 72 - 4 * i, 40 + 8 * s
            name = f"{subset}_{i:03d}.jpg"
            photo(root / "images" / subset / name, width, height, 100 + 10 * s + i)
            images.append({"id": image_id, "width": width, "height": height, "file_name": name, "license": 0,
                           "flickr_url": "", "coco_url": "", "date_captured": 0})  # fmt: skip
            objects = [(c - 1 if c > 1 else 1, [float(v) for v in bbox]) for c, bbox in _objects(s, i, width, height)]
            for category, bbox in objects:
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "segmentation": [],
                                    "area": bbox[2] * bbox[3], "bbox": bbox, "iscrowd": 0, "attributes": {"occluded": False}})  # fmt: skip
            written.setdefault(subset, []).append({**images[-1], "objects": objects})
        document = {
            "licenses": [{"name": "", "id": 0, "url": ""}],
            "info": {"contributor": "", "date_created": "", "description": "", "url": "", "version": "", "year": ""},
            "categories": [{"id": n + 1, "name": name, "supercategory": ""} for n, name in enumerate(CLASSES[:2])],
            "images": images,
            "annotations": annotations,
        }
        (root / "annotations" / f"instances_{subset}.json").write_text(json.dumps(document))
    return written


def read_back(out: Path, split: str) -> dict[str, dict[str, Any]]:
    """Each record of ``split``, by its file name, as TensorFlow parses it alone (no batch's padding)."""
    import tensorflow as tf

    from tests.tfread import shard_files, spec_from_manifest

    spec, records = spec_from_manifest(str(out)), {}
    for raw in tf.data.TFRecordDataset(shard_files(str(out), split)):
        parsed = tf.io.parse_single_example(raw, spec)
        record = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()}
        records[bytes(record["image/filename"]).decode()] = record
    return records


def assert_exact(out: Path, written: dict[str, list[dict[str, Any]]], names: dict[int, str], ids: dict[int, int]) -> None:
    """Every image a record, every box within 0.5 px, every class its name and written id."""
    for split, images in written.items():
        records = read_back(out, split)
        assert sorted(records) == sorted(image["file_name"] for image in images)
        for image in images:
            record = records[image["file_name"]]
            width, height = image["width"], image["height"]
            assert (int(record["image/width"]), int(record["image/height"])) == (width, height)
            assert bytes(record["image/source_id"]).decode() == str(image["id"])
            boxes = np.stack([record[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], axis=-1).reshape(-1, 4)
            want = [[x, y, min(x + w, width), min(y + h, height)] for _, (x, y, w, h) in image["objects"]]
            np.testing.assert_allclose(boxes * [width, height, width, height], np.reshape(want, (-1, 4)), atol=0.5)
            assert [bytes(t).decode() for t in record["image/object/class/text"]] == [names[c] for c, _ in image["objects"]]
            assert list(record["image/object/class/label"]) == [ids[c] for c, _ in image["objects"]]


# -- Roboflow ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roboflow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    root = tmp_path_factory.mktemp("roboflow") / "traffic-lights.v3i.coco"
    return root, write_roboflow(root)


def test_a_roboflow_export_folder_builds_its_three_splits_exact(roboflow: tuple[Path, Any], tmp_path: Path) -> None:
    root, written = roboflow
    out = tmp_path / "out"
    result = shardkit.build([root], out, workers=1, progress=False)
    assert result.manifest is not None and sorted(result.manifest.splits) == ["test", "train", "valid"]
    names = {0: DATASET, **{n + 1: name for n, name in enumerate(CLASSES)}}
    assert_exact(out, written, names, {c: c + 1 for c in names})  # 0-based: every id moved up by 1
    entry = json.loads((out / "manifest.json").read_text())["config"]["features"]["image/object"]
    assert (entry["class_ids"], entry["input_ids"], entry["classes"]) == ([1, 2, 3, 4], [0, 1, 2, 3], [DATASET, *CLASSES])
    assert result.notes[0].startswith(
        "class ids moved up by 1, as the input's 0 is the TF OD API's background: 0 -> 1, 1 -> 2, 2 -> 3, ..."
    )
    text = (out / "label_map.pbtxt").read_text()
    assert text.startswith(f"item {{\n  # 0 in the input\n  id: 1\n  name: '{DATASET}'\n}}\n") and "id: 0" not in text
    assert label_map.problem(text.encode()) is None
    assert shardkit.verify([str(out)], deep=True).ok


def test_roboflow_files_given_one_by_one_are_split_by_their_folders(roboflow: tuple[Path, Any]) -> None:
    root, _ = roboflow
    found = discover([root / "train" / "_annotations.coco.json", root / "valid" / "_annotations.coco.json"])
    assert [f.split for f in found] == ["train", "valid"]  # was one split, "_annotations.coco", its image ids repeating


def test_the_cli_builds_the_export_folder_and_says_the_ids_moved(roboflow: tuple[Path, Any], tmp_path: Path) -> None:
    root, _ = roboflow
    result = CliRunner().invoke(main, ["build", str(root), "-o", str(tmp_path / "out"), "-w", "1"])
    assert result.exit_code == 0, result.output
    assert "test 3 records in 1 shard, train 3 records in 1 shard, valid 3 records in 1 shard" in result.output
    assert result.output.count("class ids moved up by 1") == 1


def test_two_exports_splits_of_one_name_are_refused_not_merged(roboflow: tuple[Path, Any], tmp_path: Path) -> None:
    root, _ = roboflow
    other = tmp_path / "other"
    write_roboflow(other)
    first, second = root / "train" / "_annotations.coco.json", other / "train" / "_annotations.coco.json"
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([first, second], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == (
        f"{second}: its name puts it in split 'train', as {first} from another folder: "
        "build each to an output of its own (--split NAME would put every input, other splits too, in that one split)"
    )
    with pytest.raises(ShardkitError) as repeated:  # asked to merge: their ids, both from 0, would repeat
        shardkit.build([first, second], tmp_path / "out", split="train", workers=1, progress=False)
    assert str(repeated.value).startswith(f"{second}: image id 0 is also one of {first}'s, in split 'train': the records' image/source_id")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_index_files_of_one_split_in_one_folder_still_make_one_split(tmp_path: Path) -> None:
    for name in ("train_0.txt", "train_1.txt", "val.txt"):
        (tmp_path / name).write_text("a.jpg 1\n")
    assert [(f.name, f.split) for f in discover([tmp_path])] == [("train_0.txt", "train"), ("train_1.txt", "train"), ("val.txt", "val")]


# -- datumaro -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def datumaro(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    root = tmp_path_factory.mktemp("datumaro") / "dataset"
    return root, write_datumaro(root)


@pytest.mark.parametrize("given", ["files", "folder"])
def test_a_datumaro_export_finds_each_splits_images_and_builds_exact(given: str, datumaro: tuple[Path, Any], tmp_path: Path) -> None:
    root, written = datumaro
    files = [root / "annotations" / "instances_train.json", root / "annotations" / "instances_val.json"]
    result = shardkit.build(files if given == "files" else [root], tmp_path / "out", workers=1, progress=False)
    assert result.manifest is not None and sorted(result.manifest.splits) == ["train", "val"]
    assert_exact(tmp_path / "out", written, {1: CLASSES[0], 2: CLASSES[1]}, {1: 1, 2: 2})  # ids from 1: as written
    assert "input_ids" not in json.loads((tmp_path / "out" / "manifest.json").read_text())["config"]["features"]["image/object"]
    assert not result.notes


# -- the standard layout, with file names that repeat their folder ---------------------------------


def _standard(root: Path, file_name: str) -> Path:
    (root / "train2017").mkdir(parents=True)
    photo(root / "train2017" / "a.jpg", 40, 30, 1)
    document = {"images": [{"id": 7, "file_name": file_name, "width": 40, "height": 30}],
                "annotations": [{"id": 1, "image_id": 7, "category_id": 1, "bbox": [2, 3, 10, 12], "area": 120, "iscrowd": 0}],
                "categories": [{"id": 1, "name": "car", "supercategory": "vehicle"}]}  # fmt: skip
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    path = root / "annotations" / "instances_train2017.json"
    path.write_text(json.dumps(document))
    return path


def test_a_file_name_that_carries_its_split_folder_resolves_once(tmp_path: Path) -> None:
    path = _standard(tmp_path / "coco", "train2017/a.jpg")  # was .../train2017/train2017/a.jpg: file not found
    out = tmp_path / "out"
    shardkit.build([path], out, workers=1, progress=False)
    [record] = read_back(out, "train").values()
    np.testing.assert_allclose(
        [record[f"image/object/bbox/{k}"][0] for k in ("xmin", "ymin", "xmax", "ymax")], [2 / 40, 3 / 30, 12 / 40, 15 / 30]
    )


def test_a_folder_of_the_split_folders_name_inside_it_keeps_names_under_it(tmp_path: Path) -> None:
    path = _standard(tmp_path / "coco", "train2017/a.jpg")
    nested = tmp_path / "coco" / "train2017" / "train2017"  # the names may mean this folder: it is read
    nested.mkdir()
    with pytest.raises(ShardkitError, match=f"{nested / 'a.jpg'}: file not found"):
        shardkit.build([path], tmp_path / "out", workers=1, progress=False)


# -- category ids and names the label map must carry -----------------------------------------------


def _one_image(root: Path, categories: list[dict[str, Any]], category_id: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    photo(root / "a.jpg", 32, 24, 3)
    annotation = {"id": 1, "image_id": 1, "category_id": category_id, "bbox": [1, 2, 8, 9], "area": 72, "iscrowd": 0}
    document = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": 32, "height": 24}],
        "categories": categories,
        "annotations": [annotation],
    }
    path = root / "instances_val.json"
    path.write_text(json.dumps(document, indent=2))
    return path


def test_a_negative_category_id_is_one_line_naming_the_file_and_category(tmp_path: Path) -> None:
    path = _one_image(tmp_path, [{"id": -1, "name": "car"}, {"id": 2, "name": "bus"}], 2)
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([path], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == f"{path}: categories[0] ('car'): id -1 is negative: give it an id of 0 or more"


ODD_NAMES = ["it's", 'say "hi"', "back\\slash", "two\nlines", "tab\there", "bell\x07", "café 日本"]


def test_names_with_quotes_backslashes_and_line_breaks_give_a_label_map_the_od_api_loads(tmp_path: Path) -> None:
    categories = [{"id": n + 1, "name": name} for n, name in enumerate(ODD_NAMES)]
    out = tmp_path / "out"
    shardkit.build([_one_image(tmp_path / "set", categories, 4)], out, workers=1, progress=False)
    content = (out / "label_map.pbtxt").read_bytes()
    assert label_map.problem(content) is None
    try:  # the API itself where it is installed; else protobuf's parser into a message of its shape
        from object_detection.utils import label_map_util

        items = [(item.id, item.name) for item in label_map_util.load_labelmap(str(out / "label_map.pbtxt")).item]
    except ImportError:
        from google.protobuf import text_format

        message = label_map._message_class()()
        text_format.Merge(content.decode(), message)
        items = [(item.id, item.name) for item in message.item]
    assert items == [(n + 1, name) for n, name in enumerate(ODD_NAMES)]
    [record] = read_back(out, "val").values()
    assert [bytes(t).decode() for t in record["image/object/class/text"]] == [ODD_NAMES[3]]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("item {\n  id: 0\n  name: 'car'\n}\n", "item 1 ('car') has id 0, which the TF OD API keeps for the background"),
        ("item {\n  id: -3\n  name: 'car'\n}\n", "item 1 ('car') has id -3: ids must be 0 or more"),
        ("item {\n  id: 1\n  name: 'it's'\n}\n", "does not parse as a StringIntLabelMap: 3:13 : "),
        ("item {\n  id: 0\n  name: 'background'\n}\nitem {\n  id: 1\n  name: 'car'\n}\n", None),
    ],
)
def test_verify_deep_loads_the_label_map_as_the_od_api_does(text: str, problem: str | None, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([_one_image(tmp_path / "set", [{"id": 1, "name": "car"}], 1)], out, workers=1, progress=False)
    assert shardkit.verify([str(out)], deep=True).ok
    (out / "label_map.pbtxt").write_text(text)  # as a build before this check wrote it, or a hand edit
    report = shardkit.verify([str(out)], deep=True)
    if problem is None:
        assert report.ok
    else:
        assert [p.startswith(f"{out / 'label_map.pbtxt'}: {problem}") for p in report.problems] == [True], report.problems
    assert shardkit.verify([str(out)]).ok  # the quick check reads records only


# -- FiftyOne -------------------------------------------------------------------------------------


def write_fiftyone(root: Path) -> dict[str, list[dict[str, Any]]]:
    """``dataset.match_tags(split).export(export_dir=ROOT/split, dataset_type=fo.types.COCODetectionDataset)``
    for each split: ``labels.json`` (info, licenses, categories, images, annotations; ids from 1)
    beside ``data/``, the images."""
    written: dict[str, list[dict[str, Any]]] = {}
    image_id = 0
    for s, split in enumerate(("train", "validation")):
        (root / split / "data").mkdir(parents=True)
        images, annotations = [], []
        for i in range(3):
            image_id += 1
            width, height = 56 + 4 * i, 44 + 4 * s
            name = f"{image_id:06d}.jpg"
            photo(root / split / "data" / name, width, height, 30 + image_id)
            images.append({"id": image_id, "file_name": name, "height": height, "width": width, "license": None, "coco_url": None})
            for category, bbox in _objects(s, i, width, height):
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "bbox": bbox,
                                    "area": bbox[2] * bbox[3], "iscrowd": 0})  # fmt: skip
            written.setdefault(split, []).append({**images[-1], "objects": _objects(s, i, width, height)})
        document = {
            "info": {"year": "", "version": "", "description": "Exported from FiftyOne", "contributor": "", "url": "https://voxel51.com/fiftyone",
                     "date_created": "2024-03-05T10:21:07"},
            "licenses": [],
            "categories": [{"id": n + 1, "name": name, "supercategory": None} for n, name in enumerate(CLASSES)],
            "images": images,
            "annotations": annotations,
        }  # fmt: skip
        (root / split / "labels.json").write_text(json.dumps(document))
    return written


def test_a_fiftyone_export_finds_its_data_folder_and_builds_each_split_exact(tmp_path: Path) -> None:
    root = tmp_path / "export"
    written = write_fiftyone(root)
    files = [root / "train" / "labels.json", root / "validation" / "labels.json"]
    assert [f.split for f in discover(files)] == ["train", "validation"]  # was one split, "labels", its ids merged
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert result.manifest is not None and sorted(result.manifest.splits) == ["train", "validation"]
    assert_exact(tmp_path / "out", written, {n + 1: name for n, name in enumerate(CLASSES)}, {1: 1, 2: 2, 3: 3})


def test_a_cvat_task_coco_export_finds_its_flat_images_folder(tmp_path: Path) -> None:
    """CVAT's "COCO 1.0" export of a task: ``annotations/instances_default.json`` beside a flat
    ``images/`` (no ``images/default/``); file names as CVAT writes them, the frame's name."""
    root = tmp_path / "task_3_dataset"
    (root / "annotations").mkdir(parents=True)
    (root / "images").mkdir()
    images, annotations = [], []
    for i in range(2):
        name = f"frame_{i:06d}.jpg"
        photo(root / "images" / name, 48, 40, 60 + i)
        images.append({"id": i + 1, "width": 48, "height": 40, "file_name": name, "license": 0, "flickr_url": "", "coco_url": "",
                       "date_captured": 0})  # fmt: skip
        annotations.append({"id": i + 1, "image_id": i + 1, "category_id": 1, "segmentation": [], "area": 120.0,
                            "bbox": [4.0, 5.0, 12.0, 10.0], "iscrowd": 0, "attributes": {"occluded": False}})  # fmt: skip
    document = {"licenses": [{"name": "", "id": 0, "url": ""}], "info": {"contributor": "", "date_created": "", "description": "",
                "url": "", "version": "", "year": ""}, "categories": [{"id": 1, "name": "car", "supercategory": ""}],
                "images": images, "annotations": annotations}  # fmt: skip
    (root / "annotations" / "instances_default.json").write_text(json.dumps(document))
    result = shardkit.build([root / "annotations" / "instances_default.json"], tmp_path / "out", workers=1, progress=False)
    assert result.manifest is not None and result.manifest.splits["default"].records == 2
    written = {"default": [{**image, "objects": [(1, [4.0, 5.0, 12.0, 10.0])]} for image in images]}
    assert_exact(tmp_path / "out", written, {1: "car"}, {1: 1})


def test_a_coco_file_of_another_name_keeps_its_split_and_index_files_keep_their_folder(tmp_path: Path) -> None:
    """Only the exports that put a split a folder name it by the folder: ``data/mine/annotations.json``
    is split ``annotations`` as ever, not ``mine``. A folder holding index files of its own is read
    by them, though it holds an ``annotations/instances_*.json`` too (Ultralytics' ``coco/``)."""
    root = tmp_path / "mine"
    named = _standard(root, "a.jpg")
    plain = named.rename(root / "annotations.json")
    assert [f.split for f in discover([plain])] == ["annotations"]
    plain.rename(named)
    (root / "README.roboflow.txt").write_text("exported\n")  # an export's note is no index file of its folder
    assert [f.split for f in discover([root])] == ["train"]  # an export's folder: its annotations/ files
    (root / "README.roboflow.txt").unlink()
    (root / "train2017.txt").write_text("train2017/a.jpg\n")
    assert [(f.name, f.split) for f in discover([root])] == [("train2017.txt", "train2017")]
