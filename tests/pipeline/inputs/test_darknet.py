"""Darknet YOLO as CVAT's "YOLO 1.1" export and datumaro's ``yolo`` format write it: ``obj.data``,
``obj.names``, image lists with ``data/`` prefixes, labels beside the images. Built from the
folder or from ``obj.data``, every box and class comes back; a bad file is one line naming its
line; a plain image list whose images have YOLO labels never builds as images alone unsaid."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError, ShardkitWarning
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.darknet import DARKNET
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import photo
from tests.hostile import digests, one_line_error, run_cli
from tests.yolo_exports import TRUTH, assert_truth, write_darknet

KEPT = {"train": "train", "valid": "valid"}  # the splits as obj.data's keys name them


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_darknet(tmp_path_factory.mktemp("cvat") / "export")


@pytest.fixture()
def export_copy(export: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(export.parent, tmp_path / "export")) / "obj.data"


def test_obj_data_and_its_folder_name_the_splits_as_its_keys(export: Path) -> None:
    assert registry.file_format(str(export)) is DARKNET and registry.layout_format(str(export.parent)) is DARKNET
    for given in (export, export.parent):
        assert [(f.split, f.path, f.format) for f in discover([given])] == [
            ("train", str(export), DARKNET),
            ("valid", str(export), DARKNET),
        ]
    assert DARKNET.label_map(str(export)) == ((1, "car"), (2, "person"), (3, "traffic light"))


def test_rows_are_the_listed_images_with_the_labels_beside_them(export: Path) -> None:
    train, _ = discover([export])
    got = [r for r in train.rows() if isinstance(r, Row)]
    assert [(r.source, r.line, r.key) for r in got] == [(str(export), 0, f"obj_train_data/{n}") for n, *_ in TRUTH["train"]]
    first = got[0].values
    assert first[:3] == (str(export.parent / "obj_train_data" / "frame_000000.jpg"), "frame_000000.jpg", "frame_000000")
    assert (first[3]["text"], first[3]["ref"]) == (
        ["car", "traffic light"],
        ["obj_train_data/frame_000000.txt:1", "obj_train_data/frame_000000.txt:2"],
    )
    assert got[2].values[3]["bbox"] == []  # an empty label file: a negative image, kept


@pytest.mark.parametrize("layout", ["datumaro", "cvat-page", "darknet-data-folder"])
def test_a_build_gives_every_box_and_class_back(tmp_path: Path, layout: str) -> None:
    """datumaro's ``data/`` prefixes; the layout CVAT's page shows (no prefix); an export kept as
    Darknet keeps it, in its ``data/`` folder (paths then resolve either way)."""
    pytest.importorskip("tensorflow")
    root = tmp_path / ("data" if layout == "darknet-data-folder" else "export")
    data = write_darknet(root, prefix=layout != "cvat-page")
    (root / "obj_valid_data" / "frame_000004.txt").unlink()  # no label file at all: a negative image too
    result = shardkit.build([root], tmp_path / "out", workers=1, progress=False)
    assert (result.records, result.skipped) == (5, 0)
    assert_truth(tmp_path / "out", KEPT)
    again = shardkit.build([data], tmp_path / "again", workers=1, progress=False)
    assert again.records == 5
    for shard in sorted((tmp_path / "out").glob("*.tfrecord")):
        assert (tmp_path / "again" / shard.name).read_bytes() == shard.read_bytes()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("classes = 4\ntrain = data/train.txt\nnames = data/obj.names\n", ":1: classes = 4, but data/obj.names names 3 classes"),
        ("classes = 3\ntrain = data/train.txt\n", ": names: missing (the file of class names: names = data/obj.names)"),
        ("train = data/train.txt\nnames = data/obj.names\n[net]\n", ":3: expected key = value (Darknet's .data lines), got '[net]'"),
        (
            "classes = 3\ntest = data/test.txt\nnames = data/obj.names\n",
            ": no split's image list is there (test = data/test.txt): expected train = data/train.txt beside obj.data",
        ),
        (
            "classes = 1\ntrain = data/train.txt\nnames = ../secret.names\n",
            ":3: names = ../secret.names: {outside} is outside {root}: refused",
        ),
    ],
)
def test_a_bad_obj_data_is_one_line_naming_its_line(export_copy: Path, tmp_path: Path, text: str, message: str) -> None:
    export_copy.write_text(text)
    (tmp_path / "secret.names").write_text("hunter2\n")  # a names file outside: never read into the label map
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([export_copy], tmp_path / "out", workers=1, progress=False, allow_outside_root=True)
    said = message.format(outside=tmp_path / "secret.names", root=export_copy.parent)
    assert str(refused.value).startswith(f"{export_copy}{said}") and "hunter2" not in str(refused.value)


def test_a_split_whose_list_is_not_there_is_left_out_with_a_warning(export_copy: Path, tmp_path: Path) -> None:
    """As Darknet's own coco.data names ``valid = coco_testdev``, a list no one ships."""
    (export_copy.parent / "valid.txt").unlink()
    with pytest.warns(ShardkitWarning, match=r"obj.data: valid = data/valid.txt: no such image list: the split is left out$"):
        result = shardkit.build([export_copy], tmp_path / "out", workers=1, progress=False)
    assert result.records == len(TRUTH["train"])


def test_a_bad_entry_names_the_list_or_label_file_and_its_line(export_copy: Path, tmp_path: Path) -> None:
    root = export_copy.parent
    (root / "train.txt").write_text("data/obj_train_data/frame_000000.jpg\n\ndata/obj_train_data/gone.jpg\n")
    (root / "obj_valid_data" / "frame_000003.txt").write_text("2 0.5 0.5 0.1 0.1\n3 0.5 0.5 0.1 0.1\n")
    train, valid = discover([export_copy])
    assert [str(e) for e in train.rows() if isinstance(e, EntryError)] == [
        f"{root}/train.txt:3: {root}/obj_train_data/gone.jpg: no such image file"
    ]
    assert [str(e) for e in valid.rows() if isinstance(e, EntryError)] == [
        f"{root}/obj_valid_data/frame_000003.txt:2: class 3 is not in names (0 to 2)"
    ]
    result = shardkit.build([export_copy], tmp_path / "out", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (2, 2)


def test_an_object_a_config_cannot_build_is_named_by_its_label_line(export_copy: Path, tmp_path: Path) -> None:
    """A worker's message about an object names its label file and line, and no line of obj.data
    (which holds none of it): YOLO labels have no polygon to draw a mask from."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "features:\n  image/encoded: {kind: encoded_image, column: image, encoding: raw}\n"
        "  image/object: {kind: objects, column: objects, masks: true}\n"
    )
    with pytest.raises(EntryError) as refused:
        shardkit.build([export_copy], tmp_path / "out", config=config, workers=1, progress=False)
    assert (refused.value.source, refused.value.line) == (str(export_copy), 0)
    assert str(refused.value).startswith(f"{export_copy}: ") and "obj_train_data/frame_00000" in str(refused.value)
    assert ".txt:1: has no segmentation to draw its mask from (masks: true)" in str(refused.value)


# -- a plain image list whose images have YOLO labels ---------------------------------------------


def test_a_list_obj_data_names_is_one_line_saying_to_build_obj_data(export: Path, tmp_path: Path) -> None:
    """Before: ``train.txt`` built as plain images, every box left out (or, with datumaro's
    ``data/`` prefix, a missing file)."""
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([export.parent / "train.txt"], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == (
        f"{export.parent}/train.txt: the train image list of {export}; a list alone leaves its labels out: build {export} to read them"
    )


def _plain(root: Path, labels: str | None) -> Path:
    """A plain list of two images; the first has ``labels`` beside it (None: none)."""
    root.mkdir()
    photo(root / "a.jpg", 32, 24, 0)
    photo(root / "b.jpg", 32, 24, 1)
    if labels is not None:
        (root / "b.txt").write_text(labels)
    (root / "images.txt").write_text("a.jpg\nb.jpg\n")
    return root / "images.txt"


def test_a_plain_list_with_yolo_labels_beside_its_images_is_one_line(tmp_path: Path) -> None:
    listed = _plain(tmp_path / "set", "0 0.500000 0.500000 0.250000 0.500000\n")
    with pytest.raises(ShardkitError) as refused:
        shardkit.build([listed], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value).startswith(f"{listed}:2: {listed.parent}/b.jpg has YOLO labels ({listed.parent}/b.txt), which an image list")
    assert str(refused.value).endswith("or give a --config to build the images alone")
    config = tmp_path / "images.yaml"  # a config that asks for images alone is taken at its word
    config.write_text("features:\n  image: {kind: image, column: 0}\n")
    assert shardkit.build([listed], tmp_path / "images", config=config, workers=1, progress=False).records == 2


@pytest.mark.parametrize("beside", [None, "a caption, not a box\n", ""])
def test_a_plain_list_without_yolo_labels_builds_as_before(tmp_path: Path, beside: str | None) -> None:
    listed = _plain(tmp_path / "set", beside)
    assert shardkit.build([listed], tmp_path / "out", workers=1, progress=False).records == 2


@pytest.mark.slow
def test_the_command_builds_the_export_and_says_what_to_give_for_its_list(export: Path, tmp_path: Path) -> None:
    before = digests(export.parent)
    built = run_cli(["build", export.parent, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert built.returncode == 0 and "train 3 records in 1 shard, valid 2 records in 1 shard" in built.stdout, built.stderr
    line = one_line_error(run_cli(["build", export.parent / "train.txt", "-o", tmp_path / "list", "-w", "1"], tmp_path))
    told = f"the train image list of {export}; a list alone leaves its labels out: build {export} to read them"
    assert line == f"Error: {export.parent}/train.txt: {told}"
    assert digests(export.parent) == before
