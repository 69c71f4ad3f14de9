"""Annotation files shardkit identifies but does not read yet: OpenImages' box CSV, CreateML's
JSON, and the VGG Image Annotator's (VIA) JSON and CSV. Each is one line naming the file, the
format and what to build instead, where it would otherwise be read as an index file (a ``.csv``
with no image column), be taken for COCO (CreateML's ``"annotations": [``), or be "unknown".

Told from the first line of a local ``.csv`` (ahead of the ``.csv`` index format, as the OD API's
CSV is) and the first MiB of a ``.json``; refused where the input is found (``file_splits``),
before any row is read.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from typing import ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.bounded_json import BOM
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.storage import location

_PEEK = 1 << 20
_TABLES = (".csv",)  # told by their first line
_OPEN_IMAGES = ("imageid", "source", "labelname", "confidence", "xmin", "xmax", "ymin", "ymax")
_VIA_CSV = ("filename", "file_size", "file_attributes", "region_count", "region_id", "region_shape_attributes", "region_attributes")
_CREATE_ML = (re.compile(rb'"image"\s*:'), re.compile(rb'"annotations"\s*:\s*\['), re.compile(rb'"coordinates"\s*:\s*\{'))
_LABEL_STUDIO = re.compile(rb'"data"\s*:\s*\{|"annotation_id"\s*:')
_VIA = re.compile(rb'"_via_(img_metadata|settings|attributes|data_format_version)"\s*:|"vid_list"\s*:|VGG Image Annotator')
_VIA_REGIONS = (re.compile(rb'"filename"\s*:'), re.compile(rb'"regions"\s*:'), re.compile(rb'"file_attributes"\s*:'))

OPEN_IMAGES = (
    "an OpenImages box CSV (ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax): not read yet; "
    "convert it to COCO JSON (FiftyOne and datumaro read OpenImages) and build that"
)
CREATE_ML = (
    "a CreateML JSON (images with their annotations' coordinates): not read yet; "
    "convert it to COCO JSON (Roboflow converts CreateML) and build that"
)
VIA = (
    "a VGG Image Annotator (VIA) file: not read yet; "
    "export its annotations as COCO from VIA (Annotation > Export Annotations (COCO format)) and build that"
)


@dataclasses.dataclass(frozen=True)
class Unread(InputFormat):
    claims_ahead: ClassVar[tuple[str, ...]] = _TABLES

    def claims(self, path: str) -> bool:
        return identified(path) is not None

    def file_splits(self, path: str) -> list[tuple[str, Piece]] | None:
        raise ShardkitError(f"{path}: {identified(path) or 'not read'}")

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        raise ShardkitError(f"{piece.path}: {identified(piece.path) or 'not read'}")


def identified(path: str) -> str | None:
    """What ``path`` is, as the line that refuses it says; None for any other file."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _TABLES and not location.is_url(path):  # a peek into a bucket costs a request a file
        try:
            with open(path, "rb") as f:
                first = f.readline(4096)
        except OSError:
            return None
        words = tuple(w.strip().strip('"').lower() for w in first.decode("utf-8-sig", "replace").split(","))
        if words[: len(_OPEN_IMAGES)] == _OPEN_IMAGES:
            return OPEN_IMAGES
        return VIA if tuple(w.lstrip("#") for w in words) == _VIA_CSV else None
    if suffix != ".json":
        return None
    try:
        head = location.read_bytes(path, 0, _PEEK)
    except (OSError, ValueError):
        return None
    head = head[len(BOM) :] if head.startswith(BOM) else head
    start = head.lstrip()[:1]
    if start == b"[" and all(p.search(head) for p in _CREATE_ML) and not _LABEL_STUDIO.search(head):
        return CREATE_ML
    if start == b"{" and (_VIA.search(head) or all(p.search(head) for p in _VIA_REGIONS)):
        return VIA
    return None


UNREAD = Unread("unread")
