"""Label Studio's JSON export, as Label Studio writes it: told by its content ahead of COCO, one
record per task (negatives kept), the annotation the documented rule picks, predictions left out,
image paths as Label Studio names them, and a build TensorFlow reads back with every box within
0.5 px of the percentages written, the class names, and polygon masks as pycocotools draws them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pycocotools import mask as coco_mask

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.detection.labelstudio import LABEL_STUDIO, image_path
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.index_files import discover
from tests.detection_sets import photo
from tests.labelling_sets import ls_annotation, ls_polygon, ls_rectangle, ls_task, write_label_studio
from tests.paths import REPO
from tests.tfread import decode, read_split

EXPORT = "project-3-at-2024-05-01-10-00-8f3a2b1c.json"
SIZES = {"1a2b3c4d-street.jpg": (64, 48), "9f8e7d6c-park.jpg": (80, 60), "0a0b0c0d-empty.jpg": (64, 48), "gate.jpg": (72, 40),
         "5e6f7a8b-yard.jpg": (56, 48)}  # fmt: skip
# What each task's chosen annotation holds: (class, x, y, w, h) in percent, or a polygon's points.
WANT: dict[int, list[tuple[str, Any]]] = {
    11: [("car", (10.5, 20.0, 30.0, 40.0)), ("traffic light", [[50.0, 10.0], [62.5, 12.5], [60.0, 45.5]])],
    12: [("person", (5.0, 6.25, 20.0, 50.0))],  # the latest of the two kept: not the cancelled one, nor the prediction
    13: [],  # no annotation: a negative
    14: [("person", (40.0, 30.0, 25.5, 60.0))],  # the ground truth, though older
    15: [],  # an annotation with no region: a negative
}


def _region(i: str, label: str, geometry: Any, size: tuple[int, int]) -> dict[str, Any]:
    return ls_polygon(i, label, geometry, size) if isinstance(geometry, list) else ls_rectangle(i, label, *geometry, size)


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ls")
    (root / "photos").mkdir()
    for seed, (name, (w, h)) in enumerate(SIZES.items()):
        photo(root / ("photos" if name == "gate.jpg" else ".") / name, w, h, seed)  # local storage: photos/
    street, park, gate = SIZES["1a2b3c4d-street.jpg"], SIZES["9f8e7d6c-park.jpg"], SIZES["gate.jpg"]
    first = [_region(f"r{k}", label, g, street) for k, (label, g) in enumerate(WANT[11])]
    tasks = [
        ls_task(11, "/data/upload/3/1a2b3c4d-street.jpg", [ls_annotation(101, 11, first, "2024-05-01T10:00:00.000000Z")]),
        ls_task(
            12,
            "/data/upload/3/9f8e7d6c-park.jpg",
            [
                ls_annotation(102, 12, [ls_rectangle("c1", "dog", 1, 1, 9, 9, park)], "2024-05-02T10:00:00.000000Z", was_cancelled=True),
                ls_annotation(103, 12, [ls_rectangle("c2", "car", 2, 2, 9, 9, park)], "2024-05-01T10:00:00.000000Z"),
                ls_annotation(104, 12, [ls_rectangle("c3", "person", 5.0, 6.25, 20.0, 50.0, park)], "2024-05-01T11:00:00.000000Z"),
            ],
            predictions=[{"id": 7, "model_version": "yolo", "score": 0.9, "result": [ls_rectangle("p1", "dog", 3, 3, 9, 9, park)]}],
        ),
        ls_task(13, "/data/upload/3/0a0b0c0d-empty.jpg", []),
        ls_task(
            14,
            "/data/local-files/?d=photos/gate.jpg",
            [
                ls_annotation(
                    105,
                    14,
                    [
                        ls_rectangle("g1", "person", 40.0, 30.0, 25.5, 60.0, gate),
                        {
                            "id": "ch",
                            "from_name": "weather",
                            "to_name": "image",
                            "type": "choices",
                            "value": {"choices": ["sunny"]},
                            "origin": "manual",
                        },
                    ],
                    "2024-05-01T09:00:00.000000Z",
                    ground_truth=True,
                ),
                ls_annotation(106, 14, [ls_rectangle("g2", "car", 1, 1, 5, 5, gate)], "2024-05-01T12:00:00.000000Z"),
            ],
        ),
        ls_task(15, "/data/upload/3/5e6f7a8b-yard.jpg", [ls_annotation(107, 15, [], "2024-05-01T10:00:00.000000Z")]),
    ]
    return write_label_studio(root / EXPORT, tasks)


def test_an_export_is_told_by_its_content_ahead_of_coco_and_is_split_train(export: Path, tmp_path: Path) -> None:
    assert registry.file_format(str(export)) is LABEL_STUDIO
    [index] = discover([export])
    assert (index.split, index.format) == ("train", LABEL_STUDIO)
    val = write_label_studio(tmp_path / "val.json", json.loads(export.read_text())[:1])
    assert discover([val])[0].split == "val"


def test_image_paths_as_label_studio_writes_them() -> None:
    assert image_path("/data/upload/3/1a2b3c4d-street.jpg") == "1a2b3c4d-street.jpg"
    assert image_path("http://localhost:8080/data/upload/3/1a2b3c4d-street.jpg") == "1a2b3c4d-street.jpg"
    assert image_path("/data/local-files/?d=photos/gate%20a.jpg") == "photos/gate a.jpg"
    assert image_path("s3://bucket/images/a.jpg") == "s3://bucket/images/a.jpg"
    assert image_path("https://example.com/a.jpg") == "https://example.com/a.jpg"


def test_rows_are_tasks_with_the_chosen_annotation(export: Path) -> None:
    rows = list(LABEL_STUDIO.read_rows(Piece(str(export))))
    assert all(isinstance(r, Row) for r in rows)
    got = {int(r.values[2]): r for r in rows if isinstance(r, Row)}
    assert sorted(got) == sorted(WANT)
    assert [r.line for r in rows if isinstance(r, Row)] == [0] * 5  # a task is no line of the file
    assert got[12].values[3]["text"] == ["person"] and got[14].values[3]["text"] == ["person"]
    assert got[13].values[3] == {"size": None, "bbox": [], "text": [], "ref": []}
    assert got[14].values[0] == "photos/gate.jpg"


def test_a_build_gives_every_task_with_its_boxes_and_classes(export: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([export], out, workers=1, progress=False)
    assert (result.records, result.skipped) == (5, 0)
    classes = ["car", "person", "traffic light"]  # the names found, sorted
    assert json.loads((out / "manifest.json").read_text())["classes"]["image/object"] == classes
    records = {int(r["image/source_id"]): r for r in read_split(str(out), "train")}
    assert sorted(records) == sorted(WANT)
    names = {11: "1a2b3c4d-street.jpg", 12: "9f8e7d6c-park.jpg", 13: "0a0b0c0d-empty.jpg", 14: "gate.jpg", 15: "5e6f7a8b-yard.jpg"}
    for task_id, want in WANT.items():
        record = records[task_id]
        assert record["image/filename"] == names[task_id].encode()
        width, height = SIZES[names[task_id]]
        expected = []
        for _, geometry in want:
            if isinstance(geometry, list):
                xs, ys = [p[0] * width / 100 for p in geometry], [p[1] * height / 100 for p in geometry]
                expected.append([min(xs), min(ys), max(xs), max(ys)])
            else:
                x, y, w, h = geometry
                expected.append([x * width / 100, y * height / 100, (x + w) * width / 100, (y + h) * height / 100])
        n = len(_texts(record))  # read_split pads a batch's lists to its longest: a class name is never empty
        assert _texts(record) == [label for label, _ in want]
        got = np.array([record[f"image/object/bbox/{k}"][:n] for k in ("xmin", "ymin", "xmax", "ymax")]).T * [width, height, width, height]
        np.testing.assert_allclose(got.reshape(-1, 4), np.array(expected).reshape(-1, 4), rtol=0, atol=0.5)
        assert list(record["image/object/class/label"][:n]) == [classes.index(label) + 1 for label, _ in want]


def _texts(record: dict[str, Any]) -> list[str]:
    return [t.decode() for t in record["image/object/class/text"] if t]


def test_polygons_build_into_the_masks_pycocotools_draws(tmp_path: Path) -> None:
    size = (64, 48)
    photo(tmp_path / "8c9d-leaf.jpg", *size, 7)
    polygons = {"leaf": [[10.0, 10.0], [70.0, 12.5], [55.5, 90.0], [12.5, 70.0]], "stem": [[60.0, 60.0], [95.0, 62.5], [80.0, 95.0]]}
    result = [ls_polygon(f"p{k}", label, points, size) for k, (label, points) in enumerate(polygons.items())]
    export = write_label_studio(
        tmp_path / "train.json", [ls_task(1, "/data/upload/3/8c9d-leaf.jpg", [ls_annotation(1, 1, result, "2024-05-01")])]
    )
    shardkit.build([export], tmp_path / "out", config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, progress=False)
    [record] = read_split(str(tmp_path / "out"), "train")
    pngs = record["image/object/mask"]
    assert [t.decode() for t in record["image/object/class/text"]] == list(polygons)
    for png, points in zip(pngs, polygons.values(), strict=True):
        pixels = [v for x, y in points for v in (x * size[0] / 100, y * size[1] / 100)]
        want = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([pixels], size[1], size[0])))
        np.testing.assert_array_equal(decode(png)[..., 0], want)


def _one_task(tmp_path: Path, result: list[dict[str, Any]], annotations: list[dict[str, Any]] | None = None) -> Path:
    photo(tmp_path / "ab12-x.jpg", 32, 24, 0)
    task = ls_task(1, "/data/upload/3/ab12-x.jpg", annotations if annotations is not None else [ls_annotation(1, 1, result, "2024")])
    return write_label_studio(tmp_path / "train.json", [task])


_TINY = (32, 24)
_ROTATED = [ls_rectangle("r1", "car", 1, 1, 5, 5, _TINY, rotation=30)]
_BRUSH = [{**ls_rectangle("b1", "car", 1, 1, 5, 5, _TINY), "type": "brushlabels"}]
_TEXT_SIZE = [{**ls_rectangle("r2", "car", 1, 1, 5, 5, _TINY), "original_width": "32"}]


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (_ROTATED, "result[0] (id r1): rotation 30: rotated rectangles (oriented boxes) are not read"),
        (_BRUSH, "result[0] (id b1): 'brushlabels' regions are not read (rectanglelabels and polygonlabels are)"),
        (_TEXT_SIZE, "result[0] (id r2): original_width '32' is not a size in pixels"),
    ],
)
def test_a_region_shardkit_cannot_read_is_one_line_naming_the_task(tmp_path: Path, result: list[dict[str, Any]], reason: str) -> None:
    export = _one_task(tmp_path, result)
    with pytest.raises(EntryError) as refused:
        shardkit.build([export], tmp_path / "out", workers=1, progress=False)
    assert str(refused.value) == f"{export}: tasks[0] (id 1, /data/upload/3/ab12-x.jpg): {reason}"


def test_a_task_whose_every_annotation_was_cancelled_is_an_error_not_a_negative(tmp_path: Path) -> None:
    cancelled = ls_annotation(1, 1, [ls_rectangle("r", "car", 1, 1, 5, 5, (32, 24))], "2024", was_cancelled=True)
    export = _one_task(tmp_path, [], [cancelled])
    result = shardkit.build([export], tmp_path / "out", workers=1, progress=False, on_error="skip")
    assert (result.records, result.skipped) == (0, 1)
    [listed] = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert listed["reason"].endswith("every annotation was cancelled (skipped in Label Studio): the image was never labelled")


def test_a_json_min_export_is_one_line(tmp_path: Path) -> None:
    item = {"image": "/data/upload/3/ab12-x.jpg", "id": 1, "label": [{"x": 1, "y": 1, "width": 5, "height": 5, "rotation": 0,
            "rectanglelabels": ["car"], "original_width": 32, "original_height": 24}], "annotator": 1, "annotation_id": 1,
            "created_at": "2024-05-01T10:00:00.000000Z", "updated_at": "2024-05-01T10:00:00.000000Z", "lead_time": 3.1}  # fmt: skip
    path = tmp_path / "project-3-at-2024-05-01-10-00-8f3a2b1c.json"
    path.write_text(json.dumps([item]))
    with pytest.raises(ShardkitError, match=r"a Label Studio JSON-MIN export: not read .*export the project as JSON \(Export > JSON\)"):
        discover([path])
