"""Exports of labelling tools, written for tests the way the tools write them: CVAT's "CVAT for
images 1.1" (``annotations.xml`` through ``xml.sax.saxutils.XMLGenerator``, as CVAT's
``create_xml_dumper`` writes it: attribute order, ``{:.2f}`` coordinates, two-space indents, the
``images/`` folder of its export zip) and KITTI's object labels (``label_2/*.txt`` beside
``image_2/*.png``, the devkit's fifteen fields a line)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import XMLGenerator

import numpy as np
from PIL import Image


def picture(path: Path, width: int, height: int, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)


# -- CVAT -------------------------------------------------------------------------------------------


@dataclass
class Shape:
    """One shape of an image: ``kind`` is CVAT's element (box, polygon, mask, polyline, points, tag, ...)."""

    kind: str
    label: str
    points: Sequence[float] = ()  # box: xtl ytl xbr ybr; polygon and the like: x1 y1 x2 y2 ...
    occluded: int = 0
    attributes: dict[str, str] = field(default_factory=dict)
    mask: np.ndarray | None = None  # a <mask>: its 0/1 pixels over the rectangle at ``points[:2]``


@dataclass
class CvatImage:
    name: str
    width: int
    height: int
    shapes: list[Shape] = field(default_factory=list)
    subset: str | None = None  # a project export's
    task_id: int = 1


def _rle(mask: np.ndarray) -> str:
    """CVAT's export RLE: runs of 0 then 1, alternating, over the rectangle row by row."""
    flat = mask.astype(np.uint8).ravel()
    runs, value, count = [], 0, 0
    for pixel in flat.tolist():
        if pixel == value:
            count += 1
        else:
            runs.append(count)
            value, count = pixel, 1
    runs.append(count)
    return ", ".join(str(r) for r in runs)


class _Writer:
    def __init__(self, out: io.StringIO) -> None:
        self.gen = XMLGenerator(out, "utf-8")
        self.level = 0

    def indent(self) -> None:
        self.gen.ignorableWhitespace("\n" + "  " * self.level)

    def open(self, tag: str, attrs: dict[str, str] | None = None) -> None:
        self.indent()
        self.gen.startElement(tag, attrs or {})
        self.level += 1

    def close(self, tag: str) -> None:
        self.level -= 1
        self.indent()
        self.gen.endElement(tag)

    def leaf(self, tag: str, text: str, attrs: dict[str, str] | None = None) -> None:
        self.indent()
        self.gen.startElement(tag, attrs or {})
        self.gen.characters(text)
        self.gen.endElement(tag)


def cvat_xml(images: Sequence[CvatImage], labels: Sequence[tuple[str, str, Sequence[str]]], project: bool = False,
             tracks: str = "") -> str:  # fmt: skip
    """``annotations.xml`` of a task (or, with ``project``, a project) with ``labels`` (name,
    type, names of its checkbox attributes) in ``<meta>``; ``tracks`` is appended as given."""
    out = io.StringIO()
    w = _Writer(out)
    w.gen.startDocument()
    w.gen.startElement("annotations", {})
    w.level += 1
    w.leaf("version", "1.1")
    w.open("meta")
    w.open("project" if project else "task")
    w.leaf("id", "1")
    w.leaf("name", "streets")
    if not project:
        w.leaf("size", str(len(images)))
        w.leaf("mode", "annotation")
        w.leaf("overlap", "0")
    w.open("labels")
    for name, kind, flags in labels:
        w.open("label")
        w.leaf("name", name)
        w.leaf("color", "#fa3253")
        w.leaf("type", kind)
        w.open("attributes")
        for flag in flags:
            w.open("attribute")
            w.leaf("name", flag)
            w.leaf("mutable", "False")
            w.leaf("input_type", "checkbox")
            w.leaf("default_value", "false")
            w.leaf("values", "false")
            w.close("attribute")
        w.close("attributes")
        w.close("label")
    w.open("label")  # a skeleton's point: a label with a parent, no class of its own
    w.leaf("name", "1")
    w.leaf("type", "points")
    w.open("attributes")
    w.close("attributes")
    w.leaf("parent", "pose")
    w.close("label")
    w.close("labels")
    w.open("owner")
    w.leaf("username", "admin")
    w.leaf("email", "")
    w.close("owner")
    w.close("project" if project else "task")
    w.leaf("dumped", "2025-05-12 10:41:07.519331+00:00")
    w.close("meta")
    for i, image in enumerate(images):
        attrs = {"id": str(i), "name": image.name}
        if project:
            attrs |= {"subset": image.subset or "default", "task_id": str(image.task_id)}
        w.open("image", attrs | {"width": str(image.width), "height": str(image.height)})
        for shape in image.shapes:
            data = {"label": shape.label, "source": "manual"}
            if shape.kind != "tag":
                data["occluded"] = str(shape.occluded)
            if shape.kind == "box":
                data |= {k: f"{v:.2f}" for k, v in zip(("xtl", "ytl", "xbr", "ybr"), shape.points, strict=True)}
            elif shape.kind == "mask":
                assert shape.mask is not None
                left, top = int(shape.points[0]), int(shape.points[1])
                height, width = shape.mask.shape
                data |= {"rle": _rle(shape.mask), "left": str(left), "top": str(top), "width": str(width), "height": str(height)}
            elif shape.kind != "tag":
                pairs = zip(shape.points[0::2], shape.points[1::2], strict=True)
                data["points"] = ";".join(f"{x:.2f},{y:.2f}" for x, y in pairs)
            if shape.kind != "tag":
                data["z_order"] = "0"
            w.open(shape.kind, data)
            for name, value in shape.attributes.items():
                w.leaf("attribute", value, {"name": name})
            w.close(shape.kind)
        w.close("image")
    if tracks:
        w.gen.ignorableWhitespace(tracks)
    w.level -= 1
    w.indent()
    w.gen.endElement("annotations")
    w.gen.endDocument()
    return out.getvalue()


def write_cvat(root: Path, images: Sequence[CvatImage], labels: Sequence[tuple[str, str, Sequence[str]]], project: bool = False) -> Path:
    """A CVAT export unzipped at ``root``: ``annotations.xml`` and the pictures under ``images/``
    (``images/<subset>/`` in a project export); returns the XML."""
    for i, image in enumerate(images):
        folder = root / "images" / (image.subset or "default" if project else "")
        picture(folder / image.name, image.width, image.height, i)
    xml = root / "annotations.xml"
    xml.write_text(cvat_xml(images, labels, project))
    return xml


# -- KITTI ------------------------------------------------------------------------------------------


@dataclass
class KittiObject:
    type: str
    box: tuple[float, float, float, float]  # left top right bottom, pixels
    truncated: float = 0.0
    occluded: int = 0


def kitti_line(obj: KittiObject, values: Any = None) -> str:
    """One line as the devkit's label files have it: type, truncated, occluded, alpha, the 2D box,
    the 3D box's dimensions (h w l), location (x y z) and rotation_y, two decimals each."""
    if obj.type == "DontCare":
        rest = "-1 -1 -10 {:.2f} {:.2f} {:.2f} {:.2f} -1 -1 -1 -1000 -1000 -1000 -10".format(*obj.box)
        return f"DontCare {rest}"
    return (
        f"{obj.type} {obj.truncated:.2f} {obj.occluded} -1.57 "
        + " ".join(f"{v:.2f}" for v in obj.box)
        + " 1.52 1.63 3.88 2.84 1.47 8.41 -1.56"
    )


def write_kitti(split: Path, images: Sequence[tuple[str, int, int, Sequence[KittiObject] | None]]) -> Path:
    """``split/image_2/<id>.png`` and ``split/label_2/<id>.txt`` (None: no label file); returns ``split``."""
    for i, (stem, width, height, objects) in enumerate(images):
        picture(split / "image_2" / f"{stem}.png", width, height, i)
        (split / "label_2").mkdir(parents=True, exist_ok=True)
        if objects is not None:
            (split / "label_2" / f"{stem}.txt").write_text("".join(kitti_line(o) + "\n" for o in objects))
    return split
