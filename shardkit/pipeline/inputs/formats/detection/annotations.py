"""What the detection formats (COCO, Pascal VOC, YOLO, the OD API's CSV) share: the columns of
their rows, the config a build of them uses when none is given, and their plan lines.

A detection row has four columns: ``image`` (the image file, relative to its source's folder or
absolute), ``filename`` (as the annotation names it), ``source_id`` (COCO's image id, else the
file name's stem) and ``objects`` (the mapping ``features.objects.Objects.from_raw`` reads). Its
key (the entry's identity) is the image's path as the annotation gives it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from shardkit.errors import EntryError
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Row

COLUMNS = ("image", "filename", "source_id", "objects")
# Boxes only, the image's bytes passed through: what a detection input builds with no --config.
DEFAULT_CONFIG: Mapping[str, Any] = {
    "features": {
        "image/encoded": {"kind": "encoded_image", "column": "image", "encoding": "raw"},
        "image/filename": {"kind": "string", "column": "filename"},
        "image/source_id": {"kind": "string", "column": "source_id"},
        "image/object": {"kind": "objects", "column": "objects"},
    }
}


def detection_row(source: str, line: int, image: str, filename: str, source_id: str, objects: Mapping[str, Any], key: str) -> Row:
    return Row(source, line, (image, filename, source_id, objects), COLUMNS, key)


def finite_number(text: str, source: str, line: int, name: str = "") -> float:
    """A finite number written in an annotation's text (a CSV field, a label file's word); else an
    ``EntryError`` at ``source``'s ``line`` quoting it, after its ``name`` where given."""
    what = f"{name} {text!r}" if name else repr(text)
    try:
        value = float(text)
    except ValueError:
        raise EntryError(source, line, f"{what} is not a number") from None
    if not math.isfinite(value):
        raise EntryError(source, line, f"{what} is not a finite number")
    return value


@dataclasses.dataclass(frozen=True)
class DetectionFormat(InputFormat):
    """A format whose rows are images with their objects."""

    keeps_names: ClassVar[bool] = True
    confines_paths: ClassVar[bool] = True  # annotation files come from anywhere: their paths stay in the dataset

    def default_config(self, path: str) -> Mapping[str, Any] | None:
        return DEFAULT_CONFIG

    def plan_payload(self, row: Row) -> str:
        return json.dumps([*row.values, row.key], separators=(",", ":"))

    def described(self, row: Row) -> str:
        # The objects too: they live in annotation files (VOC's XML, YOLO's labels) no hash covers.
        return self.plan_payload(row)

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        values = json.loads(payload)
        return Row(source, line, tuple(values[:4]), COLUMNS, values[4])
