"""KITTI object labels: ``label_2/<id>.txt`` beside ``image_2/<id>.png``, as the KITTI object
benchmark (``training/``, ``testing/``) and datumaro's ``kitti`` export (``<subset>/``) lay them out.

Told by that layout: a folder holding ``label_2/`` and ``image_2/`` is one split (``training`` ->
``train``, ``testing`` -> ``test``, another known split name as it is, any other name ``train``);
a folder holding such folders (the KITTI root) is one split each, one of another name named as it
is. A split's source is its ``label_2`` folder. Every image in ``image_2`` is a row (with no line:
a folder has none; messages name the image), in name order, with the objects
of its label file (none where it has no file, or an empty one: a negative example, kept); a label
file with no image is an entry error of its own, never left behind in silence.

A label line is the devkit's ``type truncated occluded alpha x1 y1 x2 y2 h w l x y z rotation_y``
(a 16th value, a detection's score, is allowed). ``type`` is the class name as written (the label
map is the sorted names found); the 2D box ``x1 y1 x2 y2`` is in pixels; ``truncated`` (a float
from 0 to 1) is kept as ``P/truncation`` and ``occluded`` (0 visible to 3 unknown) as
``P/occluded``, both without loss. ``alpha``, the 3D box and the score are not kept.
``DontCare`` lines mark regions whose objects were not labelled: they are no objects, so, as the
TF Object Detection API's ``create_kitti_tf_record.py`` does, they are left out; each is counted
under ``P/left_out`` (``features.objects``). Unlike that script, objects overlapping a
``DontCare`` region are kept: they were labelled. Local folders only; a label file must lie in its
``label_2`` folder (``storage.boundary``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row, finite_number
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage.boundary import Boundary

LABELS, IMAGES = "label_2", "image_2"
DONT_CARE = "DontCare"
_SPLITS = {"training": "train", "testing": "test"}
_KNOWN = ("train", "val", "valid", "validation", "test", "trainval", "default")
_FIELDS = 15  # type truncated occluded alpha x1 y1 x2 y2 h w l x y z rotation_y
_LINE = "type truncated occluded alpha x1 y1 x2 y2 h w l x y z rotation_y [score]"
_LINE_CHARS = 4096


@dataclasses.dataclass(frozen=True)
class Kitti(DetectionFormat):
    def claims_folder(self, root: str) -> bool:
        return _is_split(root) or bool(_splits_in(root))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        if _is_split(root):
            return [(split_of(root), Piece(os.path.join(root, LABELS)))]
        return [(split_of(folder, alone=False), Piece(os.path.join(folder, LABELS))) for folder in _splits_in(root)]

    def folder_of(self, path: str) -> str:
        """``image_2`` beside the split's ``label_2``."""
        return os.path.join(os.path.dirname(os.path.abspath(path)), IMAGES)

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        given, source = piece.path, os.path.abspath(piece.path)  # rows name the source as given: the plan knows it so
        images = _listed(self.folder_of(source), IMAGE_SUFFIXES)
        labels = _listed(source, (".txt",), files_only=False)  # a FIFO or a link among them: an error of its image, not skipped
        stems = {os.path.splitext(name)[0] for name in images}
        for name in labels:
            if os.path.splitext(name)[0] not in stems:
                yield EntryError(os.path.join(source, name), 0, f"no image {os.path.splitext(name)[0]}.* in {self.folder_of(source)}")
        rule = Boundary() if piece.confined else None
        texts = set(labels)
        for name in images:
            stem = os.path.splitext(name)[0]
            label = os.path.join(source, f"{stem}.txt")
            refused = rule.outside(label, source) if rule is not None and f"{stem}.txt" in texts else None
            if refused is not None:
                yield EntryError(given, 0, f"{name}: label file {refused}")
                continue
            try:
                found = objects(label) if f"{stem}.txt" in texts else objects(None)
            except EntryError as exc:
                yield exc
                continue
            yield detection_row(given, 0, name, name, stem, found, name)  # 0: a folder has no lines


def split_of(folder: str, alone: bool = True) -> str:
    """The split a KITTI split folder is: ``training`` -> ``train``, ``testing`` -> ``test``, a known
    split's name as it is; any other name ``train`` where the folder is the input (``alone``), else
    its own name (``training_old`` beside ``training`` is no second ``train``)."""
    name = os.path.basename(os.path.normpath(folder))
    known = _SPLITS.get(name.lower(), name.lower() if name.lower() in _KNOWN else None)
    return known or ("train" if alone else name)


def _is_split(folder: str) -> bool:
    return os.path.isdir(os.path.join(folder, LABELS)) and os.path.isdir(os.path.join(folder, IMAGES))


def _splits_in(root: str) -> list[str]:
    """The split folders directly in ``root``, by name."""
    try:
        with os.scandir(root) as entries:
            folders = sorted(e.path for e in entries if e.is_dir())
    except OSError:
        return []
    return [folder for folder in folders if _is_split(folder)]


def _listed(folder: str, suffixes: tuple[str, ...] | frozenset[str], files_only: bool = True) -> list[str]:
    """The files (or, not ``files_only``, anything but folders) of ``folder`` with one of ``suffixes``, by name."""
    try:
        with os.scandir(folder) as entries:
            return sorted(
                e.name
                for e in entries
                if os.path.splitext(e.name)[1].lower() in suffixes and (e.is_file() if files_only else not e.is_dir())
            )
    except OSError as exc:
        raise ShardkitError(f"{folder}: cannot list: {exc.strerror or exc}") from None


def objects(label: str | None) -> dict[str, Any]:
    """A label file as a row's ``objects`` value (None: no file, no objects); a bad line raises an
    ``EntryError`` naming the file and line."""
    lines = _lines(label) if label is not None else []
    boxes: list[list[float]] = []
    names: list[str] = []
    truncation: list[float] = []
    occluded: list[int] = []
    left_out: list[str] = []
    for number, text in enumerate(lines, start=1):
        words = text.split()
        if not words:
            continue
        if len(words) not in (_FIELDS, _FIELDS + 1):
            raise EntryError(label or "", number, f"{len(words)} values: expected {_LINE}")
        if words[0] == DONT_CARE:
            left_out.append(DONT_CARE)
            continue
        values = [finite_number(w, label or "", number) for w in words[1:8]]
        if not 0 <= values[0] <= 1:
            raise EntryError(label or "", number, f"truncated {words[1]} is not a fraction from 0 to 1")
        if words[2] not in ("0", "1", "2", "3"):
            raise EntryError(label or "", number, f"occluded {words[2]} is not 0, 1, 2 or 3")
        boxes.append(values[3:7])
        names.append(words[0])
        truncation.append(values[0])
        occluded.append(int(words[2]))
    found: dict[str, Any] = {"bbox": boxes, "text": names, "truncation": truncation, "occluded": occluded}
    if left_out:
        found["left_out"] = left_out
    return found


def _lines(label: str) -> list[str]:
    """The lines of a label file, each at most ``_LINE_CHARS`` long (a KITTI line is about 100)."""
    if not os.path.isfile(label):  # a FIFO would be waited on forever
        raise EntryError(label, 0, "not a file")
    lines: list[str] = []
    try:
        with open(label, encoding="utf-8-sig") as f:
            while line := f.readline(_LINE_CHARS + 1):
                if len(line) > _LINE_CHARS:
                    raise EntryError(label, len(lines) + 1, f"longer than {_LINE_CHARS} characters: no KITTI label line")
                lines.append(line)
    except (OSError, UnicodeDecodeError) as exc:
        raise EntryError(label, 0, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return lines


KITTI = Kitti("kitti")
