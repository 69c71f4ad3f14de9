"""The input formats shardkit reads, in one table: the only place a format's name or suffix is
looked up (as Hugging Face ``datasets`` maps extensions to its packaged modules).

A new format is a module in ``inputs/formats/`` and a line in ``FORMATS``. Order matters where
claims overlap: a file goes to the first format that takes its suffix by content
(``claims_ahead``: the OD API's CSV among ``.csv`` index files), else to the format that claims
its suffix, else to the first that claims its content; a folder goes to the first format that
claims its layout (ImageFolder takes any folder, so it stays last).
"""

from __future__ import annotations

import os

from shardkit.errors import ShardkitError
from shardkit.pipeline.inputs.formats import delimited, image_folder, jsonl, parquet, txt, unread
from shardkit.pipeline.inputs.formats.detection import coco, cvat, darknet, kitti, labelme, labelstudio, od_csv, voc, yolo
from shardkit.pipeline.inputs.formats.input_format import InputFormat

FORMATS: tuple[InputFormat, ...] = (
    txt.TXT,
    delimited.CSV,
    delimited.TSV,
    jsonl.JSONL,
    parquet.PARQUET,
    labelstudio.LABEL_STUDIO,  # ahead of COCO: its tasks have "annotations": [ too
    unread.UNREAD,  # ahead of COCO (CreateML's "annotations": [) and of .csv index files
    coco.COCO,
    od_csv.OD_CSV,
    yolo.YOLO,
    darknet.DARKNET,
    voc.VOC,
    cvat.CVAT,  # .xml files claimed by content; a folder holding its annotations.xml
    kitti.KITTI,  # a folder holding label_2/ and image_2/, or folders that do
    labelme.LABELME,
    image_folder.IMAGE_FOLDER,
)


def named(name: str) -> InputFormat:
    """The format a build state names (``PlanSource.format``)."""
    for found in FORMATS:
        if found.name == name:
            return found
    raise ShardkitError(f"unknown input format {name!r} in the build state (known: {', '.join(f.name for f in FORMATS)})")


def suffixes() -> tuple[str, ...]:
    """Every suffix a format claims, for messages that say what is read."""
    return tuple(suffix for f in FORMATS for suffix in f.suffixes)


def file_format(path: str) -> InputFormat | None:
    """The format that reads the file ``path`` (a local path or a URL): the first that takes its
    suffix by content, else the one claiming its suffix, else the first that knows it by content;
    None if no format reads it."""
    suffix = os.path.splitext(path)[1].lower()
    for found in FORMATS:
        if suffix in found.claims_ahead and found.claims(path):
            return found
    for found in FORMATS:
        if suffix in found.suffixes:
            return found
    return next((f for f in FORMATS if f.claims(path)), None)


def folder_format(root: str) -> InputFormat:
    """The format whose layout the folder ``root`` (``--from-folder``) has."""
    found = next((f for f in FORMATS if f.claims_folder(root)), None)
    if found is None:
        raise ShardkitError(f"{root}: no input format knows this folder's layout")
    return found


def layout_format(root: str) -> InputFormat | None:
    """The format whose layout of its own the folder ``root``, given as an input, has (a Pascal
    VOC folder, a YOLO dataset); None for a folder of index files. A layout any folder has
    (ImageFolder) is not asked: it is read where ``--from-folder`` names it."""
    return next((f for f in FORMATS if not f.any_folder and f.claims_folder(root)), None)
