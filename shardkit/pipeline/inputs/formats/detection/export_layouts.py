"""Where COCO exports put their files: the split a file is told by its name or its folder's, the
folder its images are in, and which folders are exports whose files are their splits.

- The standard layout: ``annotations/instances_val2017.json`` beside ``val2017/``.
- datumaro's (and CVAT's, which exports through it): ``annotations/instances_<split>.json``
  with the images in ``images/<split>/``.
- Roboflow's (and supervision's): ``<split>/_annotations.coco.json`` beside the split's images
  (``train``, ``valid``, ``test``): the file's name tells no split, its folder's does.
- CVAT's "COCO 1.0" of a task (and Supervisely's): ``annotations/instances_default.json`` beside
  a flat ``images/``.
- FiftyOne's (``COCODetectionDataset``): ``labels.json`` beside ``data/``, the images; exported a
  split a folder, so the folder's name is the split, as for Roboflow's.

A ``file_name`` that already begins with its image folder's name (``val2017/x.jpg``, as some
converters write it in the standard layout) resolves against the folder above: told once a file,
by its first image, and only where the image folder holds no folder of that name.
"""

from __future__ import annotations

import json
import os
import re

from shardkit.storage import location

TASK_PREFIX = re.compile(r"^(instances|person_keypoints|captions|panoptic)_", re.IGNORECASE)
_YEAR = re.compile(r"\d{4}$")
ROBOFLOW = "_annotations.coco.json"  # in each split's folder, beside its images
ANNOTATIONS, IMAGES = "annotations", "images"
FIFTYONE, FIFTYONE_IMAGES = "labels.json", "data"  # FiftyOne's COCODetectionDataset: labels.json beside data/
_FILE_NAME = re.compile(rb'"file_name"\s*:\s*("(?:[^"\\]|\\.){0,4096}")')  # bounded: a name of megabytes is no folder's
_PEEK = 1 << 20  # where the first image's file_name is looked for
_INDEX_SUFFIXES = (".txt", ".csv", ".tsv", ".jsonl", ".parquet")  # the index files a folder of them holds


def split_name(path: str) -> str:
    """``instances_val2017.json`` -> ``val``; ``train.json`` -> ``train``; Roboflow's
    ``valid/_annotations.coco.json`` -> ``valid``, its folder's name, as FiftyOne's
    ``train/labels.json`` beside ``train/data/`` -> ``train``. Any other file's name tells its
    split, ``annotations.json`` being ``annotations`` (as ever: a folder's name may be no split's)."""
    base = os.path.splitext(os.path.basename(path))[0]
    folder = location.dirname(location.absolute(path))
    if os.path.basename(path) == ROBOFLOW or (os.path.basename(path) == FIFTYONE and _fiftyone(folder)):
        return os.path.basename(folder) or base  # these exports put a split in a folder: the file's name tells none
    stem = TASK_PREFIX.sub("", base)
    return _YEAR.sub("", stem) or stem


def image_folder(path: str) -> str:
    """The image folder of the annotation file ``path``, absolute: ``val2017/`` beside
    ``annotations/`` (the standard layout), or inside it, or ``images/val2017/`` beside it
    (datumaro's), where one exists; ``data/`` beside FiftyOne's ``labels.json``; ``images/`` beside
    ``annotations/`` (CVAT's task export); else the file's own folder. The folder above it where
    the file names already begin with its name and it holds no folder of that name."""
    folder = location.dirname(location.absolute(path))
    if os.path.basename(path) == FIFTYONE and _fiftyone(folder):
        return os.path.join(folder, FIFTYONE_IMAGES)
    base = os.path.splitext(os.path.basename(path))[0]
    stem = TASK_PREFIX.sub("", base)
    if location.is_url(folder):
        return folder
    parent = os.path.dirname(folder)
    if stem and stem != base:
        for candidate in (os.path.join(parent, stem), os.path.join(folder, stem), os.path.join(parent, IMAGES, stem)):
            if os.path.isdir(candidate):
                named = (_first_file_name(path) or "").replace("\\", "/").startswith(stem + "/")
                return os.path.dirname(candidate) if named and not os.path.isdir(os.path.join(candidate, stem)) else candidate
    return _flat_images(path, folder) or folder


def _flat_images(path: str, folder: str) -> str | None:
    """``images/`` beside the ``annotations/`` folder holding ``path`` (CVAT's "COCO 1.0" export of a
    task, Supervisely's layout), where the first image is not beside the file itself."""
    images = os.path.join(os.path.dirname(folder), IMAGES)
    if os.path.basename(folder) != ANNOTATIONS or not os.path.isdir(images):
        return None
    first = (_first_file_name(path) or "").replace("\\", "/")
    if first and os.path.isfile(os.path.join(folder, first)):
        return None
    return os.path.dirname(images) if first.startswith(IMAGES + "/") else images


def _fiftyone(folder: str) -> bool:
    """Whether ``folder``, holding a ``labels.json``, is FiftyOne's export: its images in ``data/``."""
    return not location.is_url(folder) and os.path.isdir(os.path.join(folder, FIFTYONE_IMAGES))


def coco_files(root: str) -> list[str]:
    """The annotation files an export folder ``root`` would hold, where they are files: each
    subfolder's ``_annotations.coco.json`` (Roboflow's) or ``labels.json`` beside its ``data/``
    (FiftyOne's), the folder's own such ``labels.json``, then ``annotations/instances_*.json`` (the
    standard layout, datumaro's); local folders only, and none where the folder holds index files
    of its own, which it is read as. Whether each is COCO is the caller's."""
    try:
        with os.scandir(root) as entries:
            found_entries = [(e.name, e.is_dir()) for e in entries]
        folders = sorted(name for name, is_dir in found_entries if is_dir)
        if any(not is_dir and _an_index(name) for name, is_dir in found_entries):
            return []  # the folder's own index files say what it holds (Ultralytics' coco/ has train2017.txt)
        listed = sorted(os.listdir(os.path.join(root, ANNOTATIONS))) if ANNOTATIONS in folders else []
    except OSError:
        return []
    fiftyone = [os.path.join(root, *name, FIFTYONE) for name in [(n,) for n in folders] + [()]]
    found = (
        [os.path.join(root, name, ROBOFLOW) for name in folders]
        + [path for path in fiftyone if os.path.isdir(os.path.join(os.path.dirname(path), FIFTYONE_IMAGES))]
        + [os.path.join(root, ANNOTATIONS, n) for n in listed if n.startswith("instances_") and n.lower().endswith(".json")]
    )
    return [path for path in found if os.path.isfile(path)]


def _first_file_name(path: str) -> str | None:
    """The first image's ``file_name``, where the file's first MiB has it."""
    try:
        found = _FILE_NAME.search(location.read_bytes(path, 0, _PEEK))
        name = json.loads(found.group(1)) if found else None
    except (OSError, ValueError):
        return None
    return name if isinstance(name, str) else None


def _an_index(name: str) -> bool:
    """Whether a file at an export folder's top is an index file the folder is read by, not an
    export's note (Roboflow's ``README.dataset.txt``, ``README.roboflow.txt``)."""
    return name.lower().endswith(_INDEX_SUFFIXES) and not name.upper().startswith("README")
