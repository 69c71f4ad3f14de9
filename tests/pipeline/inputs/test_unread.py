"""Annotation files shardkit identifies but does not read yet, written as their tools write them:
each is one line naming the file, the format, and what to build instead (before: OpenImages' CSV
was "the index has 13 columns", naming no file; CreateML's JSON "not a COCO file"; VIA's
"unknown index format")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.unread import CREATE_ML, OPEN_IMAGES, UNREAD, VIA
from tests.hostile import one_line_error, run_cli

OPEN_IMAGES_CSV = (
    "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded,IsTruncated,IsGroupOf,IsDepiction,IsInside\n"
    "000002b66c9c498e,xclick,/m/01g317,1,0.012500,0.195312,0.148438,0.587500,0,1,0,0,0\n"
    "000002b66c9c498e,xclick,/m/0284d,1,0.025000,0.276563,0.714063,0.948438,0,1,0,0,0\n"
)
CREATE_ML_JSON = [
    {"image": "a.jpg", "annotations": [{"label": "car", "coordinates": {"x": 20.5, "y": 15.0, "width": 10.0, "height": 8.0}}]},
    {"image": "b.jpg", "annotations": []},
]
_VIA_REGIONS = {
    "a.jpg12345": {
        "filename": "a.jpg",
        "size": 12345,
        "regions": [
            {"shape_attributes": {"name": "rect", "x": 10, "y": 20, "width": 30, "height": 40}, "region_attributes": {"label": "car"}}
        ],
        "file_attributes": {},
    }
}
VIA_FILES = {
    "via_region_data.json": _VIA_REGIONS,  # VIA 1 and 2: Annotation > Export Annotations (as json)
    "via_project_1May2020_17h15m.json": {  # VIA 2: Project > Save
        "_via_settings": {"ui": {"annotation_editor_height": 25}, "core": {"buffer_size": 18}, "project": {"name": "via_project"}},
        "_via_img_metadata": _VIA_REGIONS,
        "_via_attributes": {"region": {"label": {"type": "text"}}, "file": {}},
        "_via_data_format_version": "2.0.10",
        "_via_image_id_list": ["a.jpg12345"],
    },
    "via3_project.json": {  # VIA 3: Save project
        "project": {"pid": "__VIA_PROJECT_ID__", "rev": "__VIA_PROJECT_REV_ID__", "pname": "Unnamed VIA Project",
                    "creator": "VGG Image Annotator (http://www.robots.ox.ac.uk/~vgg/software/via)", "created": 1588346120092,
                    "vid_list": ["1"]},
        "config": {"file": {"loc_prefix": {"1": "", "2": "", "3": "", "4": ""}}},
        "attribute": {},
        "file": {"1": {"fid": "1", "fname": "a.jpg", "type": 2, "loc": 1, "src": ""}},
        "metadata": {"1_abc": {"vid": "1", "flg": 0, "z": [], "xy": [2, 10, 20, 30, 40], "av": {"1": "car"}}},
        "view": {"1": {"fid_list": ["1"]}},
    },
}  # fmt: skip
VIA_CSV = (
    "filename,file_size,file_attributes,region_count,region_id,region_shape_attributes,region_attributes\n"
    'a.jpg,12345,"{}",1,0,"{""name"":""rect"",""x"":10,""y"":20,""width"":30,""height"":40}","{""label"":""car""}"\n'
)


def _written(tmp_path: Path) -> dict[Path, str]:
    found = {tmp_path / "oidv6-train-annotations-bbox.csv": OPEN_IMAGES, tmp_path / "train.json": CREATE_ML, tmp_path / "via.csv": VIA}
    (tmp_path / "oidv6-train-annotations-bbox.csv").write_text(OPEN_IMAGES_CSV)
    (tmp_path / "train.json").write_text(json.dumps(CREATE_ML_JSON))
    (tmp_path / "via.csv").write_text(VIA_CSV)
    for name, document in VIA_FILES.items():
        (tmp_path / name).write_text(json.dumps(document))
        found[tmp_path / name] = VIA
    return found


def test_each_is_one_line_naming_the_file_and_the_format(tmp_path: Path) -> None:
    for path, line in _written(tmp_path).items():
        assert registry.file_format(str(path)) is UNREAD, path
        with pytest.raises(ShardkitError) as refused:
            shardkit.build([path], tmp_path / "out", workers=1, progress=False)
        assert str(refused.value) == f"{path}: {line}"


def test_other_files_are_not_taken(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("image,label\na.jpg,cat\n")
    (tmp_path / "train.json").write_text(json.dumps([{"image": "a.jpg", "mask": "a.png"}]))  # an index of its own: not CreateML
    assert registry.file_format(str(tmp_path / "train.csv")) is not UNREAD
    assert registry.file_format(str(tmp_path / "train.json")) is None


def test_the_command_prints_the_one_line(tmp_path: Path) -> None:
    csv = tmp_path / "oidv6-train-annotations-bbox.csv"
    csv.write_text(OPEN_IMAGES_CSV)
    result = run_cli(["build", csv, "-o", tmp_path / "out"], tmp_path)
    assert one_line_error(result) == f"Error: {csv}: {OPEN_IMAGES}"
