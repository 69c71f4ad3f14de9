"""YOLO datasets in the Ultralytics layout: a ``data.yaml`` naming its splits' images and its
classes, the labels in the parallel ``labels/`` tree. One file, several splits: ``file_splits``.

``data.yaml`` has ``path`` (the root, optional: else the file's folder), ``train``, ``val`` and
``test``, each a folder of images (walked down), a ``.txt`` list of image paths, or a list of
those, relative to the root (a ``../`` that leads nowhere is dropped, as Ultralytics does for
Roboflow's exports), and ``names``: a list, or a mapping ``{0: person, ...}`` (keys may be
strings of integers, as Ultralytics reads them; ``nc`` alone gives ``class0``, ...). A folder
holding such a YAML is read the same (``shardkit build DATASET``). A folder's images are told by
suffix; each line of a list is meant as an image: one with no image suffix is told by content,
and one that is missing or no image is an ``EntryError`` naming the list and its line.

An image's labels are the ``.txt`` file at its path with the last ``images`` folder made
``labels`` (``images/train/a.jpg`` -> ``labels/train/a.txt``), as Ultralytics finds them: a line
``class cx cy w h``, normalized to the image's size, or a YOLO-seg line ``class x1 y1 x2 y2 ...``
whose box is its polygon's extent. A polygon stays out of the objects: its pixels need the
image's size, which no annotation here states, so masks cannot be drawn from YOLO labels. An
image with no label file, or an empty one, has no objects. YOLO's class ``i`` is label ``i + 1``,
named ``names[i]``: the label map. Pose datasets (``kpt_shape``) are refused. Images are named by
absolute path (``--image-root`` has nothing to resolve); local datasets only. The root, the images
and their labels stay inside the YAML's folder (``storage.boundary``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterator
from typing import Any

import yaml

from shardkit.errors import EntryError, ShardkitError
from shardkit.formats.image_headers import IMAGE_SUFFIXES, image_format
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage.boundary import Boundary

SPLITS = ("train", "val", "test")
_YAML = (".yaml", ".yml")
_PEEK = 1 << 20  # a dataset YAML is small: a larger one is no dataset's
_DATA_YAML = ("data.yaml", "data.yml")
_TOP_KEYS = re.compile(r"^(train|val|test|names|nc)\s*:", re.MULTILINE)  # a dataset's keys, in a YAML that does not parse


@dataclasses.dataclass(frozen=True)
class Yolo(DetectionFormat):
    def claims(self, path: str) -> bool:
        return _dataset_yaml(path)

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

    def root_of(self, path: str, image_root: str | None) -> str:
        """The YAML's folder: its images are found from it (``--image-root`` has nothing to resolve)."""
        return os.path.dirname(os.path.abspath(path))

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        data = _load(source)
        classes = names(source, data)
        root = _root(source, data)
        rule, top = Boundary(), self.root_of(source, None) if piece.confined else None  # None: --allow-outside-root
        if top is not None and (refused := rule.outside(root, top)) is not None:
            raise ShardkitError(f"{source}: path: {data.get('path')}: {refused}")
        for line, (image, listed_in, number) in enumerate(images(source, root, data[piece.context], top), start=1):
            labels = label_path(image)
            refused = None if top is None else rule.outside(image, top) or rule.outside(labels, top)
            if refused is not None:  # before its content is looked at
                yield EntryError(listed_in or source, number if listed_in else line, refused)
                continue
            problem = _not_an_image(image) if listed_in else None
            if problem is not None:  # a list's entry names its list and line, not data.yaml's
                yield EntryError(listed_in, number, f"{image}: {problem}")
                continue
            try:
                found = objects(labels, classes)
            except EntryError as exc:
                yield exc
                continue
            key = os.path.relpath(image, root)
            name = os.path.basename(image)
            yield detection_row(source, line, image, name, os.path.splitext(name)[0], found, key)


def _dataset_yaml(path: str) -> bool:
    """Whether ``path`` is a dataset YAML. One that does not parse is, where its name (Ultralytics'
    ``data.yaml``) or its lines (``names:`` and a split) say so: ``_load`` then gives the parser's
    line and reason, where "unknown index format '.yaml'" would hide them."""
    if not path.lower().endswith(_YAML) or not os.path.isfile(path) or os.path.getsize(path) > _PEEK:
        return False
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = yaml.safe_load(f)
    except OSError:
        return False
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError):  # PyYAML recurses a level: nested past about 1000
        with open(path, "rb") as f:
            keys = set(_TOP_KEYS.findall(f.read().decode("utf-8", "replace")))
        return os.path.basename(path).lower() in _DATA_YAML or bool(keys & {"names", "nc"} and keys & set(SPLITS))
    return isinstance(data, dict) and ("names" in data or "nc" in data) and any(data.get(s) for s in SPLITS)


def _dataset_files(root: str) -> list[str]:
    """The dataset YAMLs directly in the folder ``root``."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [path for path in (os.path.join(root, n) for n in names) if YOLO.claims(path)]


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
        data = yaml.safe_load(raw.decode("utf-8-sig"))
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ShardkitError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x}): save it as UTF-8") from None
    except RecursionError:  # PyYAML recurses a level: nested past about 1000
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
        # Keys as Ultralytics reads them (check_class_names: int(k)): '0' is class 0.
        indexes = {key: _class_index(key) for key in given}
        bad = next((key for key, index in indexes.items() if index is None), None)
        if bad is not None:
            raise ShardkitError(f"{path}: names: the key {bad!r} is not a class index: the keys are YOLO's classes, 0 to {len(given) - 1}")
        by_index = {indexes[key]: name for key, name in given.items()}
        if set(by_index) != set(range(len(given))):
            got = ", ".join(str(i) for i in sorted(i for i in indexes.values() if i is not None))
            raise ShardkitError(f"{path}: names: expected the class indexes 0 to {len(given) - 1}, got {got}")
        given = [by_index[i] for i in range(len(given))]
    if not isinstance(given, list) or not given or not all(isinstance(n, str | int) and str(n) for n in given):
        raise ShardkitError(f"{path}: names: expected a list of class names, or a mapping of class index to name")
    if count is not None and count != len(given):
        raise ShardkitError(f"{path}: nc is {count}, but names has {len(given)}")
    listed = [str(n) for n in given]
    repeated = next((n for i, n in enumerate(listed) if n in listed[:i]), None)
    if repeated is not None:
        raise ShardkitError(f"{path}: names: {repeated!r} names two classes")
    return listed


def _class_index(key: Any) -> int | None:
    """A key of ``names`` as a class index: an integer, or a string of one; else None."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if isinstance(key, str) and key.strip().lstrip("+-").isdigit():
        return int(key)
    return None


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


def images(path: str, root: str, entry: Any, within: str | None = None) -> list[tuple[str, str, int]]:
    """A split's images, absolute and sorted (as Ultralytics lists them), from its entry in
    ``data.yaml``, each with the list file and line that names it ("" and 0: found in a folder);
    each folder or list inside ``within`` where given (the read rule: ``storage.boundary``). A
    folder's files are its images by suffix; a list's every line is meant as an image."""
    found: list[tuple[str, str, int]] = []
    for item in entry if isinstance(entry, list) else [entry]:
        if not isinstance(item, str) or not item:
            raise ShardkitError(f"{path}: expected a folder or a .txt list of images, got {item!r}")
        place = os.path.normpath(os.path.join(root, item))
        if not os.path.exists(place) and item.startswith("../"):
            place = os.path.normpath(os.path.join(root, item[3:]))
        if within is not None and (refused := Boundary().outside(place, within)) is not None:
            raise ShardkitError(f"{path}: {item}: {refused}")
        if os.path.isdir(place):
            walked = (os.path.join(folder, n) for folder, _, files in os.walk(place) for n in files)
            found += [(p, "", 0) for p in walked if os.path.splitext(p)[1].lower() in IMAGE_SUFFIXES]
        elif os.path.isfile(place):
            found += _listed(place)
        else:
            raise ShardkitError(f"{path}: {item}: no such folder or image list (looked for {place})")
    return sorted(found)


def _listed(list_file: str) -> list[tuple[str, str, int]]:
    """The images a ``.txt`` list names, relative ones against its folder, with their lines."""
    folder = os.path.dirname(list_file)
    try:
        with open(list_file, encoding="utf-8-sig") as f:
            lines = [(n, line.strip()) for n, line in enumerate(f, start=1) if line.strip()]
        return [(os.path.normpath(os.path.join(folder, text)), list_file, n) for n, text in lines]
    except (OSError, UnicodeDecodeError) as exc:
        raise ShardkitError(f"{list_file}: cannot read the image list: {getattr(exc, 'strerror', None) or exc}") from None


def _not_an_image(image: str) -> str | None:
    """Why a list's entry cannot be built (a missing file; a name with no image suffix whose
    content is no image either, such as a .txt); None where it can: an entry of a list the user
    wrote is never left out unsaid (Ultralytics drops those without an image suffix)."""
    try:
        if os.path.splitext(image)[1].lower() in IMAGE_SUFFIXES:
            return None if os.path.isfile(image) else "no such image file" if not os.path.exists(image) else "not a file"
        kind = image_format(image)  # .jfif from a browser, a name with no suffix: told by content
    except OSError as exc:
        return "no such image file" if isinstance(exc, FileNotFoundError) else f"cannot read: {exc.strerror or exc}"
    return None if kind is not None else "not an image (no image suffix, and Pillow does not know its content): a list names images only"


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
