"""COCO JSON streamed: the rows a plain ``json.load`` reading gives (that reading, written here, is
the oracle), in the images' order, whatever the file's layout and however many buckets; every
bad input as one line naming the file and the annotation or position; temporary files gone."""

from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.detection import coco
from shardkit.pipeline.inputs.formats.detection.coco import COCO
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from tests.detection_sets import CATEGORIES, write_coco


def oracle(path: Path) -> list[tuple[int, str, str]]:
    """(line, values as JSON, key) of each row, read the plain way: the whole file by ``json``; a
    row's line is 0 (an image is no line of the file)."""
    document = json.loads(path.read_text())
    categories = {c["id"]: c for c in document.get("categories", [])}
    points = max((len(c.get("keypoints") or []) for c in categories.values()), default=0)
    by_image: dict[Any, list[dict[str, Any]]] = {image["id"]: [] for image in document["images"]}
    for ann in document.get("annotations", []):
        by_image[ann["image_id"]].append(ann)
    rows = []
    for image in document["images"]:
        anns = by_image[image["id"]]
        objects: dict[str, Any] = {
            "size": [image["width"], image["height"]] if "width" in image and "height" in image else None,
            "bbox": [[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)],
            "label": [int(a["category_id"]) for a in anns],
            "text": [str(categories[a["category_id"]]["name"]) for a in anns],
            "ref": [f"annotation {a['id']}" for a in anns],
            "is_crowd": [int(a.get("iscrowd", 0)) for a in anns],
            "area": [None if a.get("area") is None else float(a["area"]) for a in anns],
        }
        if any("segmentation" in a for a in anns):
            objects["segmentation"] = [a.get("segmentation") for a in anns]
        if points:
            objects["keypoints"] = [(list(a.get("keypoints") or []) + [0.0] * points * 3)[: points * 3] for a in anns]
            objects["points"] = points
        name = image["file_name"]
        rows.append((0, json.dumps([name, name, str(image["id"]), objects]), name))
    return rows


def read(path: Path) -> list[Row | EntryError]:
    return list(COCO.read_rows(Piece(str(path))))


def as_compared(rows: list[Row | EntryError]) -> list[tuple[int, str, str]]:
    assert all(isinstance(r, Row) for r in rows), [str(r) for r in rows if isinstance(r, EntryError)]
    return [(r.line, json.dumps(list(r.values)), r.key) for r in rows if isinstance(r, Row)]


def write(path: Path, document: dict[str, Any] | str) -> Path:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def random_set(
    seed: int, images: int = 120, annotations: int = 900, order: tuple[str, ...] = ("images", "annotations", "categories")
) -> dict[str, Any]:
    """Images with sparse ids in no order, annotations with polygons and now and then a crowd's
    RLE, interleaved across them; a third of the images without any."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 10 * images), images)
    entries = [{"id": i, "file_name": f"{i:012d}.jpg", "width": 640, "height": 480, "license": 1} for i in ids]
    anns = []
    owners = [rng.choice(ids[: 2 * images // 3]) for _ in range(annotations)]
    for n, owner in enumerate(owners):
        x, y, w, h = rng.randint(0, 300), rng.uniform(0, 200), round(rng.uniform(1, 300), 2), rng.randint(1, 200)
        segmentation: Any = [[round(rng.uniform(0, 640), 2) for _ in range(2 * rng.randint(3, 30))]]
        if n % 50 == 0:
            segmentation = {"counts": [5, 10, 640 * 480 - 15], "size": [480, 640]}
        anns.append(
            {"id": 1000 + n, "image_id": owner, "category_id": rng.choice([1, 3, 7]), "bbox": [x, y, w, h],
             "area": w * h, "iscrowd": int(n % 50 == 0), "segmentation": segmentation}
        )  # fmt: skip
    parts = {"images": entries, "annotations": anns, "categories": [{k: v for k, v in c.items() if k != "keypoints"} for c in CATEGORIES]}
    return {"info": {"year": 2017}, **{key: parts[key] for key in order}}


@pytest.fixture(scope="module")
def val(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"), edges=True)


@pytest.fixture()
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR for the reader's temporary files, so a test can see that none are left."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


# -- the rows ---------------------------------------------------------------------------------


def test_rows_are_those_json_load_gives(val: Path, scratch: Path) -> None:
    assert as_compared(read(val)) == oracle(val)
    assert not os.listdir(scratch)


@pytest.mark.parametrize(
    "order",
    [
        ("images", "annotations", "categories"),  # the usual one: the images' pass stops at their end
        ("categories", "annotations", "images"),  # images last: their pass reads the whole file in C
        ("annotations", "categories", "images"),
    ],
)
def test_any_layout_gives_the_same_rows_in_the_images_order(order: tuple[str, ...], tmp_path: Path, scratch: Path) -> None:
    path = write(tmp_path / "instances_train.json", random_set(1, order=order))
    rows = read(path)
    assert as_compared(rows) == oracle(path)
    assert [r.line for r in rows] == [0] * 120  # an image is no line of the file: its key names it
    assert not os.listdir(scratch)


def test_many_buckets_and_spills_change_nothing(tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "instances_train.json", random_set(2, images=300, annotations=3000))
    want = oracle(path)
    monkeypatch.setattr(coco, "_BUCKET_BYTES", 4096)  # one bucket for every few images
    monkeypatch.setattr(coco, "_BUFFER_BYTES", 2048)  # appended to the bucket files again and again
    monkeypatch.setattr(coco, "_IMAGES_CHUNK", 7)
    assert as_compared(read(path)) == want
    assert not os.listdir(scratch)


def test_string_ids_and_images_without_annotations(tmp_path: Path) -> None:
    document = {
        "images": [{"id": "a", "file_name": "a.jpg"}, {"id": "b", "file_name": "b.jpg", "width": 4, "height": 3}],
        "annotations": [{"id": 1, "image_id": "b", "category_id": 3, "bbox": [0, 0.5, 2, 1]}],
        "categories": [{"id": 3, "name": "car"}],
    }
    path = write(tmp_path / "instances_x.json", document)
    assert as_compared(read(path)) == oracle(path)


def test_a_value_met_twice_in_an_annotation_is_its_own_in_every_one(tmp_path: Path) -> None:
    # A one-letter key twice in a segmentation: one string object (Python's own), memoized once in
    # the record's pickle and fetched back the second time.
    anns = [{"id": n, "image_id": 1, "category_id": 3, "bbox": [0, 0, 1, 1], "segmentation": {"s": [3, 4], "x": {"s": [n]}}}
            for n in range(1, 5)]  # fmt: skip
    anns.insert(0, {"id": 0, "image_id": 1, "category_id": 3, "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 1, 0, 1, 1]]})
    document = {"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": anns, "categories": [{"id": 3, "name": "car"}]}
    path = write(tmp_path / "instances_x.json", document)
    assert as_compared(read(path)) == oracle(path)


def test_an_image_info_file_without_annotations_gives_rows_without_objects(tmp_path: Path) -> None:
    path = write(tmp_path / "image_info_test.json", {"images": [{"id": 1, "file_name": "a.jpg"}], "categories": [{"id": 1, "name": "x"}]})
    assert as_compared(read(path)) == oracle(path)


def test_the_label_map_has_every_category_also_those_without_instances(val: Path) -> None:
    assert COCO.label_map(str(val)) == ((1, "person"), (3, "car"), (7, "train"), (9, "boat"))  # no boat in any image


def test_a_category_without_instances_is_in_the_built_label_map(val: Path, tmp_path: Path) -> None:
    shardkit.build([val], tmp_path / "out", workers=1, progress=False)
    assert "item {\n  id: 9\n  name: 'boat'\n}\n" in (tmp_path / "out" / "label_map.pbtxt").read_text()


# -- temporary files --------------------------------------------------------------------------


def open_in(folder: Path) -> list[str]:
    """The files this process holds open in ``folder``: those without a name too."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, gone by now
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [target for target in found if target.startswith(f"{folder}/")]


def test_temporary_files_go_when_reading_stops_early(val: Path, scratch: Path) -> None:
    rows = COCO.read_rows(Piece(str(val)))
    next(rows)
    assert len(open_in(scratch)) == 2 and not os.listdir(scratch)  # the reader's files, nameless, while it reads
    rows.close()
    assert not open_in(scratch) and not os.listdir(scratch)


def test_temporary_files_go_on_an_interrupt(val: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: Any, bucket: int) -> list[Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(coco._Buckets, "take", interrupted)
    with pytest.raises(KeyboardInterrupt):
        read(val)
    assert not os.listdir(scratch)


# -- errors: one line each, naming the file and the annotation or the image (by its place in
# images, not as a line: a position is no line of the file) ---------------------------------------


def _ann(document: dict[str, Any], position: int) -> dict[str, Any]:
    """The first annotation of the image at ``position`` (1-based)."""
    image_id = document["images"][position - 1]["id"]
    return next(a for a in document["annotations"] if a["image_id"] == image_id)


BAD_ANNOTATIONS = [
    ("category", lambda a: a.update(category_id=12), "category_id 12 is no category"),
    ("no bbox", lambda a: a.pop("bbox"), "no bbox"),
    ("short bbox", lambda a: a.update(bbox=[1, 2, 3]), "bbox [1, 2, 3] is not [x, y, width, height]"),
    ("text bbox", lambda a: a.update(bbox=[1, 2, "3", 4]), "bbox [1, 2, '3', 4] is not [x, y, width, height]"),
    ("negative bbox", lambda a: a.update(bbox=[1, 2, -3, 4]), "bbox [1, 2, -3, 4] has a negative width or height"),
    ("area", lambda a: a.update(area="big"), "area 'big' is not a number"),
]


@pytest.mark.parametrize(("change", "reason"), [b[1:] for b in BAD_ANNOTATIONS], ids=[b[0] for b in BAD_ANNOTATIONS])
def test_a_bad_annotation_is_an_error_at_its_image(change: Any, reason: str, tmp_path: Path) -> None:
    document = random_set(3, images=5, annotations=12)
    ann = _ann(document, 2)
    change(ann)
    path = write(tmp_path / "instances_val.json", document)
    errors = [r for r in read(path) if isinstance(r, EntryError)]
    image = document["images"][1]["file_name"]
    assert [str(e) for e in errors] == [f"{path}: images[1] ({image}): annotation {ann['id']}: {reason}"]
    assert errors[0].line == 0


def test_an_annotation_that_names_no_image_is_an_error_of_its_own(tmp_path: Path) -> None:
    document = random_set(3, images=5, annotations=12)
    document["annotations"][4]["image_id"] = 999
    del document["annotations"][6]["id"]
    document["annotations"][6]["image_id"] = [1]
    document["annotations"].insert(8, 17)
    path = write(tmp_path / "instances_val.json", document)
    rows = read(path)
    assert [str(e) for e in rows if isinstance(e, EntryError)] == [
        f"{path}: annotation {document['annotations'][4]['id']}: image_id 999 names no image",
        f"{path}: annotations[6]: image_id [1] names no image",
        f"{path}: annotations[8]: expected an annotation (an object), got a number",
    ]
    assert len([r for r in rows if isinstance(r, Row)]) == 5


def test_bad_images_are_errors_at_their_positions(tmp_path: Path) -> None:
    document = random_set(3, images=6, annotations=12)
    images = document["images"]
    del images[1]["file_name"]
    images[2]["id"] = images[0]["id"]
    images[3]["id"] = 1.5
    images[4] = "x.jpg"
    path = write(tmp_path / "instances_val.json", document)
    errors = [str(e) for e in read(path) if isinstance(e, EntryError) and e.reason.startswith("images[")]
    assert errors == [
        f"{path}: images[1]: image {images[1]['id']}: no file_name",
        f"{path}: images[2] ({images[2]['file_name']}): image id {images[0]['id']} repeats images[0]'s",
        f"{path}: images[3] ({images[3]['file_name']}): image id 1.5 is not an integer or a string",
        f"{path}: images[4]: expected an image (an object), got a string",
    ]


def test_a_file_cut_short_stops_the_build_with_its_line_and_column(val: Path, tmp_path: Path, scratch: Path) -> None:
    text = json.dumps(json.loads(val.read_text()), indent=1)
    cut = write(tmp_path / "instances_val.json", text[: len(text) // 2])
    lines = cut.read_text().split("\n")
    want = f"{cut}:{len(lines)}:{len(lines[-1]) + 1}: not valid JSON: it ends before its last value does (cut short?)"
    with pytest.raises(ShardkitError) as info:
        read(cut)
    assert str(info.value) == want and not isinstance(info.value, EntryError)
    with pytest.raises(ShardkitError, match="cut short"):
        shardkit.build([cut], tmp_path / "out", workers=1, on_error="skip", image_root=val.parent.parent / "val2017", progress=False)
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not os.listdir(scratch)


def test_a_syntax_error_names_its_line_and_column(tmp_path: Path) -> None:
    document = json.dumps(random_set(3, images=3, annotations=4), indent=1).split("\n")
    document[9] = document[9].replace(":", ": tru", 1)  # "key": true... misspelt, in an image
    path = write(tmp_path / "instances_val.json", "\n".join(document))
    column = document[9].index("tru") + 4  # the byte after "tru": where the misspelling shows
    assert_error(path, f"{path}:10:{column}: not valid JSON: lexical error: invalid string in json text")
    text = json.dumps(random_set(3, images=3, annotations=4)) + " ünd mehr"  # one line, then garbage: columns count characters
    path = write(tmp_path / "instances_val.json", text)
    assert_error(path, f"{path}:1:{len(text) - 7}: not valid JSON: parse error: trailing garbage")


def assert_error(path: Path, message: str) -> None:
    with pytest.raises(ShardkitError) as info:
        read(path)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"annotations": [], "categories": []}, "no 'images' array"),
        ({"images": {"a": 1}, "annotations": [], "categories": []}, "'images' is an object, not an array"),
        ({"categories": [], "annotations": [], "images": 3}, "'images' is a number, not an array"),  # found by the C pass
        ({"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": {}}, "'annotations' is an object, not an array"),
        (
            {"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 1, "image_id": 1, "bbox": [0, 0, 1, 1]}]},
            "no 'categories' array",
        ),
    ],
)
def test_json_that_is_not_coco_says_what_it_lacks(document: dict[str, Any], problem: str, tmp_path: Path) -> None:
    path = write(tmp_path / "instances_val.json", document)
    assert_error(path, f"{path}: not a COCO file: {problem}")


def test_bad_categories_are_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "instances_val.json", {"images": [], "categories": [{"id": 1, "name": "a"}, {"id": "2", "name": "b"}]})
    with pytest.raises(ShardkitError, match=r"^" + str(path) + r": categories\[1\]: expected an object with an integer id and a name$"):
        COCO.label_map(str(path))
    path = write(tmp_path / "instances_val.json", {"images": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]})
    with pytest.raises(ShardkitError, match=r"categories\[1\]: id 1 repeats categories\[0\]'s$"):
        COCO.label_map(str(path))


# -- the command line: exit 1 and one line; --on-error skip lists the image and writes the rest --


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture()
def coco_copy(tmp_path: Path) -> Path:
    return write_coco(tmp_path / "set")


@pytest.mark.parametrize(
    ("change", "reason", "at_image"),
    [
        (lambda a: a.update(category_id=12), "category_id 12 is no category", True),
        (lambda a: a.update(bbox=[1, 2]), "bbox [1, 2] is not [x, y, width, height]", True),
        (lambda a: a.update(image_id=5), "image_id 5 names no image", False),
    ],
)
def test_the_cli_prints_one_line_and_skip_lists_the_entry(
    change: Any, reason: str, at_image: bool, coco_copy: Path, tmp_path: Path
) -> None:
    document = json.loads(coco_copy.read_text())
    ann = document["annotations"][0]
    position = [image["id"] for image in document["images"]].index(ann["image_id"])
    change(ann)
    write(coco_copy, document)
    reason = f"annotation {ann['id']}: {reason}"
    if at_image:
        reason = f"images[{position}] ({document['images'][position]['file_name']}): {reason}"
    assert run("build", str(coco_copy), "-o", str(tmp_path / "out"), "-w", "1") == (1, f"Error: {coco_copy}: {reason}\n")
    code, output = run("build", str(coco_copy), "-o", str(tmp_path / "skipped"), "-w", "1", "--on-error", "skip")
    assert code == 0 and "skipped 1 bad entry" in output
    listed = [json.loads(x) for x in (tmp_path / "skipped" / "errors.jsonl").read_text().splitlines()]
    assert listed == [{"split": "val", "source": str(coco_copy), "line": 0, "reason": reason}]
    manifest = json.loads((tmp_path / "skipped" / "manifest.json").read_text())
    assert manifest["splits"]["val"]["records"] == (5 if at_image else 6)  # the rest written


def test_the_cli_names_a_truncated_file_and_a_missing_image_in_one_line(coco_copy: Path, tmp_path: Path) -> None:
    text = coco_copy.read_text()
    cut = write(coco_copy.parent / "instances_cut2017.json", text[:-40])
    code, output = run("build", str(cut), "-o", str(tmp_path / "out"), "-w", "2", "--on-error", "skip")
    assert (code, output) == (1, f"Error: {cut}:1:{len(text) - 39}: not valid JSON: it ends before its last value does (cut short?)\n")
    image = coco_copy.parent.parent / "val2017" / "000000000002.jpg"
    image.unlink()
    code, output = run("build", str(coco_copy), "-o", str(tmp_path / "out"), "-w", "1")
    assert (code, output) == (1, f"Error: {coco_copy}: image/encoded: {image}: file not found\n")  # no line: an image has none


def test_categories_at_the_end_are_read_from_the_tail_alone(val: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shardkit.pipeline.inputs.formats.detection import streamed_json

    def no_pass(path: str, key: str) -> Any:
        raise AssertionError(f"a whole pass over {path} for {key}")

    monkeypatch.setattr(streamed_json, "items", no_pass)
    assert coco._read_categories(str(val)) == ((1, "person", 3), (3, "car", 0), (7, "train", 0), (9, "boat", 0))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}], "info": {}}', None),  # not the last member
        ('{"images": [], "annotations": [{"x": {"categories": [{"id": 2, "name": "b"}]}}]}', None),  # nested, not top-level
        ('{"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}', None),  # cut short
        ('{"images": [], "note": "\\"categories\\": [2]}", "categories": [{"id": 1, "name": "a"}]}', [{"id": 1, "name": "a"}]),
    ],
)
def test_the_tail_is_trusted_only_for_the_top_level_objects_last_member(text: str, found: Any, tmp_path: Path) -> None:
    from shardkit.pipeline.inputs.formats.detection import streamed_json

    path = tmp_path / "x.json"
    path.write_text(text)
    assert streamed_json.trailing_array(str(path), "categories") == found  # None: a whole pass reads it instead
