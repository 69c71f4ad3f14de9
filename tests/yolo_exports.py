"""YOLO exports written the way the tools write them, from one ground truth in pixels, and the
check that TensorFlow reads every box and class back from a build of them.

* ``write_darknet``: datumaro's ``yolo`` exporter, which CVAT's "YOLO 1.1" export runs:
  ``obj.data`` (``classes = N``, ``<subset> = data/<subset>.txt``, ``names = data/obj.names``,
  ``backup = backup/``), ``obj.names``, ``<subset>.txt`` naming ``data/obj_<subset>_data/x.jpg``,
  each image's labels beside it (``%.6f``, an empty file for an image without boxes).
  ``prefix=False``: the layout CVAT's format page shows (``--add-path-prefix false``).
* ``write_supervision``: supervision's ``DetectionDataset.as_yolo`` per split, into Roboflow's
  folders (``train/images``, ``train/labels``, ``valid/...``), and its ``data.yaml`` holding ``nc``
  and ``names`` alone (``yaml.dump(sort_keys=False, default_flow_style=None)``); labels ``%.5f``.
* ``write_labelimg``: LabelImg's YOLO mode: ``%d %.6f %.6f %.6f %.6f`` lines, ``classes.txt`` in
  the labels folder, no file for an image it never saved boxes for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.detection_sets import photo

NAMES = ["car", "person", "traffic light"]
# split -> (image, width, height, [(class index, xmin, ymin, xmax, ymax) in pixels])
TRUTH: dict[str, list[tuple[str, int, int, list[tuple[int, float, float, float, float]]]]] = {
    "train": [
        ("frame_000000.jpg", 64, 48, [(0, 4.0, 6.0, 30.0, 40.0), (2, 40.5, 2.25, 60.0, 20.0)]),
        ("frame_000001.jpg", 80, 40, [(1, 0.0, 0.0, 80.0, 40.0)]),
        ("frame_000002.jpg", 56, 56, []),  # a negative image
    ],
    "valid": [
        ("frame_000003.jpg", 48, 64, [(2, 10.0, 12.0, 20.0, 50.0), (2, 25.0, 30.0, 47.0, 63.0), (0, 1.0, 1.0, 5.0, 5.0)]),
        ("frame_000004.jpg", 40, 40, []),
    ],
}


def _yolo(box: tuple[int, float, float, float, float], width: int, height: int, digits: int) -> str:
    """A label line as datumaro's ``_make_yolo_bbox`` and supervision's ``object_to_yolo`` compute it."""
    label, x0, y0, x1, y1 = box
    values = ((x0 + x1) / 2 / width, (y0 + y1) / 2 / height, (x1 - x0) / width, (y1 - y0) / height)
    return f"{label} " + " ".join(f"{v:.{digits}f}" for v in values)


def write_darknet(root: Path, prefix: bool = True) -> Path:
    """A datumaro / CVAT "YOLO 1.1" export with its images; returns ``obj.data``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "obj.names").write_text("".join(f"{name}\n" for name in NAMES), encoding="utf-8")
    lead = "data/" if prefix else ""
    for seed, (subset, images) in enumerate(TRUTH.items()):
        folder = root / f"obj_{subset}_data"
        folder.mkdir()
        for k, (name, width, height, boxes) in enumerate(images):
            photo(folder / name, width, height, 10 * seed + k)
            (folder / f"{Path(name).stem}.txt").write_text("".join(_yolo(b, width, height, 6) + "\n" for b in boxes), encoding="utf-8")
        (root / f"{subset}.txt").write_text("".join(f"{lead}obj_{subset}_data/{name}\n" for name, *_ in images), encoding="utf-8")
    lines = [
        f"classes = {len(NAMES)}\n",
        *(f"{subset} = {lead}{subset}.txt\n" for subset in TRUTH),
        f"names = {lead}obj.names\n",
        "backup = backup/\n",
    ]
    (root / "obj.data").write_text("".join(lines), encoding="utf-8")
    return root / "obj.data"


def write_supervision(root: Path) -> Path:
    """Roboflow's folders as ``as_yolo`` fills them, ``data.yaml`` with ``nc`` and ``names``; returns ``data.yaml``."""
    for seed, (split, images) in enumerate(TRUTH.items()):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir()
        for k, (name, width, height, boxes) in enumerate(images):
            photo(root / split / "images" / name, width, height, 10 * seed + k)
            (root / split / "labels" / f"{Path(name).stem}.txt").write_text("".join(_yolo(b, width, height, 5) + "\n" for b in boxes))
    with open(root / "data.yaml", "w") as f:
        yaml.dump({"nc": len(NAMES), "names": NAMES}, f, sort_keys=False, default_flow_style=None)
    return root / "data.yaml"


def write_labelimg(root: Path, splits: bool) -> Path:
    """``images/`` and ``labels/`` as LabelImg's YOLO mode saves them (flat: every image in
    ``train``; with ``splits``, a subfolder a split and ``classes.txt`` beside them); returns
    ``classes.txt``."""
    classes = root / "classes.txt" if splits else root / "labels" / "classes.txt"
    for seed, (split, images) in enumerate(TRUTH.items()):
        where = Path(split) if splits else Path()
        (root / "images" / where).mkdir(parents=True, exist_ok=True)
        (root / "labels" / where).mkdir(parents=True, exist_ok=True)
        for k, (name, width, height, boxes) in enumerate(images):
            photo(root / "images" / where / name, width, height, 10 * seed + k)
            if boxes:  # LabelImg writes no file for an image it saved no box for
                (root / "labels" / where / f"{Path(name).stem}.txt").write_text("".join(_yolo(b, width, height, 6) + "\n" for b in boxes))
    classes.write_text("".join(f"{name}\n" for name in NAMES))
    return classes


def records(out: Path) -> dict[str, dict[str, Any]]:
    """Every record of ``out`` as TensorFlow parses it: split -> image name -> its features."""
    import tensorflow as tf

    found: dict[str, dict[str, Any]] = {}
    for shard in sorted(out.glob("*.tfrecord")):
        split = shard.name.split("-", 1)[0]
        for raw in tf.data.TFRecordDataset(str(shard)):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            found.setdefault(split, {})[feature["image/filename"].bytes_list.value[0].decode()] = feature
    return found


def assert_truth(out: Path, splits: dict[str, str]) -> None:
    """Every image of ``TRUTH`` (``splits``: its split -> the split's name in ``out``) is a record
    of ``out`` whose boxes are the truth's within 0.5 px, its class names and ids exact."""
    built = records(out)
    counts: dict[str, int] = {}
    for split, images in TRUTH.items():
        counts[splits[split]] = counts.get(splits[split], 0) + len(images)
    assert {name: len(found) for name, found in built.items()} == counts  # negative images kept
    for split, images in TRUTH.items():
        for name, width, height, boxes in images:
            feature = built[splits[split]][name]
            assert (feature["image/width"].int64_list.value[0], feature["image/height"].int64_list.value[0]) == (width, height)
            got = list(
                zip(
                    *(feature[f"image/object/bbox/{k}"].float_list.value for k in ("xmin", "ymin", "xmax", "ymax")),
                    strict=True,
                )
            )
            assert len(got) == len(boxes), name
            for (x0, y0, x1, y1), (_, *want) in zip(got, boxes, strict=True):
                pixels = (x0 * width, y0 * height, x1 * width, y1 * height)
                assert max(abs(a - b) for a, b in zip(pixels, want, strict=True)) <= 0.5, (name, pixels, want)
            assert [t.decode() for t in feature["image/object/class/text"].bytes_list.value] == [NAMES[b[0]] for b in boxes]
            assert list(feature["image/object/class/label"].int64_list.value) == [b[0] + 1 for b in boxes]
    label_map = (out / "label_map.pbtxt").read_text()
    assert label_map == "".join(f"item {{\n  id: {i}\n  name: '{n}'\n}}\n" for i, n in enumerate(NAMES, start=1))
