"""YOLO datasets as Ultralytics, Roboflow, supervision and LabelImg lay them out: a ``data.yaml``
naming its splits and classes, or a ``classes.txt``, the labels in the parallel ``labels/`` tree.
One file, several splits: ``file_splits``. (Darknet's ``obj.data``: ``detection.darknet``.)

``data.yaml`` has ``path`` (the root, optional: else the file's folder), ``train``, ``val`` and
``test``, each a folder of images (walked down), a ``.txt`` list of image paths, or a list of those,
relative to the root (a ``../`` that leads nowhere is dropped, as Ultralytics does for Roboflow's
exports), and ``names``: a list, or a mapping ``{0: person, ...}`` (keys may be strings of integers,
as Ultralytics reads them; ``nc`` alone gives ``class0``, ...). A split it names that is not there
(Roboflow's ``test: ../test/images`` with no test set) is left out with a warning, as Ultralytics
accepts it. A ``data.yaml`` naming no split (supervision's ``as_yolo`` writes ``nc`` and ``names``
alone) has the splits of the folders beside it: Roboflow's ``<split>/images``, else
``images/<split>``, else ``images/`` itself as ``train``, each named as its folder is (``valid``
stays ``valid``). A folder with ``images/``, ``labels/`` of YOLO label files (a sample is looked at:
masks are no YOLO labels) and a ``classes.txt`` (a class a line, as LabelImg writes it, beside them
or in ``labels/``) is such a dataset too, named by it; where it also holds index files of its own
(``train.txt``), which to build is one line asking. A folder holding either is read the same
(``shardkit build DATASET``); a ``classes.txt`` given alone is one line saying to give its folder. A
folder's images are told by suffix; each line of a list is meant as an image: one with no image
suffix is told by content, and one that is missing or no image is an ``EntryError`` naming the list
and its line.

An image's labels are the ``.txt`` file at its path with the last ``images`` folder made ``labels``
(``images/train/a.jpg`` -> ``labels/train/a.txt``), as Ultralytics finds them: a line ``class cx cy
w h``, normalized to the image's size, or a YOLO-seg line ``class x1 y1 x2 y2 ...`` whose box is its
polygon's extent (the polygon is not kept: its pixels need the image's size, which YOLO labels never
state). An image with no label file, or an empty one, has no objects. YOLO's class ``i`` is label
``i + 1``, named ``names[i]``: the label map. Pose datasets (``kpt_shape``) are refused. Images are
named by absolute path (``--image-root`` has nothing to resolve); local datasets only. The root, the
images and their labels stay inside the dataset file's folder (``storage.boundary``). A row's source
is the dataset file and its line 0: an image has no line of it (a bad list entry names the list and
its line, a bad label the label file and its line, an object its label line).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import yaml

from shardkit.errors import EntryError, ShardkitError, ShardkitWarning
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.pipeline.inputs.formats import delimited, jsonl, parquet, txt, unread
from shardkit.pipeline.inputs.formats.detection import coco, cvat, darknet, labelstudio
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat
from shardkit.pipeline.inputs.formats.detection.darknet import SAMPLE, class_list, labelled_row, list_lines, not_an_image, yolo_lines
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.storage.boundary import Boundary

SPLITS = ("train", "val", "test")
_ORDER = ("train", "val", "valid", "test")  # splits found as folders, in this order; others after, by name
_YAML = (".yaml", ".yml")
_PEEK = 1 << 20  # a dataset YAML is small: a larger one is no dataset's
_DATA_YAML = ("data.yaml", "data.yml")
CLASSES_TXT = "classes.txt"
_LABEL = ".txt"  # a YOLO label file's suffix
# What reads the index and annotation files a classes.txt folder may hold; names that are no one's index.
_READERS: tuple[InputFormat, ...] = (txt.TXT, delimited.CSV, delimited.TSV, jsonl.JSONL, parquet.PARQUET, darknet.DARKNET, coco.COCO)
_READERS += (labelstudio.LABEL_STUDIO, cvat.CVAT, unread.UNREAD)
_NOT_INDEXES = (CLASSES_TXT, "readme", "license")
_LABELS_PEEK = 64  # the entries of a labels folder looked at to tell YOLO labels from masks
_TOP_KEYS = re.compile(r"^(train|val|test|names|nc)\s*:", re.MULTILINE)  # a dataset's keys, in a YAML that does not parse


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A YOLO dataset as its file (``data.yaml``, ``classes.txt``) gives it: its class names, root,
    each split's entry (a folder or ``.txt`` list against the root, or a list of those), absent splits."""

    path: str
    names: list[str]
    root: str
    splits: dict[str, Any]
    absent: tuple[tuple[str, str], ...] = ()  # (split, what it names)


@dataclasses.dataclass(frozen=True)
class Yolo(DetectionFormat):
    # A classes.txt among .txt index files is told (file_splits says what to give instead), not read as images.
    claims_ahead: ClassVar[tuple[str, ...]] = (".txt",)

    def claims(self, path: str) -> bool:
        if os.path.basename(path).lower() == CLASSES_TXT:
            return _classes_home(path) is not None
        return _dataset_yaml(path)

    def claims_folder(self, root: str) -> bool:
        return bool(_dataset_files(root)) or _classes_file(root) is not None

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        found = _dataset_files(root)
        if not found:
            classes = _classes_file(root) or os.path.join(root, CLASSES_TXT)
            _refuse_own_indexes(root, classes)
            return _pieces(dataset(classes))
        if len(found) > 1 and not any(os.path.basename(p) == "data.yaml" for p in found):
            raise ShardkitError(f"{root}: several dataset YAMLs ({', '.join(map(os.path.basename, found))}): give the one to build")
        return self.file_splits(next((p for p in found if os.path.basename(p) == "data.yaml"), found[0]))

    def file_splits(self, path: str) -> list[tuple[str, Piece]]:
        if os.path.basename(path).lower() == CLASSES_TXT:
            _refuse_own_indexes(_home(path), path)
            raise ShardkitError(
                f"{path}: the class names of a YOLO dataset, not an image list: "
                f"give the dataset's folder to read its images and labels (shardkit build {_classes_home(path)})"
            )
        return _pieces(dataset(path))

    def label_map(self, path: str) -> tuple[tuple[int, str], ...]:
        return tuple((i + 1, name) for i, name in enumerate(dataset(path).names))

    def root_of(self, path: str, image_root: str | None) -> str:
        """The dataset's folder: its images are found from it (``--image-root`` has nothing to resolve)."""
        return _home(path)

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        found = dataset(source)
        root = found.root
        rule, top = Boundary(), self.root_of(source, None) if piece.confined else None  # None: --allow-outside-root
        if top is not None and (refused := rule.outside(root, top)) is not None:
            raise ShardkitError(f"{source}: path: {refused}")
        for image, listed_in, number in images(source, root, found.splits[piece.context], top):
            labels = label_path(image)
            refused = None if top is None else rule.outside(image, top) or rule.outside(labels, top)
            if refused is not None:  # before its content is looked at
                yield EntryError(listed_in, number, refused) if listed_in else EntryError(source, 0, f"{image}: {refused}")
                continue
            problem = not_an_image(image) if listed_in else None
            if problem is not None:  # a list's entry names its list and line, not data.yaml's
                yield EntryError(listed_in, number, f"{image}: {problem}")
                continue
            yield labelled_row(source, image, labels, root, found.names)


def _pieces(found: Dataset) -> list[tuple[str, Piece]]:
    """The splits of ``found`` as pieces; a split it names that is not there, a warning."""
    for split, entry in found.absent:
        warnings.warn(f"{found.path}: {split}: {entry}: no such folder or image list: the split is left out", ShardkitWarning, stacklevel=2)
    return [(split, Piece(found.path, context=split)) for split in found.splits]


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
    if not isinstance(data, dict) or not ("names" in data or "nc" in data):
        return False
    if any(data.get(s) for s in SPLITS) or os.path.basename(path).lower() in _DATA_YAML:
        return True
    return "nc" in data and _labelled(os.path.dirname(path))  # supervision's: nc and names alone, its splits the folders beside


def _dataset_files(root: str) -> list[str]:
    """The dataset YAMLs directly in the folder ``root``."""
    try:
        return [path for path in (os.path.join(root, n) for n in sorted(os.listdir(root))) if _dataset_yaml(path)]
    except OSError:
        return []


def dataset(path: str) -> Dataset:
    """The dataset a ``data.yaml`` or ``classes.txt`` describes; one line where it has no split."""
    if os.path.basename(path).lower() == CLASSES_TXT:
        root = _home(path)
        found = Dataset(path, class_list(path), root, dict(_folder_splits(root)))
    else:
        data = _load(path)
        root = _root(path, data)
        named = {split: data[split] for split in SPLITS if data.get(split)}
        absent = tuple((s, str(e)) for s, e in named.items() if isinstance(e, str) and not os.path.exists(_place(root, e)))
        splits = {s: e for s, e in named.items() if s not in dict(absent)} if named else dict(_folder_splits(root))
        found = Dataset(path, names(path, data), root, splits, absent)
    if not found.splits and found.absent:  # each split it names is not there
        said = "; ".join(f"{s}: {e}: no such folder or image list (looked for {_place(found.root, e)})" for s, e in found.absent)
        raise ShardkitError(f"{path}: {said}")
    if not found.splits:
        raise ShardkitError(f"{path}: no split: it names none, and {found.root} has no <split>/images, images/<split> or images folder")
    return found


def _folder_splits(root: str) -> list[tuple[str, str]]:
    """The splits of the folders in ``root`` (each with its images folder, relative): Roboflow's
    ``<split>/images``, else ``images/<split>``, else ``images`` itself as ``train``."""
    try:
        names = os.listdir(root)
        roboflow = [n for n in names if n not in ("images", "labels") and os.path.isdir(os.path.join(root, n, "images"))]
        if roboflow:
            return [(n, f"{n}/images") for n in _ordered(roboflow)]
        if not os.path.isdir(os.path.join(root, "images")):
            return []
        inside = [n for n in os.listdir(os.path.join(root, "images")) if os.path.isdir(os.path.join(root, "images", n))]
    except OSError:
        return []
    return [(n, f"images/{n}") for n in _ordered(inside)] if inside else [("train", "images")]


def _ordered(splits: list[str]) -> list[str]:
    return sorted(splits, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))


def _classes_home(path: str) -> str | None:
    """The dataset folder a ``classes.txt`` belongs to (beside ``images/`` and ``labels/``, or in
    ``labels/``, as LabelImg saves it with the labels); None where no such folder is near."""
    folder = os.path.dirname(os.path.abspath(path))
    homes = (folder, os.path.dirname(folder)) if os.path.basename(folder) == "labels" else (folder,)
    return next((home for home in homes if _labelled(home)), None)


def _labelled(root: str) -> bool:
    """Whether the folder ``root`` holds split folders of images with a ``labels`` folder of YOLO labels beside one."""
    top = os.path.abspath(root)
    return any(_yolo_labels(os.path.dirname(label_path(os.path.join(top, f, "x")))) for _, f in _folder_splits(top))


def _yolo_labels(folder: str) -> bool:
    """Whether ``folder`` holds YOLO label files, from a sample of its entries: a picture among
    them (a segmentation set's mask) or a ``.txt`` of other lines says no; one of YOLO lines, yes."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in itertools.islice(entries, _LABELS_PEEK)]
    except OSError:
        return False
    said = {yolo_lines(os.path.join(folder, n)) for n in [n for n in names if n.lower().endswith(_LABEL) and n != CLASSES_TXT][:SAMPLE]}
    return True in said and False not in said and not any(os.path.splitext(n)[1].lower() in IMAGE_SUFFIXES for n in names)


def _refuse_own_indexes(root: str, classes: str) -> None:
    """One line where the ``classes.txt`` dataset folder ``root`` also holds files a format reads (``train.txt``; a
    README is none): built whole, ``images/`` would be one split, those lists' splits lost; which to build is the user's."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return
    paths = [(n, os.path.join(root, n), os.path.splitext(n)[1].lower()) for n in names if not n.lower().startswith(_NOT_INDEXES)]
    own = [n for n, p, x in paths if os.path.isfile(p) and any(x in f.suffixes or f.claims(p) for f in _READERS)]
    if own:
        named, files = os.path.relpath(classes, root), ", ".join(own)
        key = {n: next((s for s in SPLITS if n.lower().startswith(s)), "train") for n in own if n.lower().endswith(txt.TXT.suffixes)}
        keys = ", ".join(f"{k}: {n}" for n, k in key.items())
        how = f"the image lists with their labels, write a data.yaml beside them ({keys}, names: the lines of {named}) and build it"
        raise ShardkitError(
            f"{root}: a YOLO folder ({named}, images/, labels/) that also holds {files}: which to build is unclear: "
            f"to build {how if keys else 'the files, give them'}; to build all of images/ as one split, move {files} out"
        )


def _classes_file(root: str) -> str | None:
    """The ``classes.txt`` of the dataset folder ``root``: beside ``images/``, or in ``labels/``."""
    candidates = (os.path.join(root, CLASSES_TXT), os.path.join(root, "labels", CLASSES_TXT))
    return next((c for c in candidates if os.path.isfile(c) and _classes_home(c) == os.path.abspath(root)), None)


def _home(path: str) -> str:
    """The folder a dataset file's paths stay in: the YAML's folder; a ``classes.txt``'s dataset folder."""
    folder = os.path.dirname(os.path.abspath(path))
    return (_classes_home(path) or folder) if os.path.basename(path).lower() == CLASSES_TXT else folder


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
        place = _place(root, item)
        if within is not None and (refused := Boundary().outside(place, within)) is not None:
            raise ShardkitError(f"{path}: {item}: {refused}")
        if os.path.isdir(place):
            walked = (os.path.join(folder, n) for folder, _, files in os.walk(place) for n in files)
            found += [(p, "", 0) for p in walked if os.path.splitext(p)[1].lower() in IMAGE_SUFFIXES]
        elif os.path.isfile(place):
            found += listed(place)
        else:
            raise ShardkitError(f"{path}: {item}: no such folder or image list (looked for {place})")
    return sorted(found)


def _place(root: str, item: str) -> str:
    """Where a split's folder or list is: against the root; a ``../`` that leads nowhere dropped."""
    found = os.path.normpath(os.path.join(root, item))
    if not os.path.exists(found) and item.startswith("../"):
        found = os.path.normpath(os.path.join(root, item[3:]))
    return found


def listed(list_file: str) -> list[tuple[str, str, int]]:
    """The images a ``.txt`` list names, relative ones against its folder, with their lines."""
    folder = os.path.dirname(list_file)
    return [(os.path.normpath(os.path.join(folder, text)), list_file, n) for n, text in list_lines(list_file)]


def label_path(image: str) -> str:
    """Where Ultralytics looks for an image's labels: the last ``/images/`` made ``/labels/``, the suffix ``.txt``."""
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return os.path.splitext(labels.join(image.rsplit(images, 1)))[0] + ".txt"


YOLO = Yolo("yolo")
