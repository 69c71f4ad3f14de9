"""inspect and verify --deep on a build with objects: objects per record and per class from the
manifest, and each kind of damage to a record's objects named in one line."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from shardkit.check.inspection import inspect
from shardkit.check.verify import verify
from shardkit.cli import main
from shardkit.formats import image_codec
from shardkit.formats.containers.tfrecord_io import frame, read_records
from shardkit.formats.example_proto import decode_example, encode_example

SHARD = "val-00000-of-00001.tfrecord"
P = "image/object"


def test_a_whole_build_with_objects_passes_the_deep_check(coco_shards: Path) -> None:
    report = verify([str(coco_shards)], deep=True)
    assert report.ok, report.files[0].problem  # records without keypoints (no objects) lack those lists: that is allowed


def test_inspect_counts_objects_per_record_and_per_class(coco_shards: Path) -> None:
    (summary,) = inspect([str(coco_shards)])["outputs"][0]["summaries"]
    assert summary["kind"] == "objects" and summary["key"] == P
    assert summary["per_record"] == {"min": 0, "max": 3}
    assert summary["classes"] == {"person": 4, "car": 2, "train": 1, "boat": 0}  # the label map's order, empty classes too
    assert summary["dropped"] == {"car": 1}
    assert summary["splits"]["val"] | {"classes": None} == {
        "records": 6,
        "objects": 7,
        "mean": 1.167,
        "classes": None,
        "dropped": {"car": 1},
    }


def test_inspect_prints_the_objects_and_gives_them_as_json(coco_shards: Path) -> None:
    text = CliRunner().invoke(main, ["inspect", str(coco_shards)])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert "objects of image/object: 0 to 3 per record, mean 1.17 in val" in lines
    assert "  per class: person 4, car 2, train 1, boat 0" in lines
    assert "  dropped (left with no area inside their image): car 1" in lines
    assert all(len(line) <= 80 for line in lines[lines.index("  per class: person 4, car 2, train 1, boat 0") - 1 :])
    as_json = CliRunner().invoke(main, ["inspect", str(coco_shards), "--json"])
    assert json.loads(as_json.output)["outputs"][0]["summaries"][0]["per_record"] == {"min": 0, "max": 3}


# -- damage: one record of a copy of the build rewritten -------------------------------------------

Features = dict[str, tuple[str, list[Any]]]


def _damaged(coco_shards: Path, tmp_path: Path, change: Callable[[Features], None]) -> tuple[Path, int]:
    """A copy of the build whose record of image 3 (a person, a crowd of trains, a car) is changed."""
    out = tmp_path / "out"
    shutil.copytree(coco_shards, out)
    records = list(read_records(str(out / SHARD)))
    number = next(i for i, r in enumerate(records) if decode_example(r)["image/filename"][1] == [b"000000000003.jpg"])
    features: Features = {k: (t, list(v)) for k, (t, v) in decode_example(records[number]).items()}
    change(features)
    records[number] = encode_example(features)
    (out / SHARD).write_bytes(b"".join(frame(r) for r in records))
    return out, number


def _png(array: np.ndarray) -> bytes:
    return image_codec.encode(array, "png", 95, mask=True)


def _set(key: str, index: int, value: Any) -> Callable[[Features], None]:
    def change(features: Features) -> None:
        features[key][1][index] = value

    return change


def _drop_last(key: str) -> Callable[[Features], None]:
    def change(features: Features) -> None:
        features[key][1].pop()

    return change


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (_set(f"{P}/bbox/xmax", 2, 1.5), "object 3's box [0.3409, 0.2083, 1.5, 0.625] (xmin, ymin, xmax, ymax) is not within [0, 1]"),
        (_set(f"{P}/bbox/xmax", 0, 0.05), "object 1's box [0.0625, 0.125, 0.05, 0.75] (xmin, ymin, xmax, ymax) has no width"),
        (_set(f"{P}/bbox/ymin", 1, 1.0), "object 2's box [0, 1, 0.03409, 1] (xmin, ymin, xmax, ymax) has no height"),
        (
            _set(f"{P}/bbox/ymin", 0, float("nan")),
            "object 1's box [0.0625, nan, 0.2926, 0.75] (xmin, ymin, xmax, ymax) is not within [0, 1]",
        ),
        (_drop_last(f"{P}/class/label"), "3 boxes but 2 class/label values"),
        (_drop_last(f"{P}/mask"), "3 boxes but 2 mask values"),
        (_drop_last(f"{P}/keypoint/y"), "keypoint lists differ in length (x 9, y 8, visibility 9)"),
        (_set(f"{P}/mask", 1, _png(np.zeros((10, 10), np.uint8))), "object 2's mask is 10x10, its image 88x48"),
        (_set(f"{P}/mask", 0, _png(np.full((48, 88), 255, np.uint8))), "object 1's mask has values other than 0 and 1 (up to 255)"),
        (_set(f"{P}/mask", 2, b"not a png"), "object 3's mask: not an image Pillow can read"),
    ],
)
def test_damaged_objects_are_one_line_naming_the_record(
    coco_shards: Path, tmp_path: Path, change: Callable[[Features], None], problem: str
) -> None:
    out, number = _damaged(coco_shards, tmp_path, change)
    report = verify([str(out)], deep=True)
    assert not report.ok
    found = report.files[0].problem or ""
    assert re.fullmatch(rf"record {number} at byte \d+: objects 'image/object': {re.escape(problem)}.*", found), found


def test_keypoints_that_do_not_share_out_over_the_objects(coco_shards: Path, tmp_path: Path) -> None:
    def change(features: Features) -> None:
        for name in ("x", "y", "visibility"):
            features[f"{P}/keypoint/{name}"][1].pop()

    out, number = _damaged(coco_shards, tmp_path, change)
    assert verify([str(out)], deep=True).files[0].problem == (
        f"record {number} at byte {_offset(out, number)}: objects 'image/object': 8 keypoints do not share out over 3 objects"
    )
    cli = CliRunner().invoke(main, ["verify", str(out), "--deep"])
    assert cli.exit_code == 1
    (failed,) = [line for line in cli.output.splitlines() if line.startswith("FAILED")]
    assert failed.endswith(": 8 keypoints do not share out over 3 objects")


def _offset(out: Path, number: int) -> int:
    return sum(len(frame(r)) for r in list(read_records(str(out / SHARD)))[:number])
