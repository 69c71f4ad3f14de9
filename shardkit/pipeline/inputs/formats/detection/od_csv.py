"""The TF Object Detection API tutorial's CSV (what its ``xml_to_csv.py`` writes from LabelImg's
XML, and its ``generate_tfrecord.py`` reads): the header ``filename,width,height,class,xmin,
ymin,xmax,ymax``, then one line per object, corners in pixels.

Told by that header among other ``.csv`` files (it is taken ahead of the generic ``.csv`` index
format: ``claims_ahead``), from the first line alone, and only in local files: peeking into a
bucket costs a request per file. The lines are grouped by ``filename`` into one row per image,
in the order the images first appear, numbered by that first line: the whole file is read into
memory first, since an image's lines need not be next to each other (annotation tools write
them per image, so such files stay small). An image with no object has no line, so no record.
Images resolve against the CSV's folder (``--image-root`` names another); ``width`` and
``height`` are the annotation's size, checked against the image. Classes are names: the label
map is the sorted names found, unless the config's ``classes`` fixes it.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Iterator
from typing import IO, Any, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row, finite_number
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.pipeline.inputs.formats.text_lines import TextFormat
from shardkit.storage import location

HEADER = ("filename", "width", "height", "class", "xmin", "ymin", "xmax", "ymax")
_CORNERS = HEADER[4:]


@dataclasses.dataclass
class _Image:
    """One image's lines, gathered: where it first appeared, its size, its objects."""

    line: int
    size: tuple[int, int]
    boxes: list[list[float]] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)
    error: EntryError | None = None  # its first bad line: the image is then no row


@dataclasses.dataclass(frozen=True)
class OdCsv(DetectionFormat, TextFormat):
    claims_ahead: ClassVar[tuple[str, ...]] = (".csv",)

    def claims(self, path: str) -> bool:
        if os.path.splitext(path)[1].lower() not in self.claims_ahead or location.is_url(path):
            return False
        try:
            with open(path, "rb") as f:
                first = f.readline(1024)
        except OSError:
            return False  # no such file (a pattern, a folder): not this format's
        words = first.decode("utf-8-sig", errors="replace").strip().split(",")
        return tuple(w.strip() for w in words) == HEADER

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        source = piece.path
        images: dict[str, _Image] = {}
        reader = csv.reader(lines)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != HEADER:
            raise ShardkitError(f"{source}: expected the header {','.join(HEADER)}")
        for values in reader:
            number = reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            _gather(images, source, number, [v.strip() for v in values])
        for filename, image in images.items():
            if image.error is not None:
                yield image.error
                continue
            found: dict[str, Any] = {"size": list(image.size), "bbox": image.boxes, "text": image.names}
            stem = os.path.splitext(os.path.basename(filename))[0]
            yield detection_row(source, image.line, filename, filename, stem, found, filename)


def _gather(images: dict[str, _Image], source: str, number: int, values: list[str]) -> None:
    """Line ``number`` into its image's entry in ``images``; a bad line makes the image an error."""
    filename = values[0] if values else ""
    image = images.get(filename)
    try:
        if len(values) != len(HEADER):
            raise EntryError(source, number, f"{len(values)} columns, but the header has {len(HEADER)}")
        if not filename:
            raise EntryError(source, number, "filename is empty")
        size = (_size(values[1], "width", source, number), _size(values[2], "height", source, number))
        if image is None:
            image = images[filename] = _Image(number, size)
        elif size != image.size:
            was = f"{image.size[0]}x{image.size[1]}"
            raise EntryError(source, number, f"{filename}: width x height {size[0]}x{size[1]}, but {was} on line {image.line}")
        if not values[3]:
            raise EntryError(source, number, "class is empty")
        box = [finite_number(v, source, number, name) for v, name in zip(values[4:], _CORNERS, strict=True)]
    except EntryError as exc:
        if image is None:
            images[filename] = _Image(number, (0, 0), error=exc)
        elif image.error is None:
            image.error = exc
        return
    image.boxes.append(box)
    image.names.append(values[3])


def _size(text: str, name: str, source: str, number: int) -> int:
    value = finite_number(text, source, number, name)
    if not value.is_integer() or value <= 0:
        raise EntryError(source, number, f"{name} {text!r} is not a positive whole number of pixels")
    return int(value)


OD_CSV = OdCsv("od-csv")
