"""Detection inputs written the way the real tools write them, for tests: a COCO set in the
standard layout (``annotations/instances_val2017.json`` beside ``val2017/``), with polygons, a
crowd RLE, keypoints, a box poking past the border and one wholly outside; optionally the boxes
on and around the borders that converters treat differently; a Pascal VOC folder
(as VOC2012 and LabelImg write their XML); a YOLO dataset as Ultralytics exports it; the TF OD
API tutorial's CSV (as its ``xml_to_csv.py`` writes it, through pandas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CATEGORIES = [
    {"supercategory": "person", "id": 1, "name": "person", "keypoints": ["nose", "left_eye", "right_eye"], "skeleton": [[1, 2], [1, 3]]},
    {"supercategory": "vehicle", "id": 3, "name": "car"},
    {"supercategory": "vehicle", "id": 7, "name": "train"},
    {"supercategory": "vehicle", "id": 9, "name": "boat"},  # no instance: still in the label map
]


def _box(category: int, x: float, y: float, w: float, h: float, area: float, parts: int = 1) -> dict[str, Any]:
    """A non-crowd object whose polygon is its box, cut into ``parts`` side-by-side pieces."""
    step = w / parts
    polygons = [[x + k * step, y, x + (k + 1) * step, y, x + (k + 1) * step, y + h, x + k * step, y + h] for k in range(parts)]
    return {"segmentation": polygons, "area": area, "iscrowd": 0, "bbox": [x, y, w, h], "category_id": category}


def _edge_boxes(width: int, height: int) -> list[dict[str, Any]]:
    return [
        _box(1, -0.3, 4.0, 10.3, 20.0, 190.5, parts=2),  # starts 0.3 px before the left border
        _box(3, width - 20.0, 2.0, 20.0, 12.0, 230.25),  # ends exactly on the right border
        _box(7, 12.0, height - 20.0, 16.0, 20.4, 310.0),  # 0.4 px past the bottom border
        _box(3, 40.0, 30.0, 0.0, 5.0, 1.5),  # zero width: dropped
    ]


def _past_the_border_only(width: int, height: int) -> list[dict[str, Any]]:
    return [_box(3, width - 10.0, 8.0, 10.4, 10.0, 101.0)]


EDGES = (_edge_boxes, _past_the_border_only)  # the objects of each image ``write_coco(edges=True)`` adds


def photo(path: Path, width: int, height: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path, quality=90)


def write_coco(root: Path, split: str = "val2017", images: int = 6, edges: bool = False, width: int = 64, height: int = 48) -> Path:
    """A COCO set under ``root``; returns its annotation file. Image ``i`` is ``width + 8 * i`` x
    ``height`` and has ``i % 4`` objects: a person with keypoints, a car whose box pokes 0.4 px
    past the right border, a crowd of trains as an RLE; image 5 also has a box wholly outside the
    image (dropped, counted).

    With ``edges``, two more images hold the boxes converters disagree on (``EDGES``): one
    starting 0.3 px before the left border (its polygon in two parts), one ending exactly on the
    right border, one 0.4 px past the bottom, one of zero width; and an image whose only box is
    past the right border. No two annotations of an image share an area, so a test can tell
    which annotation a written object is by its area."""
    base_width = width
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / split).mkdir(exist_ok=True)
    entries: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    next_id = 1
    for i in range(images):
        width = base_width + 8 * i
        name = f"{i:012d}.jpg"
        photo(root / split / name, width, height, i)
        entries.append({"license": 1, "file_name": name, "coco_url": "", "height": height, "width": width, "id": 100 + i})
        objects: list[dict[str, Any]] = []
        if i % 4 >= 1:
            x, y, w, h = 5.5, 6.0, 20.25, 30.0
            objects.append(
                {
                    "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
                    "area": w * h * 0.9,
                    "iscrowd": 0,
                    "bbox": [x, y, w, h],
                    "category_id": 1,
                    "num_keypoints": 2,
                    "keypoints": [10, 12, 2, 14, 11, 1, 0, 0, 0],
                }
            )
        if i % 4 >= 2:
            x, y = 30.0, 10.0
            w, h = width - x + 0.4, 20.0  # 0.4 px past the border: kept, clipped
            polygon = [[x, y, width, y, width, y + h, x, y + h]]
            objects.append({"segmentation": polygon, "area": 390.0, "iscrowd": 0, "bbox": [x, y, w, h], "category_id": 3})
        if i % 4 == 3:
            counts = [0, 3 * height, (width - 3) * height]  # column-major runs: the first 3 columns
            rle = {"counts": counts, "size": [height, width]}
            objects.append({"segmentation": rle, "area": 3.0 * height, "iscrowd": 1, "bbox": [0, 0, 3, height], "category_id": 7})
        if i == 5:
            outside = {"segmentation": [[200, 10, 220, 10, 220, 20]], "area": 50.0, "iscrowd": 0, "bbox": [200.0, 10.0, 20.0, 10.0]}
            objects.append({**outside, "category_id": 3})
        for obj in objects:
            annotations.append({**obj, "image_id": 100 + i, "id": next_id})
            next_id += 1
    if edges:
        for i, edge_objects in enumerate(EDGES, start=images):
            width = base_width + 8 * i
            name = f"{i:012d}.jpg"
            photo(root / split / name, width, height, i)
            entries.append({"license": 1, "file_name": name, "coco_url": "", "height": height, "width": width, "id": 100 + i})
            for obj in edge_objects(width, height):
                annotations.append({**obj, "image_id": 100 + i, "id": next_id})
                next_id += 1
    annotations = annotations[1::2] + annotations[0::2]  # real files do not group annotations by image
    document = {
        "info": {"description": "test", "version": "1.0", "year": 2017},
        "licenses": [{"url": "", "id": 1, "name": "test"}],
        "images": entries,
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    path = root / "annotations" / f"instances_{split}.json"
    path.write_text(json.dumps(document))
    return path


# -- Pascal VOC ------------------------------------------------------------------------------------

# (id, width, height, objects: (name, pose, truncated, difficult, (xmin, ymin, xmax, ymax), parts))
VOC_IMAGES: list[tuple[str, int, int, list[tuple[str, str, int, int, tuple[float, ...], bool]]]] = [
    ("2008_000008", 64, 48, [("horse", "Left", 0, 0, (5, 8, 47, 42), False), ("person", "Unspecified", 1, 0, (15, 2, 30, 23), True)]),
    ("2008_000015", 56, 40, [("bottle", "Unspecified", 1, 0, (27, 10, 33.5, 39), False), ("bottle", "Left", 0, 1, (40, 2, 55, 40), False)]),
    ("2008_000019", 48, 64, [("dog", "Right", 0, 0, (3, 4, 40, 60), False)]),
    ("2008_000023", 40, 40, [("person", "Frontal", 0, 0, (1, 1, 39, 39), False), ("bottle", "Unspecified", 0, 1, (2, 20, 8, 38), False)]),
    ("2008_000028", 72, 48, [("dog", "Unspecified", 1, 0, (30, 1, 71, 47), False)]),
]
VOC_SPLITS = {"train": ["2008_000008", "2008_000019", "2008_000028"], "val": ["2008_000015", "2008_000023"]}


def voc_xml(image_id: str, width: int, height: int, objects: list[tuple[str, str, int, int, tuple[float, ...], bool]]) -> str:
    """An annotation as VOC2012's XML files are laid out (tab indents, ``<source>``, ``<segmented>``,
    ``<occluded>``, person ``<part>`` boxes inside an object)."""
    out = [
        "<annotation>",
        "\t<folder>VOC2012</folder>",
        f"\t<filename>{image_id}.jpg</filename>",
        "\t<source>\n\t\t<database>The VOC2008 Database</database>",
        "\t\t<annotation>PASCAL VOC2008</annotation>\n\t\t<image>flickr</image>\n\t</source>",
        f"\t<size>\n\t\t<width>{width}</width>\n\t\t<height>{height}</height>\n\t\t<depth>3</depth>\n\t</size>",
        "\t<segmented>0</segmented>",
    ]
    for name, pose, truncated, difficult, box, parts in objects:
        corners = "".join(f"\t\t\t<{k}>{v:g}</{k}>\n" for k, v in zip(("xmin", "ymin", "xmax", "ymax"), box, strict=True))
        out += ["\t<object>", f"\t\t<name>{name}</name>", f"\t\t<pose>{pose}</pose>", f"\t\t<truncated>{truncated}</truncated>"]
        out += ["\t\t<occluded>0</occluded>", f"\t\t<bndbox>\n{corners}\t\t</bndbox>", f"\t\t<difficult>{difficult}</difficult>"]
        if parts:  # the person layout's parts: a name and a box of their own, inside the object
            out += ["\t\t<part>\n\t\t\t<name>head</name>", "\t\t\t<bndbox>\n\t\t\t\t<xmin>16</xmin>\n\t\t\t\t<ymin>2</ymin>",
                    "\t\t\t\t<xmax>22</xmax>\n\t\t\t\t<ymax>8</ymax>\n\t\t\t</bndbox>\n\t\t</part>"]  # fmt: skip
        out.append("\t</object>")
    return "\n".join([*out, "</annotation>", ""])


def labelimg_xml(filename: str, folder: Path, width: int, height: int, objects: list[tuple[str, tuple[int, ...]]]) -> str:
    """An annotation as LabelImg saves one (its ``PascalVocWriter``: tab indents, ``<path>``, no declaration)."""
    out = [
        "<annotation>",
        f"\t<folder>{folder.name}</folder>",
        f"\t<filename>{filename}</filename>",
        f"\t<path>{folder / filename}</path>",
        "\t<source>\n\t\t<database>Unknown</database>\n\t</source>",
        f"\t<size>\n\t\t<width>{width}</width>\n\t\t<height>{height}</height>\n\t\t<depth>3</depth>\n\t</size>",
        "\t<segmented>0</segmented>",
    ]
    for name, box in objects:
        corners = "".join(f"\t\t\t<{k}>{v}</{k}>\n" for k, v in zip(("xmin", "ymin", "xmax", "ymax"), box, strict=True))
        out += ["\t<object>", f"\t\t<name>{name}</name>", "\t\t<pose>Unspecified</pose>", "\t\t<truncated>0</truncated>"]
        out += ["\t\t<difficult>0</difficult>", f"\t\t<bndbox>\n{corners}\t\t</bndbox>", "\t</object>"]
    return "\n".join([*out, "</annotation>", ""])


def write_voc(root: Path) -> Path:
    """``root/VOCdevkit/VOC2012`` with ``VOC_IMAGES``, the main split files and per-class lists; returns the VOC folder."""
    voc = root / "VOCdevkit" / "VOC2012"
    for sub in ("Annotations", "JPEGImages", "ImageSets/Main", "ImageSets/Segmentation", "SegmentationClass"):
        (voc / sub).mkdir(parents=True, exist_ok=True)
    for seed, (image_id, width, height, objects) in enumerate(VOC_IMAGES):
        photo(voc / "JPEGImages" / f"{image_id}.jpg", width, height, seed)
        (voc / "Annotations" / f"{image_id}.xml").write_text(voc_xml(image_id, width, height, objects))
    main = voc / "ImageSets" / "Main"
    for split, ids in VOC_SPLITS.items():
        (main / f"{split}.txt").write_text("".join(f"{i}\n" for i in ids))
        for name in ("bottle", "dog"):  # per-class lists: "id  1" (present), "id -1" (absent), as VOC writes them
            present = {i for i, _, _, objects in VOC_IMAGES for n, *_ in objects if n == name}
            (main / f"{name}_{split}.txt").write_text("".join(f"{i} {' 1' if i in present else '-1'}\n" for i in ids))
    (main / "trainval.txt").write_text("".join(f"{i}\n" for i in sorted(VOC_SPLITS["train"] + VOC_SPLITS["val"])))
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("2008_000008\n")  # another task's split: not read
    return voc


# -- YOLO (Ultralytics) ----------------------------------------------------------------------------

YOLO_NAMES = ["person", "car", "dog"]
# split -> (image name, width, height, label lines as Ultralytics writes them: "%g"-formatted, or None for no label file)
YOLO_IMAGES: dict[str, list[tuple[str, int, int, list[str] | None]]] = {
    "train": [
        ("a.jpg", 64, 48, ["0 0.5 0.5 0.25 0.5", "2 0.25 0.75 0.125 0.25"]),
        ("b.jpg", 40, 32, ["1 0.1 0.2 0.3 0.2 0.3 0.6 0.1 0.6"]),  # YOLO-seg: a polygon, its extent the box
        ("c.png", 32, 32, None),  # no label file: no objects
    ],
    "val": [("d.jpg", 48, 40, ["2 0.5 0.5 1 1"]), ("e.jpg", 40, 40, [])],  # an empty label file: no objects
}


def write_yolo(root: Path, yaml_text: str | None = None) -> Path:
    """A dataset as Ultralytics exports one: ``images/{train,val}``, ``labels/{train,val}``, a
    ``data.yaml`` with a ``path``, the splits and ``names`` as a mapping; returns ``data.yaml``."""
    for seed, (split, entries) in enumerate(YOLO_IMAGES.items()):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for k, (name, width, height, lines) in enumerate(entries):
            photo(root / "images" / split / name, width, height, 10 * seed + k)
            if lines is not None:
                (root / "labels" / split / f"{Path(name).stem}.txt").write_text("".join(f"{line}\n" for line in lines))
    names = "".join(f"  {i}: {name}\n" for i, name in enumerate(YOLO_NAMES))
    data = root / "data.yaml"
    data.write_text(yaml_text or f"path: {root}\ntrain: images/train\nval: images/val\ntest:\n\nnames:\n{names}")
    return data


# -- the TF OD API tutorial's CSV ------------------------------------------------------------------

# (filename, width, height, class, xmin, ymin, xmax, ymax): xml_to_csv's tuples, in its glob's order
CSV_LINES = [
    ("raccoon-1.jpg", 64, 48, "raccoon", 5, 6, 40, 44),
    ("raccoon-2.jpg", 56, 40, "raccoon", 10, 0, 50, 30),
    ("raccoon-1.jpg", 64, 48, "dog", 30, 10, 64, 40),  # an image's lines need not be next to each other
    ("raccoon-2.jpg", 56, 40, "dog", 0, 20, 20, 40),
    ("raccoon-3.jpg", 40, 40, "raccoon", 2, 3, 38, 37),
]


def write_od_csv(root: Path, name: str = "train_labels.csv", lines: list[tuple[Any, ...]] | None = None) -> Path:
    """``root/images/*.jpg`` and the CSV ``pandas.DataFrame.to_csv(index=None)`` writes of them,
    beside the images (the tutorial's ``images/train_labels.csv``); returns the CSV."""
    folder = root / "images"
    folder.mkdir(parents=True, exist_ok=True)
    lines = CSV_LINES if lines is None else lines
    for seed, (filename, width, height, *_) in enumerate(dict.fromkeys((f, w, h) for f, w, h, *_ in lines)):
        if not (folder / filename).exists():
            photo(folder / filename, width, height, seed)
    text = ",".join(("filename", "width", "height", "class", "xmin", "ymin", "xmax", "ymax")) + "\n"
    path = folder / name
    path.write_text(text + "".join(",".join(str(v) for v in line) + "\n" for line in lines))
    return path
