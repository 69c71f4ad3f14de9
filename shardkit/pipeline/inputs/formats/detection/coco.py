"""COCO JSON (``instances_*.json``, or any JSON with ``images``, ``annotations`` and
``categories``): one row per image with all of its annotations, streamed in bounded memory.

Boxes ``[x, y, w, h]`` become corners in pixels; ``category_id`` is the class id (the dataset's
own; 0-based ids are moved up by 1 when written, ``features.objects``; a negative one is refused);
``iscrowd``, ``area``, polygon or RLE ``segmentation`` and ``keypoints`` ride along. Every image
is a row. The split is told by the file name (``instances_val2017.json`` -> ``val``), or by its
folder's where the name tells none (Roboflow's ``valid/_annotations.coco.json`` -> ``valid``).
Images are found in the standard layout (``annotations/instances_val2017.json`` beside
``val2017/``), or datumaro's (``images/val2017/``), else beside the file. An export folder as an
input is its COCO files: Roboflow's ``<split>/_annotations.coco.json``, ``annotations/instances_*``.

A COCO file is one JSON document (train2017's is 450 MB: 2 to 3 GB for ``json.load``) whose
annotations are interleaved across its images. It is read in passes of ijson's C parser
(``streamed_json``): the categories (kept for the process), the images (stopping at their end),
then the annotations, each into a bucket by its image's position (a run of consecutive images a
bucket), spilled to a temporary file without a name, which nothing outlives; each bucket is then
grouped alone. Memory is one bucket and a map from image ids to positions, whatever the file's size.

A row has no line (0: a position in ``images`` is no line of the file; its key, the image's
name, is what messages name). An image whose annotations cannot
become its objects (a category that is no category, a bbox that is not one) is an entry error
named by that place (``images[11] (x.jpg)``: a position is no line of the file); an annotation
that names no image is one of its own. A file that is not valid JSON (cut short, say) stops the
build with its line and column, ``--on-error skip`` or not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import pickle
import re
import tempfile
from collections.abc import Generator, Iterator
from operator import itemgetter
from typing import IO, Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.detection import export_layouts, streamed_json
from shardkit.pipeline.inputs.formats.detection.annotations import DetectionFormat, detection_row
from shardkit.pipeline.inputs.formats.input_format import Piece, Row
from shardkit.storage import location

_SURROGATE = re.compile("[\ud800-\udfff]")
_KEYS = re.compile(rb'"(images|annotations|categories)"\s*:\s*\[')
_PEEK = 1 << 20
_NOT_COCO = "a COCO file"
_BUCKET_BYTES = 4 << 20  # of the file per bucket of images: about 25 MB of Python objects once loaded
_BUFFER_BYTES = 16 << 20  # annotations held before they are appended to their buckets' files
_IMAGES_CHUNK = 4096  # images pickled together
# What a bucket keeps of an annotation: (position of its image, its index in annotations, id,
# bbox, category_id, iscrowd, area, whether it has a segmentation, segmentation, keypoints).
Annotation = tuple[int, int, Any, Any, Any, Any, Any, bool, Any, Any]


@dataclasses.dataclass(frozen=True)
class Coco(DetectionFormat):
    def claims(self, path: str) -> bool:
        if not path.lower().endswith(".json"):
            return False
        try:
            head = location.read_bytes(path, 0, _PEEK)
        except (OSError, ValueError):
            return False
        # A top-level array of such objects is claimed too: its one line then says what it is.
        start = head[len(streamed_json.BOM) :] if head.startswith(streamed_json.BOM) else head
        return len({m.group(1) for m in _KEYS.finditer(head)}) >= 1 and start.lstrip()[:1] in (b"{", b"[")

    def claims_folder(self, root: str) -> bool:
        return bool(self.export_files(root))

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        return [(self.split_name(path), Piece(path)) for path in self.export_files(root)]

    def export_files(self, root: str) -> list[str]:
        return [path for path in export_layouts.coco_files(root) if self.claims(path)]

    def split_name(self, path: str) -> str:
        return export_layouts.split_name(path)

    def folder_of(self, path: str) -> str:
        return export_layouts.image_folder(path)

    def record_ids(self, path: str) -> Iterator[Any]:
        for image in streamed_json.leading_items(path, "images", _NOT_COCO, large=("annotations",)):
            if isinstance(image, dict) and type(image.get("id")) in (int, str):
                yield image["id"]

    def label_map(self, path: str) -> tuple[tuple[int, str], ...] | None:
        return tuple((i, name) for i, name, _ in _categories(path))

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        categories = {i: (name, points) for i, name, points in _categories(source)}
        # Files without a name (O_TMPFILE, or unlinked at once) in TMPDIR: closed when the caller
        # stops reading, and freed by the kernel when the process ends, by kill -9 too.
        with _writing(source):
            images, spilled = _nameless(), _nameless()
        with images, spilled:
            yield from _rows(source, categories, images, spilled)


def _nameless() -> IO[bytes]:
    return tempfile.TemporaryFile(prefix="shardkit-coco-")


def _rows(source: str, categories: dict[int, tuple[str, int]], images: IO[bytes], spilled: IO[bytes]) -> Iterator[Row | EntryError]:
    with _writing(source):
        positions, count = _spool_images(source, images)
        images.seek(0)
    # Runs of consecutive images, about _BUCKET_BYTES of the file each on average (a bound would
    # need one more pass, to count each image's annotations first).
    buckets = min(count, -(-(location.size(source) or 0) // _BUCKET_BYTES))
    per = max(1, -(-count // max(1, buckets)))  # images a bucket
    store = _Buckets(source, spilled, -(-count // per))
    annotations = yield from _bucket_annotations(source, positions, per, store)
    del positions
    if not annotations:
        streamed_json.check_array(source, "annotations", _NOT_COCO, required=False)  # test-dev's image info has none
    elif not categories:
        streamed_json.check_array(source, "categories", _NOT_COCO, required=True)
    points = max((p for _, p in categories.values()), default=0)
    spooled = _spooled_images(images)
    for bucket in range(store.count):
        anns: list[Annotation] = store.take(bucket)
        anns.sort(key=itemgetter(0))  # stable: an image's annotations stay in file order
        first = last = 0
        for position in range(bucket * per + 1, min(count, (bucket + 1) * per) + 1):
            image_id, name, size, problem = next(spooled)
            while last < len(anns) and anns[last][0] == position:
                last += 1
            found = problem or objects(size, anns[first:last], categories, points)
            first = last
            if isinstance(found, str):  # named by its place in images: a position is no line of the file
                yield EntryError(source, 0, f"images[{position - 1}]{f' ({name})' if type(name) is str and name else ''}: {found}")
            else:
                yield detection_row(source, 0, name, name, str(image_id), found, name)  # 0: no line of its own
        del anns  # before the next bucket is loaded, not after


def _bucket_annotations(source: str, positions: dict[Any, int], per: int, store: _Buckets) -> Generator[EntryError, None, int]:
    """Every annotation into the bucket of its image; an error for each that names no image.
    Returns how many annotations there are."""
    index = -1
    for index, ann in enumerate(streamed_json.items(source, "annotations")):
        if type(ann) is not dict:
            yield EntryError(source, 0, f"annotations[{index}]: expected an annotation (an object), got {_kind(ann)}")
            continue
        image_id = ann.get("image_id")
        try:
            position = positions.get(image_id)
        except TypeError:  # a list or an object: no image's id
            position = None
        if position is None:
            yield EntryError(source, 0, f"{_name(ann.get('id'), index)}: image_id {image_id!r} names no image")
            continue
        record = (position, index, ann.get("id"), ann.get("bbox"), ann.get("category_id"), ann.get("iscrowd", 0),
                  ann.get("area"), "segmentation" in ann, ann.get("segmentation"), ann.get("keypoints"))  # fmt: skip
        store.add((position - 1) // per, record)
    return index + 1


def _spool_images(source: str, f: IO[bytes]) -> tuple[dict[Any, int], int]:
    """Every image of ``source`` into ``f`` as (id, file_name, size, problem), in order, pickled
    in chunks; the position of each image id (1-based), and how many images there are."""
    positions: dict[Any, int] = {}
    chunk: list[tuple[Any, Any, Any, str | None]] = []
    position = 0
    for position, image in enumerate(streamed_json.leading_items(source, "images", _NOT_COCO, large=("annotations",)), start=1):
        image_id = name = size = problem = None
        if type(image) is not dict:
            problem = f"expected an image (an object), got {_kind(image)}"
        else:
            image_id, name = image.get("id"), image.get("file_name")
            if "width" in image and "height" in image:
                size = [image["width"], image["height"]]
            if image_id is None:
                problem = "the image has no id"
            elif type(image_id) not in (int, str):
                problem = f"image id {image_id!r} is not an integer or a string"
            elif type(name) is not str or not name:
                problem = f"image {image_id}: " + ("no file_name" if name is None else f"file_name {name!r} is not a file name")
            elif image_id in positions:
                problem = f"image id {image_id!r} repeats images[{positions[image_id] - 1}]'s"
            else:
                positions[image_id] = position
        chunk.append((image_id, name, size, problem))
        if len(chunk) == _IMAGES_CHUNK:
            pickle.dump(chunk, f, protocol=pickle.HIGHEST_PROTOCOL)
            chunk.clear()
    pickle.dump(chunk, f, protocol=pickle.HIGHEST_PROTOCOL)
    return positions, position


def _spooled_images(f: IO[bytes]) -> Iterator[tuple[Any, Any, Any, str | None]]:
    while True:
        try:
            yield from pickle.load(f)
        except EOFError:
            return


_NUMBER = (int, float)


def objects(size: Any, anns: list[Annotation], categories: dict[int, tuple[str, int]], points: int) -> dict[str, Any] | str:
    """One image's annotations as a row's ``objects`` value, or what is wrong with the first bad one."""
    boxes, labels = [], []
    for _, index, ann_id, bbox, category, iscrowd, area, _, _, keypoints in anns:
        try:
            known = category in categories
        except TypeError:  # a list or an object
            known = False
        if not known:
            return f"{_name(ann_id, index)}: category_id {category!r} is no category"
        if type(bbox) is not list or len(bbox) != 4:
            return f"{_name(ann_id, index)}: " + ("no bbox" if bbox is None else f"bbox {bbox!r} is not [x, y, width, height]")
        x, y, w, h = bbox
        if type(x) not in _NUMBER or type(y) not in _NUMBER or type(w) not in _NUMBER or type(h) not in _NUMBER:
            return f"{_name(ann_id, index)}: bbox {bbox!r} is not [x, y, width, height]"
        if w < 0 or h < 0:
            return f"{_name(ann_id, index)}: bbox {bbox!r} has a negative width or height"
        if type(iscrowd) not in _NUMBER and type(iscrowd) is not bool:
            return f"{_name(ann_id, index)}: iscrowd {iscrowd!r} is not a number"
        if area is not None and type(area) not in _NUMBER:
            return f"{_name(ann_id, index)}: area {area!r} is not a number"
        if points and keypoints is not None and type(keypoints) is not list:
            return f"{_name(ann_id, index)}: keypoints {keypoints!r} is not a list"
        boxes.append([x, y, x + w, y + h])  # x + w as json.load's numbers give it: Model Garden's sum too
        labels.append(int(category))
    out: dict[str, Any] = {
        "size": size,
        "bbox": boxes,
        "label": labels,
        "text": [categories[label][0] for label in labels],
        "ref": [_name(a[2], a[1]) for a in anns],
        "is_crowd": [int(a[5]) for a in anns],
        "area": [None if a[6] is None else float(a[6]) for a in anns],  # none: the mask's or the box's, as augmented copies get
    }
    if any(a[7] for a in anns):
        out["segmentation"] = [a[8] for a in anns]
    if points:  # also for an image without objects: every record of the set has the keypoint keys
        out["keypoints"] = [_padded(a[9] or [], points) for a in anns]
        out["points"] = points
    return out


def _padded(keypoints: list[float], points: int) -> list[float]:
    """An object's keypoints as ``points`` (x, y, v) triples: a class with fewer has invisible ones."""
    return list(keypoints[: points * 3]) + [0.0] * (points * 3 - min(len(keypoints), points * 3))


def _name(ann_id: Any, index: int) -> str:
    """What a message calls an annotation: by its id, or by its place where it has none."""
    return f"annotation {ann_id}" if type(ann_id) in (int, str) else f"annotations[{index}]"


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


# -- the categories, read once a process -------------------------------------------------------


def _categories(path: str) -> tuple[tuple[int, str, int], ...]:
    """(id, name, number of keypoints) of each category, by id; read again only if the file changed."""
    if location.is_url(path):
        return _read_categories(path)
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _cached_categories(os.path.abspath(path), path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _cached_categories(key: str, path: str, size: int, mtime: int) -> tuple[tuple[int, str, int], ...]:
    return _read_categories(path)


def _read_categories(path: str) -> tuple[tuple[int, str, int], ...]:
    found: dict[int, tuple[str, int, int]] = {}
    # Real files end with their categories: read from the tail, not by a pass over 400 MB of annotations.
    trailing = streamed_json.trailing_array(path, "categories")
    for index, category in enumerate(trailing if trailing is not None else streamed_json.items(path, "categories")):
        i = category.get("id") if isinstance(category, dict) else None
        if type(i) is not int or "name" not in category:
            raise ShardkitError(f"{path}: categories[{index}]: expected an object with an integer id and a name")
        if i in found:
            raise ShardkitError(f"{path}: categories[{index}]: id {i} repeats categories[{found[i][2]}]'s")
        if i < 0:  # 0 is moved up by 1 with every other id (features.objects); below it, no rule says where
            raise ShardkitError(f"{path}: categories[{index}] ({category['name']!r}): id {i} is negative: give it an id of 0 or more")
        if _SURROGATE.search(str(category["name"])):
            raise ShardkitError(f"{path}: categories[{index}]: name {category['name']!r} is not Unicode text (a lone surrogate escape)")
        keypoints = category.get("keypoints")
        found[i] = (str(category["name"]), len(keypoints) if isinstance(keypoints, list) else 0, index)
    return tuple((i, name, points) for i, (name, points, _) in sorted(found.items()))


# -- annotations grouped by image, on disk ------------------------------------------------------


class _Buckets:
    """Records in ``count`` buckets (a run of consecutive images each), held in memory up to
    ``_BUFFER_BYTES`` in all, then appended to one file, a run of bytes a bucket each spill; a
    bucket is read back once, from its runs."""

    def __init__(self, source: str, spilled: IO[bytes], count: int) -> None:
        self.source = source
        self.count = count
        self._file = spilled
        self._runs: list[list[tuple[int, int]]] = [[] for _ in range(count)]  # (offset, length) in the file
        self._buffers = [bytearray() for _ in range(count)]
        self._buffered = 0

    def add(self, bucket: int, record: Annotation) -> None:
        data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        self._buffers[bucket] += data
        self._buffered += len(data)
        if self._buffered > _BUFFER_BYTES:
            self._spill()

    def _spill(self) -> None:
        with _writing(self.source):
            self._file.seek(0, os.SEEK_END)
            for bucket, buffer in enumerate(self._buffers):
                if buffer:
                    self._runs[bucket].append((self._file.tell(), len(buffer)))
                    self._file.write(buffer)
                    buffer.clear()
        self._buffered = 0

    def take(self, bucket: int) -> list[Any]:
        """Bucket ``bucket``'s records in the order they were added."""
        records: list[Any] = []
        for offset, length in self._runs[bucket]:
            self._file.seek(offset)
            _load_all(io.BytesIO(self._file.read(length)), records)
        self._runs[bucket] = []
        _load_all(io.BytesIO(self._buffers[bucket]), records)  # the last ones, never spilled
        self._buffers[bucket] = bytearray()
        return records


def _load_all(stream: IO[bytes], records: list[Any]) -> None:
    # An unpickler a record: each was pickled alone, its memo counted from 0, and one unpickler kept
    # across records makes a value met twice in one annotation fetch another record's object.
    while True:
        try:
            records.append(pickle.load(stream))
        except EOFError:
            return


@contextlib.contextmanager
def _writing(source: str) -> Iterator[None]:
    """A failed write of the temporary files (a full disk) -> one line saying where and how to move them."""
    try:
        yield
    except OSError as exc:
        raise ShardkitError(
            f"{source}: cannot write its annotations grouped by image under {tempfile.gettempdir()}: {exc.strerror or exc} "
            "(TMPDIR sets where: a disk with room for about the file's size)"
        ) from None


COCO = Coco("coco")
