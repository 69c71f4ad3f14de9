"""A built record's objects as the read, check and view sides take them (``features.objects``
writes them): one record's lists checked (``verify --deep``), as NumPy arrays (``ShardReader``),
drawn over their picture (preview), summed up from the manifest (``inspect``), and described to
TensorFlow Datasets.

Every function takes the feature's key ``P`` and reads the lists under ``P/``: a list a record
lacks is taken as empty, as TensorFlow's ``RaggedFeature`` reads it (builds before keypoint keys
were written into every record of a set with keypoints left them out where there were no objects).
"""

from __future__ import annotations

import textwrap
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from shardkit.features.base import TFDS, Labels
from shardkit.features.drawn import ObjectLists, Overlay
from shardkit.formats import image_codec
from shardkit.formats.image_headers import ImageProblem
from shardkit.units import plural

CORNERS = ("bbox/xmin", "bbox/ymin", "bbox/xmax", "bbox/ymax")  # as stored, and as previews place boxes
YX_CORNERS = ("bbox/ymin", "bbox/xmin", "bbox/ymax", "bbox/xmax")  # the order TensorFlow's detection APIs take boxes in
LABEL, TEXT, CROWD, MASK = "class/label", "class/text", "is_crowd", "mask"
KEYPOINTS = ("keypoint/x", "keypoint/y", "keypoint/visibility")  # K per object, object after object
# The lists that hold no position in the picture (``area`` counts the original's pixels, as
# ``image/height`` and ``image/width`` do): what resizing a record's picture leaves as it is.
UNPLACED = (LABEL, TEXT, CROWD, "area", "difficult", "truncated", "occluded", "truncation", KEYPOINTS[2])
BOXES, CLASSES = "boxes", "classes"  # what the readers build beside the stored lists, under P/
DROPPED = "dropped"  # P/dropped in the manifest's label counts
LEFT_OUT = "left_out"  # P/left_out: what the input's reader left out (KITTI DontCare, CVAT polylines)

Record = Mapping[str, tuple[str, Sequence[Any]]]  # key -> (Example list type, values), as decode_example gives them


def lists(prefix: str, features: Record) -> dict[str, Sequence[Any]]:
    """The record's lists under ``prefix/``, by their name below it (``bbox/xmin``, ...)."""
    start = prefix + "/"
    return {key[len(start) :]: values for key, (_, values) in features.items() if key.startswith(start)}


def class_ids(config: Mapping[str, Any]) -> tuple[int, ...]:
    """Each class's id, in the class list's order: the input's own (COCO), else 1, 2, ..."""
    names = config.get("classes") or []
    return tuple(config.get("class_ids") or range(1, len(names) + 1))


def object_lists(prefix: str, config: Mapping[str, Any]) -> ObjectLists:
    return ObjectLists(
        key=prefix,
        boxes=f"{prefix}/{BOXES}",
        classes=f"{prefix}/{CLASSES}",
        corners=(f"{prefix}/{YX_CORNERS[0]}", f"{prefix}/{YX_CORNERS[1]}", f"{prefix}/{YX_CORNERS[2]}", f"{prefix}/{YX_CORNERS[3]}"),
        label=f"{prefix}/{LABEL}",
        class_ids=class_ids(config),
        masks=f"{prefix}/{MASK}" if config.get("masks") else None,
        points=(f"{prefix}/{KEYPOINTS[0]}", f"{prefix}/{KEYPOINTS[1]}"),
        unplaced=tuple(f"{prefix}/{sub}" for sub in UNPLACED),
    )


# -- verify --deep -----------------------------------------------------------------------------


def problem(prefix: str, features: Record, size: tuple[int, int] | None) -> str | None:
    """What is wrong with one record's objects, in one line, or None: every per-object list as
    long as the boxes (keypoints a multiple), boxes within [0, 1] with a width and a height,
    masks the image's size with values 0 and 1."""
    found = lists(prefix, features)
    n = len(found.get(CORNERS[0], ()))
    where = f"objects {prefix!r}"
    for name in sorted(found):
        if name not in KEYPOINTS and len(found[name]) != n:
            return f"{where}: {plural(n, 'box', 'boxes')} but {len(found[name])} {name} values"
    counts = [len(found.get(name, ())) for name in KEYPOINTS]
    if len(set(counts)) > 1:
        return f"{where}: keypoint lists differ in length (x {counts[0]}, y {counts[1]}, visibility {counts[2]})"
    if counts[0] and (not n or counts[0] % n):
        return f"{where}: {counts[0]} keypoints do not share out over {plural(n, 'object')}"
    boxes = np.array([found.get(name, ()) for name in CORNERS], dtype=np.float64).T.reshape(n, 4)
    for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        shown = f"object {i + 1}'s box [{x0:.4g}, {y0:.4g}, {x1:.4g}, {y1:.4g}] (xmin, ymin, xmax, ymax)"
        if not all(0.0 <= v <= 1.0 for v in (x0, y0, x1, y1)):  # NaN fails too
            return f"{where}: {shown} is not within [0, 1]"
        if not (x0 < x1 and y0 < y1):
            return f"{where}: {shown} has no {'width' if x0 >= x1 else 'height'} (xmin < xmax and ymin < ymax)"
    for i, data in enumerate(found.get(MASK, ())):
        try:
            mask = image_codec.decode(bytes(data), "L", class_values=True)
        except ImageProblem as exc:
            return f"{where}: object {i + 1}'s mask: {exc}"
        if size is not None and (mask.shape[1], mask.shape[0]) != size:
            return f"{where}: object {i + 1}'s mask is {mask.shape[1]}x{mask.shape[0]}, its image {size[0]}x{size[1]}"
        if mask.size and int(mask.max()) > 1:
            return f"{where}: object {i + 1}'s mask has values other than 0 and 1 (up to {int(mask.max())})"
    return None


# -- ShardReader -------------------------------------------------------------------------------


def add_arrays(prefix: str, config: Mapping[str, Any], record: dict[str, Any], decode_images: bool, size: tuple[int, int] | None) -> None:
    """``P/boxes`` (N, 4) float32 (ymin, xmin, ymax, xmax) and ``P/classes`` (N,) int64 (places in
    the class list) beside the stored lists; with ``decode_images`` the masks as (N, H, W) uint8."""
    columns = [np.asarray(record.get(f"{prefix}/{name}", ()), dtype=np.float32).reshape(-1) for name in YX_CORNERS]
    n = min(len(c) for c in columns)
    record[f"{prefix}/{BOXES}"] = np.stack([c[:n] for c in columns], axis=1) if n else np.zeros((0, 4), np.float32)
    place = {class_id: i for i, class_id in enumerate(class_ids(config))}
    labels = np.asarray(record.get(f"{prefix}/{LABEL}", ()), dtype=np.int64).reshape(-1)
    record[f"{prefix}/{CLASSES}"] = np.array([place.get(int(v), -1) for v in labels], dtype=np.int64)
    mask_key = f"{prefix}/{MASK}"
    if decode_images and mask_key in record:
        masks = [image_codec.decode(bytes(data), "L", class_values=True) for data in record[mask_key]]
        height, width = size if size is not None else (0, 0)
        record[mask_key] = np.stack(masks) if masks else np.zeros((0, height, width), np.uint8)


# -- preview -----------------------------------------------------------------------------------


def overlay(prefix: str, features: Record, classes: Sequence[str] | None, shown: tuple[int, int]) -> Overlay:
    """The record's objects to draw on a picture shown at ``shown`` (width, height): boxes with
    their class names (crowds marked), coloured by their class's place in ``classes``, masks
    shrunk to the shown size, keypoints. Damaged lists are drawn as far as they go: ``verify
    --deep`` names what is wrong with them."""
    found = lists(prefix, features)
    columns = [np.asarray(found.get(name, ()), dtype=np.float64) for name in CORNERS]
    text = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in found.get(TEXT, ())]
    n = min(len(c) for c in columns)
    boxes = np.stack([c[:n] for c in columns], axis=1) if n else np.zeros((0, 4))
    names = tuple(text[i] if i < len(text) else "?" for i in range(n))
    places = {name: i + 1 for i, name in enumerate(classes or ())}
    # A name the class list lacks (a file with no manifest) gets a colour from its own bytes: the same on every tile.
    colours = tuple(places.get(name) or len(places) + 1 + zlib.crc32(name.encode()) % 19 for name in names)
    crowd = list(found.get(CROWD, ()))
    crowds = tuple(bool(crowd[i]) if i < len(crowd) else False for i in range(n))
    return Overlay(boxes, names, colours, crowds, _masks(found.get(MASK), n, shown), _keypoints(found, n))


def found_in(features: Record) -> list[str]:
    """The keys ``P`` of the objects in a record another tool wrote: where ``P/bbox/xmin`` is."""
    tail = "/" + CORNERS[0]
    return sorted(key[: -len(tail)] for key in features if key.endswith(tail))


def _masks(pngs: Sequence[Any] | None, n: int, shown: tuple[int, int]) -> np.ndarray | None:
    if not pngs or len(pngs) != n:
        return None
    out = np.zeros((n, shown[1], shown[0]), np.uint8)
    for i, data in enumerate(pngs):
        try:
            mask = image_codec.decode(bytes(data), "L", class_values=True)
        except ImageProblem:
            continue  # drawn without it
        picture = Image.fromarray((mask > 0).astype(np.uint8))
        out[i] = np.asarray(picture if picture.size == shown else picture.resize(shown, Image.Resampling.NEAREST))
    return out


def _keypoints(found: Mapping[str, Sequence[Any]], n: int) -> np.ndarray | None:
    x, y, visibility = (np.asarray(found.get(name, ()), dtype=np.float64) for name in KEYPOINTS)
    if not n or not len(x) or len(x) % n or not len(x) == len(y) == len(visibility):
        return None
    return np.stack([x, y, visibility], axis=1).reshape(n, len(x) // n, 3)


# -- inspect -----------------------------------------------------------------------------------


def summary(
    prefix: str, entries: Sequence[Mapping[str, Any]], splits: Mapping[str, tuple[int, Labels]], names: Sequence[str]
) -> dict[str, Any]:
    """Objects per record (fewest and most from the schema's list lengths, the mean from the
    label counts), objects per class (every class of the list ``names``, in its order, then any
    other) and dropped objects per class, per split and in all."""
    boxes = next((e for e in entries if e.get("field") == CORNERS[0]), {})
    shape = boxes.get("shape")
    lo, hi = (boxes.get("min_length", 0), boxes.get("max_length", 0)) if shape is None else (shape[0] if shape else 1,) * 2
    classes: dict[str, int] = dict.fromkeys(names, 0)
    dropped: dict[str, int] = {}
    left_out: dict[str, int] = {}
    per_split = {}
    for split, (records, labels) in splits.items():
        kept, gone = dict(labels.get(prefix, {})), dict(labels.get(f"{prefix}/{DROPPED}", {}))
        objects = sum(kept.values())
        mean = round(objects / records, 3) if records else 0.0
        per_split[split] = {"records": records, "objects": objects, "mean": mean, "classes": kept, "dropped": gone}
        for counts, total in ((kept, classes), (gone, dropped), (labels.get(f"{prefix}/{LEFT_OUT}", {}), left_out)):
            for value, count in counts.items():
                total[value] = total.get(value, 0) + count
    return {"key": prefix, "per_record": {"min": lo, "max": hi}, "splits": per_split, "classes": classes, "dropped": dropped,
            "left_out": left_out}  # fmt: skip


def summary_lines(info: Mapping[str, Any]) -> list[str]:
    per_record, splits = info["per_record"], info["splits"]
    means = ", ".join(f"{s['mean']:.2f} in {name}" for name, s in splits.items() if s["records"])
    head = f"objects of {info['key']}: {per_record['min']} to {per_record['max']} per record"
    lines = [head + (f", mean {means}" if means else "")]
    if info["classes"]:
        lines += _wrapped("per class: ", ", ".join(f"{name} {count}" for name, count in info["classes"].items()))
    if info["dropped"]:
        gone = ", ".join(f"{name} {count}" for name, count in sorted(info["dropped"].items(), key=lambda kv: -kv[1]))
        lines += _wrapped("dropped (left with no area inside their image): ", gone)
    if info.get("left_out"):
        left = ", ".join(f"{what} {count}" for what, count in sorted(info["left_out"].items(), key=lambda kv: -kv[1]))
        lines += _wrapped("left out by the input's reader (no objects to train on): ", left)
    return lines


def _wrapped(head: str, text: str) -> list[str]:
    return textwrap.wrap(head + text, width=78, initial_indent="  ", subsequent_indent="    ")


# -- TensorFlow Datasets -----------------------------------------------------------------------

_TFDS_DTYPES = {"float": "float32", "int64": "int64"}


def tfds_sequence(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The objects as a TFDS ``Sequence`` of nested dicts (``bbox`` -> ``xmin``, ..., ``class`` ->
    ``label``, ``text``, ``is_crowd``, ``area``, ``mask``, ``keypoint`` -> ``x``, ...): TFDS reads a
    Sequence of a dict from one list per nested key (``P/bbox/xmin``), the OD API's layout exactly.

    Keypoints need their number per object up front: every object of a set has the same number
    (``features.annotations``), so the longest keypoint list is that number times the most objects
    a record has; where that does not divide evenly they are left out."""
    lengths = {e.get("field"): e.get("max_length", 0) for e in entries}
    most, points = lengths.get(CORNERS[0]) or 0, lengths.get(KEYPOINTS[0]) or 0
    per_object = points // most if most and points % most == 0 else None
    tree: dict[str, Any] = {}
    for entry in entries:
        field = entry.get("field", "")
        if not field or (field in KEYPOINTS and not per_object):
            continue
        if field == MASK:
            leaf: dict[str, Any] = {
                "pythonClassName": TFDS + "image_feature.Image",
                "image": {"shape": {"dimensions": ["-1", "-1", "1"]}, "dtype": "uint8", "encodingFormat": "png"},
            }
        elif entry["dtype"] == "bytes":
            leaf = {"pythonClassName": TFDS + "text_feature.Text", "text": {}}
        elif field in KEYPOINTS:  # K per object
            tensor = {"shape": {"dimensions": [str(per_object)]}, "dtype": _TFDS_DTYPES[entry["dtype"]], "encoding": "none"}
            leaf = {"pythonClassName": TFDS + "tensor_feature.Tensor", "tensor": tensor}
        else:
            tensor = {"shape": {}, "dtype": _TFDS_DTYPES[entry["dtype"]], "encoding": "none"}
            leaf = {"pythonClassName": TFDS + "scalar.Scalar", "tensor": tensor}
        *parents, name = field.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[name] = leaf
    if not tree:
        return None
    return {"pythonClassName": TFDS + "sequence_feature.Sequence", "sequence": {"feature": _features_dict(tree), "length": "-1"}}


def _features_dict(tree: Mapping[str, Any]) -> dict[str, Any]:
    features = {name: node if "pythonClassName" in node else _features_dict(node) for name, node in tree.items()}
    return {"pythonClassName": TFDS + "features_dict.FeaturesDict", "featuresDict": {"features": features}}
