"""YOLO datasets in the Ultralytics layout: a ``data.yaml`` naming its splits' images and its
classes, the labels in the parallel ``labels/`` tree. One file, several splits: ``file_splits``.

``data.yaml`` has ``path`` (the root, optional: else the file's folder), ``train``, ``val`` and
``test``, each a folder of images (walked down), a ``.txt`` list of image paths, or a list of
those, relative to the root (a ``../`` that leads nowhere is dropped, as Ultralytics does for
Roboflow's exports), and ``names``: a list, or a mapping ``{0: person, ...}`` (``nc`` alone gives
``class0``, ...). A folder holding such a YAML is read the same (``shardkit build DATASET``).

An image's labels are the ``.txt`` file at its path with the last ``images`` folder made
``labels`` (``images/train/a.jpg`` -> ``labels/train/a.txt``), as Ultralytics finds them: a line
``class cx cy w h``, normalized to the image's size, or a YOLO-seg line ``class x1 y1 x2 y2 ...``
whose box is its polygon's extent. A polygon stays out of the objects: its pixels need the
image's size, which no annotation here states, so masks cannot be drawn from YOLO labels. An
image with no label file, or an empty one, has no objects. YOLO's class ``i`` is label ``i + 1``,
named ``names[i]``: the label map. Pose datasets (``kpt_shape``) are refused. Images are named by
absolute path (``--image-root`` has nothing to resolve); local datasets only.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from typing import Any

import yaml

from shardkit.errors import EntryError, ShardkitError
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row

SPLITS = ("train", "val", "test")
_YAML = (".yaml", ".yml")
_PEEK = 1 << 20  # a dataset YAML is small: a larger one is no dataset's


@dataclasses.dataclass(frozen=True)
class Yolo(DetectionFormat):
    def claims(self, path: str) -> bool:
        if not path.lower().endswith(_YAML) or not os.path.isfile(path) or os.path.getsize(path) > _PEEK:
            return False
        try:
            with open(path, encoding="utf-8-sig") as f:
                data = yaml.safe_load(f)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):  # PyYAML recurses a level: nested past ~1000
            return False
        return isinstance(data, dict) and ("names" in data or "nc" in data) and any(data.get(s) for s in SPLITS)

    def claims_folder(self, root: str) -> bool:
        return bool(_dataset_files(root))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        found = _dataset_files(root)
        if len(found) > 1 and not any(os.path.basename(p) == "data.yaml" for p in found):
            raise ShardkitError(f"{root}: several dataset YAMLs ({', '.join(map(os.path.basename, found))}): give the one to build")
        return self.file_splits(next((p for p in found if os.path.basename(p) == "data.yaml"), found[0]))

    def file_splits(self, path: str) -> list[tuple[str, Piece]]:
        data = _load(path)
        return [(split, Piece(path, context=split)) for split in SPLITS if data.get(split)]

    def label_map(self, path: str) -> tuple[tuple[int, str], ...]:
        return tuple((i + 1, name) for i, name in enumerate(names(path, _load(path))))

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        data = _load(source)
        classes = names(source, data)
        root = _root(source, data)
        for line, image in enumerate(images(source, root, data[piece.context]), start=1):
            labels = label_path(image)
            try:
                found = objects(labels, classes)
            except EntryError as exc:
                yield exc
                continue
            key = os.path.relpath(image, root)
            name = os.path.basename(image)
            yield detection_row(source, line, image, name, os.path.splitext(name)[0], found, key)


def _dataset_files(root: str) -> list[str]:
    """The dataset YAMLs directly in the folder ``root``."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [path for path in (os.path.join(root, n) for n in names) if YOLO.claims(path)]


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except RecursionError:
        raise ShardkitError(f"{path}: not valid YAML: nested too deep to read (a dataset YAML nests a level or two)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ShardkitError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ShardkitError(f"{path}: not a YOLO dataset YAML (expected train/val/test and names)")
    if data.get("kpt_shape"):
        raise ShardkitError(f"{path}: YOLO pose labels (kpt_shape) are not supported yet")
    return data


def names(path: str, data: dict[str, Any]) -> list[str]:
    """The class names of ``data.yaml``, YOLO's class ``i`` at ``i``."""
    given = data.get("names")
    count = data.get("nc")
    if given is None:
        if not isinstance(count, int) or count < 1:
            raise ShardkitError(f"{path}: names: missing (and no nc to number the classes by)")
        return [f"class{i}" for i in range(count)]
    if isinstance(given, dict):
        if set(given) != set(range(len(given))):
            got = ", ".join(sorted(map(str, given)))
            raise ShardkitError(f"{path}: names: expected the class indexes 0 to {len(given) - 1}, got {got}")
        given = [given[i] for i in range(len(given))]
    if not isinstance(given, list) or not given or not all(isinstance(n, str | int) and str(n) for n in given):
        raise ShardkitError(f"{path}: names: expected a list of class names, or a mapping of class index to name")
    if count is not None and count != len(given):
        raise ShardkitError(f"{path}: nc is {count}, but names has {len(given)}")
    listed = [str(n) for n in given]
    repeated = next((n for i, n in enumerate(listed) if n in listed[:i]), None)
    if repeated is not None:
        raise ShardkitError(f"{path}: names: {repeated!r} names two classes")
    return listed


def _root(path: str, data: dict[str, Any]) -> str:
    """The dataset's root: ``path:`` (against the YAML's folder) where it exists, else the YAML's
    folder (an export's ``path:`` names the exporting machine's folder)."""
    here = os.path.dirname(os.path.abspath(path))
    given = data.get("path")
    if isinstance(given, str) and given:
        candidate = os.path.normpath(os.path.join(here, os.path.expanduser(given)))
        if os.path.isdir(candidate):
            return candidate
    return here


def images(path: str, root: str, entry: Any) -> list[str]:
    """A split's images, absolute and sorted (as Ultralytics lists them), from its entry in ``data.yaml``."""
    found: list[str] = []
    for item in entry if isinstance(entry, list) else [entry]:
        if not isinstance(item, str) or not item:
            raise ShardkitError(f"{path}: expected a folder or a .txt list of images, got {item!r}")
        place = os.path.normpath(os.path.join(root, item))
        if not os.path.exists(place) and item.startswith("../"):
            place = os.path.normpath(os.path.join(root, item[3:]))
        if os.path.isdir(place):
            found += [os.path.join(folder, n) for folder, _, files in os.walk(place) for n in files]
        elif os.path.isfile(place):
            found += _listed(place)
        else:
            raise ShardkitError(f"{path}: {item}: no such folder or image list (looked for {place})")
    return sorted(p for p in found if os.path.splitext(p)[1].lower() in IMAGE_SUFFIXES)


def _listed(list_file: str) -> list[str]:
    """The images a ``.txt`` list names, relative ones against its folder."""
    folder = os.path.dirname(list_file)
    try:
        with open(list_file, encoding="utf-8-sig") as f:
            return [os.path.normpath(os.path.join(folder, line.strip())) for line in f if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ShardkitError(f"{list_file}: cannot read the image list: {getattr(exc, 'strerror', None) or exc}") from None


def label_path(image: str) -> str:
    """Where Ultralytics looks for an image's labels: the last ``/images/`` made ``/labels/``, the suffix ``.txt``."""
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return os.path.splitext(labels.join(image.rsplit(images, 1)))[0] + ".txt"


def objects(labels: str, classes: list[str]) -> dict[str, Any]:
    """An image's label file as a row's ``objects`` value (none where it has no file); a bad
    line raises an ``EntryError`` naming the file and line."""
    boxes: list[list[float]] = []
    found: list[int] = []
    try:
        with open(labels, encoding="utf-8-sig") as f:
            lines = list(f)
    except FileNotFoundError:
        lines = []
    except (OSError, UnicodeDecodeError) as exc:
        raise EntryError(labels, 0, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    for number, text in enumerate(lines, start=1):
        words = text.split()
        if not words:
            continue
        try:
            values = [float(w) for w in words]
        except ValueError:
            bad = next(w for w in words if not _is_number(w))
            raise EntryError(labels, number, f"{bad!r} is not a number") from None
        if not all(math.isfinite(v) for v in values):
            raise EntryError(labels, number, "a value is not finite")
        index = values[0]
        if not index.is_integer() or not 0 <= index < len(classes):
            raise EntryError(labels, number, f"class {words[0]} is not in names (0 to {len(classes) - 1})")
        boxes.append(_box(values[1:], labels, number))
        found.append(int(index))
    return {
        "units": "normalized",
        "bbox": boxes,
        "text": [classes[i] for i in found],
        "label": [i + 1 for i in found],
    }


def _box(values: list[float], labels: str, number: int) -> list[float]:
    if len(values) == 4:
        cx, cy, w, h = values
        return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    if len(values) >= 6 and len(values) % 2 == 0:  # YOLO-seg: a polygon of three points or more
        xs, ys = values[0::2], values[1::2]
        return [min(xs), min(ys), max(xs), max(ys)]
    raise EntryError(labels, number, f"{len(values) + 1} values: expected class cx cy w h, or class and a polygon x1 y1 x2 y2 ...")


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


YOLO = Yolo("yolo")
