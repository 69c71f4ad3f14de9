"""``objects``: an image's annotated objects (boxes with their classes, and where the input has
them instance masks and keypoints), written under the keys TensorFlow's detection models read
(the TF Object Detection API, Model Garden's ``TfExampleDecoder``).

With the feature's key ``P`` (``image/object`` in the shipped configs) a record carries, one value
per kept object in each list:

- ``P/bbox/xmin``, ``ymin``, ``xmax``, ``ymax``: float, normalized to [0, 1] by the image's own
  size, clipped to it;
- ``P/class/label`` (int64: the dataset's own id, or 1, 2, ... in label-map order) and
  ``P/class/text`` (the class name);
- ``P/is_crowd`` (int64) and ``P/area`` (float, pixels: the input's own area when the pixels are
  the input's, else the mask's or the box's);
- ``P/difficult`` and ``P/truncated`` (int64, 0 or 1) where the input has them (Pascal VOC, CVAT
  checkbox attributes of those names), ``P/occluded`` (int64: CVAT's 0 or 1, KITTI's occlusion state
  0 to 3) and ``P/truncation`` (float: KITTI's fraction of the object outside the image, 0 to 1;
  a float of its own, so that ``P/truncated`` keeps one type in every build);
- ``P/mask`` with ``masks: true``: one PNG per object, the image's size, values 0 and 1;
- ``P/keypoint/x``, ``y`` (float, normalized) and ``P/keypoint/visibility`` (int64) where the
  objects have keypoints: the same number for every object of a record.

An input format gives a row's objects as one mapping of per-object lists
(``features.annotations.Objects.from_raw`` says which). A box that pokes past its image is kept, clipped; one that is left with no width or
height (zero-size, or wholly outside the image) is dropped and counted in the manifest (under
``P/dropped``), never silently. The manifest counts the kept objects of each class under ``P``,
and what an input's reader left out as no object to train on (KITTI's ``DontCare`` regions, CVAT's
polylines, points and tags) under ``P/left_out``, by what it is.

Augmentation moves the boxes, masks and keypoints with the image (``pipeline.shard.augment``); an
object whose box it drops (cut off by a crop, or by ``augment.boxes``) is dropped and counted alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from shardkit.errors import ConfigError, ShardkitError
from shardkit.features import object_records
from shardkit.features.annotations import ATTRIBUTES, ObjectArrays, Objects, on_image, resized
from shardkit.features.base import BadValue, Encoder, FeatureKind, Features, FeatureSpec, Labels, Loaded, RecordStats
from shardkit.features.drawn import ObjectLists, Overlay
from shardkit.formats import image_codec, label_map
from shardkit.formats.image_headers import ImageProblem
from shardkit.units import plural

# The record's keys under P, in the order the schema lists them.
FIELDS = (
    ("bbox/xmin", "float"),
    ("bbox/ymin", "float"),
    ("bbox/xmax", "float"),
    ("bbox/ymax", "float"),
    ("class/label", "int64"),
    ("class/text", "bytes"),
    ("is_crowd", "int64"),
    ("area", "float"),
    ("difficult", "int64"),
    ("truncated", "int64"),
    ("occluded", "int64"),
    ("truncation", "float"),
    ("mask", "bytes"),
    ("keypoint/x", "float"),
    ("keypoint/y", "float"),
    ("keypoint/visibility", "int64"),
)
DROPPED = "dropped"  # P/dropped in the manifest's counts: objects left with no area, by class
LEFT_OUT = "left_out"  # P/left_out: what the input's reader left out (KITTI DontCare, CVAT polylines), by what it is


class ObjectsKind(FeatureKind):
    """``objects``: boxes, classes, masks and keypoints of detection and instance segmentation."""

    name: ClassVar[str] = "objects"
    wire: ClassVar[str] = "float"
    schema_dtype: ClassVar[str] = "float"
    has_classes: ClassVar[bool] = True
    counts_labels: ClassVar[bool] = True
    counts_objects: ClassVar[bool] = True  # counts objects per class, not records per value, however many classes
    augment_target: ClassVar[str | None] = "objects"  # boxes, instance masks and keypoints, moved with the image

    def classes(self, value: object, path: str, source: str | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(c, str) and c for c in value):
            raise ConfigError(f"{path}.classes", "expected a list of class names (ids 1, 2, ... in this order)", source)
        if len(set(value)) != len(value):
            raise ConfigError(f"{path}.classes", "class names repeat", source)
        return tuple(value)

    def masks(self, value: object, path: str, source: str | None) -> bool | None:
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{path}.masks", f"expected true or false, got {value!r}", source)
        return value

    def check_config(self, spec: FeatureSpec, features: tuple[FeatureSpec, ...], source: str | None) -> None:
        if not any(f.kind.leads for f in features):
            raise ConfigError("features", "an objects feature needs an image feature to belong to", source)
        if sum(1 for f in features if f.kind == self) > 1:
            raise ConfigError(f"features.{spec.key}", "a record has one objects feature", source)
        keys = {f.key for f in features}
        for sub, _ in FIELDS:
            if f"{spec.key}/{sub}" in keys:
                raise ConfigError(f"features.{spec.key}/{sub}", f"clashes with the objects written under {spec.key!r}", source)

    def with_label_map(self, spec: FeatureSpec, pairs: tuple[tuple[int, str], ...], source: str | None) -> FeatureSpec:
        names, ids = tuple(name for _, name in pairs), tuple(i for i, _ in pairs)
        if ids and min(ids) < 0:
            raise ShardkitError(f"class {names[ids.index(min(ids))]!r} has id {min(ids)}: the TF OD API takes ids from 1")
        # Id 0 is the TF OD API's background (its label_map_util refuses a map with a class there):
        # 0-based ids (COCO files from Roboflow, globox) are all moved up by 1, the input's kept beside.
        input_ids = ids if 0 in ids else None
        ids = tuple(i + 1 for i in ids) if input_ids is not None else ids
        if spec.classes is not None and (spec.classes, spec.class_ids, spec.input_ids) == (names, ids, input_ids):
            return spec
        if spec.classes is not None:
            raise ConfigError(
                f"features.{spec.key}.classes",
                "the inputs' own label map (COCO categories, YOLO names) fixes the classes: remove it",
                source,
            )
        return dataclasses.replace(spec, classes=names, class_ids=ids, input_ids=input_ids)

    # -- a raw value from an input row ----------------------------------------------------------

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        objects = Objects.from_raw(raw)
        if objects.label is not None and spec.class_ids is not None:
            known = set(spec.input_ids or spec.class_ids)
            for i, label in enumerate(objects.label.tolist()):
                if label not in known:
                    raise BadValue(f"{objects.ref(i)}: class id {label} is not in the label map")
            if spec.input_ids is not None:  # the input's ids as written: 0 -> 1, 1 -> 2, ...
                written = dict(zip(spec.input_ids, spec.class_ids, strict=True))
                labels = np.array([written[label] for label in objects.label.tolist()], dtype=np.int64)
                objects = dataclasses.replace(objects, label=labels)
        elif spec.classes is not None:
            known_names = set(spec.classes)
            for i, name in enumerate(objects.text):
                if name not in known_names:
                    raise BadValue(
                        f"{objects.ref(i)}: unknown class {name!r} (the label map has {plural(len(spec.classes), 'class', 'classes')})"
                    )
        return objects

    def trims_plan(self, spec: FeatureSpec) -> bool:
        return not spec.masks  # without masks, segmentations (most of a COCO file) are never read again

    def plan_value(self, spec: FeatureSpec, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "segmentation" in raw:
            return {name: value for name, value in raw.items() if name != "segmentation"}
        return raw

    def class_names(self, value: Any) -> Iterable[str]:
        return value.text  # type: ignore[no-any-return]

    def initial_lengths(self, spec: FeatureSpec) -> dict[str, tuple[int, int]]:
        return {}

    def augment_input(self, spec: FeatureSpec, value: Any, loaded: Loaded) -> ObjectArrays:
        """The objects on the leading picture as the augmenter gets it: with the pipeline's
        leading downscale, scaled (masks shrunk as masks are) from the ones on the whole image."""
        whole = _on_lead(spec, value, loaded)
        lead = loaded.lead or ""

        def make() -> ObjectArrays:
            info, _ = loaded.stored(lead)
            height, width = loaded.pre_augment(lead).shape[:2]
            if (width, height) == (info.width, info.height):
                return whole
            return resized(whole, (info.width, info.height), (width, height), loaded.pre_augment_mask)

        return loaded.once(f"{spec.key} pre_augment", make)

    # -- records ---------------------------------------------------------------------------------

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        prefix, want_masks = spec.key, bool(spec.masks)
        names = spec.classes or ()
        ids = {name: (spec.class_ids[i] if spec.class_ids else i + 1) for i, name in enumerate(names)}
        dropped_key, left_key = f"{prefix}/{DROPPED}", f"{prefix}/{LEFT_OUT}"

        def encode(value: Any, loaded: Loaded, augmented: dict[str, Any] | None, out: Features, labels: list[Any]) -> None:
            objects: Objects = value
            if augmented is None:
                info, _ = loaded.stored(loaded.lead or "")
                width, height = info.width, info.height
                arrays = _on_lead(spec, objects, loaded)
            else:
                height, width = augmented[loaded.lead or ""].shape[:2]
                arrays = augmented[prefix]
            keep = arrays.keep
            boxes = arrays.boxes
            scale = np.array([width, height, width, height], dtype=np.float64)
            normal = boxes / scale
            values: list[tuple[str, str, Any]] = [
                ("bbox/xmin", "float", normal[:, 0]),
                ("bbox/ymin", "float", normal[:, 1]),
                ("bbox/xmax", "float", normal[:, 2]),
                ("bbox/ymax", "float", normal[:, 3]),
            ]
            text = [objects.text[i] for i in keep.tolist()]
            label = objects.label[keep] if objects.label is not None else np.array([ids[t] for t in text], dtype=np.int64)
            values.append(("class/label", "int64", label))
            values.append(("class/text", "bytes", [t.encode("utf-8") for t in text]))
            crowd = objects.is_crowd[keep] if objects.is_crowd is not None else np.zeros(len(keep), dtype=np.int64)
            values.append(("is_crowd", "int64", crowd))
            if arrays.masks is not None:
                area = arrays.masks.sum(axis=(1, 2)).astype(np.float64)  # (0, H, W) for no objects: no reshape
            else:
                area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
            if augmented is None and objects.area is not None:  # the input's own, where it gives one (NaN where not)
                given = objects.area[keep]
                area = np.where(np.isnan(given), area, given)
            values.append(("area", "float", area))
            for name, wire in ATTRIBUTES:
                attribute = getattr(objects, name)
                if attribute is not None:
                    values.append((name, wire, attribute[keep]))
            if want_masks:
                masks = arrays.masks if arrays.masks is not None else np.zeros((0, height, width), np.uint8)
                values.append(("mask", "bytes", [image_codec.encode(m, "png", 95, spec.zlib_level, mask=True) for m in masks]))
            if arrays.keypoints is not None:  # also for no objects: the keys are in every record of a set with keypoints
                points = arrays.keypoints
                values.append(("keypoint/x", "float", (points[..., 0] / width).ravel()))
                values.append(("keypoint/y", "float", (points[..., 1] / height).ravel()))
                values.append(("keypoint/visibility", "int64", points[..., 2].astype(np.int64).ravel()))
            for sub, wire, data in values:
                key = f"{prefix}/{sub}"
                out[key] = (wire, data)
                stats.length(key, len(data))
            labels.extend((prefix, t) for t in text)
            if len(keep) < len(objects):
                gone = np.ones(len(objects), dtype=bool)
                gone[keep] = False
                labels.extend((dropped_key, objects.text[i]) for i in np.flatnonzero(gone).tolist())
            labels.extend((left_key, what) for what in objects.left_out)

        return encode

    def counted_keys(self, spec: FeatureSpec) -> tuple[str, ...]:
        """The keys whose counts the manifest keeps: kept objects by class, dropped ones, and what
        the input's reader left out."""
        return (spec.key, f"{spec.key}/{DROPPED}", f"{spec.key}/{LEFT_OUT}")

    # -- the manifest and readers ----------------------------------------------------------------

    def statistics_roles(self, spec: FeatureSpec) -> dict[str, str]:
        return {f"{spec.key}/class/text": "text", f"{spec.key}/mask": "blob", f"{spec.key}/area": "area"}

    def schema(
        self, key: str, config: Mapping[str, Any], lengths: Mapping[str, tuple[int, int]], sizes: Mapping[str, list[Any]]
    ) -> list[dict[str, Any]]:
        entries = []
        for sub, wire in FIELDS:
            full = f"{key}/{sub}"
            if full not in lengths and not (sub == "mask" and config.get("masks")):
                continue
            entry: dict[str, Any] = {"key": full, "dtype": wire, "kind": self.name, "field": sub}
            lo, hi = lengths.get(full, (0, 0))  # always ragged: a record may hold any number of objects
            entry.update({"shape": None, "ragged": True, "min_length": lo, "max_length": hi})
            if sub == "class/label":
                entry["num_classes"] = len(config.get("classes", []))
            if sub == "mask":
                entry["encoding"] = "png"
            entries.append(entry)
        return entries

    def notes(self, key: str, manifest: Any) -> list[str]:
        dropped, left = f"{key}/{DROPPED}", f"{key}/{LEFT_OUT}"
        count, gone = (sum(sum((split.labels or {}).get(k, {}).values()) for split in manifest.splits.values()) for k in (dropped, left))
        lines = []
        entry = manifest.config.get("features", {}).get(key, {})
        if entry.get("input_ids"):
            pairs = list(zip(entry["input_ids"], entry["class_ids"], strict=True))
            moved = ", ".join(f"{a} -> {b}" for a, b in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
            lines.append(f"class ids moved up by 1, as the input's 0 is the TF OD API's background: {moved} (input_ids in the manifest)")
        if count:
            augmented = (manifest.config.get("augment") or {}).get("copies", 0) > 0
            why = "left with no area inside its image" + (" or cut off by augmentation" if augmented else "")
            lines.append(f"dropped {plural(count, 'object')} {why}: counted by class under {dropped} in the manifest")
        if gone:
            kinds: dict[str, int] = {}
            for split in manifest.splits.values():
                for what, n in ((split.labels or {}).get(left) or {}).items():
                    kinds[what] = kinds.get(what, 0) + n
            shown = ", ".join(f"{what} {n}" for what, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            what = f"left out {plural(gone, 'annotation')} as no object to train on ({shown})"
            lines.append(f"{what}: counted under {left} in the manifest")
        return lines

    def label_map_file(self, config: Mapping[str, Any]) -> str | None:
        names = config.get("classes") or []
        return label_map.text(config.get("class_ids") or range(1, len(names) + 1), names, config.get("input_ids"))

    def details(self, entry: Mapping[str, Any]) -> list[str]:
        parts = [entry["encoding"]] if entry.get("encoding") else []
        if "num_classes" in entry:
            parts.append(plural(entry["num_classes"], "class", "classes"))
        return parts

    def wire_of(self, entry: Mapping[str, Any]) -> str:
        return str(entry["dtype"])  # each of its keys has its own: float boxes, int64 classes, bytes texts and masks

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        if entry.get("dtype") == "bytes":
            return list(values)
        return np.asarray(values, dtype=np.float32 if entry.get("dtype") == "float" else np.int64)

    # -- after the build: the record's objects as a whole (features.object_records does the work) --

    def feature_key(self, entry: Mapping[str, Any]) -> str:
        return str(entry["key"])[: -len(entry["field"]) - 1] if entry.get("field") else str(entry["key"])

    def tfds_features(self, key: str, entries: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any] | None:
        return object_records.tfds_sequence(entries)

    def object_lists(self, key: str, config: Mapping[str, Any]) -> ObjectLists | None:
        return object_records.object_lists(key, config)

    def python_record(
        self, key: str, config: Mapping[str, Any], record: dict[str, Any], decode_images: bool, size: tuple[int, int] | None
    ) -> None:
        object_records.add_arrays(key, config, record, decode_images, size)

    def record_problem(self, key: str, features: Mapping[str, tuple[str, Sequence[Any]]], size: tuple[int, int] | None) -> str | None:
        return object_records.problem(key, features, size)

    def overlay(
        self, key: str, features: Mapping[str, tuple[str, Sequence[Any]]], classes: Sequence[str] | None, shown: tuple[int, int]
    ) -> Overlay | None:
        return object_records.overlay(key, features, classes, shown)

    def found_in(self, features: Mapping[str, tuple[str, Sequence[Any]]]) -> list[str]:
        return object_records.found_in(features)

    def summary(
        self, key: str, entries: Sequence[Mapping[str, Any]], splits: Mapping[str, tuple[int, Labels]], classes: Sequence[str]
    ) -> dict[str, Any] | None:
        return object_records.summary(key, entries, splits, classes)

    def summary_lines(self, summary: Mapping[str, Any]) -> list[str]:
        return object_records.summary_lines(summary)


def _on_lead(spec: FeatureSpec, objects: Objects, loaded: Loaded) -> ObjectArrays:
    """The objects on their whole leading image, checked against its size, masks drawn: once per
    entry, for the original record and every augmented copy."""

    def make() -> ObjectArrays:
        info, _ = loaded.stored(loaded.lead or "")
        _check_size(objects, info.width, info.height)
        return on_image(objects, info.width, info.height, bool(spec.masks))

    return loaded.once(spec.key, make)


def _check_size(objects: Objects, width: int, height: int) -> None:
    """The annotation's image size must be the image's own (EXIF orientation is not applied)."""
    if objects.size is None or objects.size == (width, height):
        return
    w, h = objects.size
    hint = " (EXIF-rotated? shardkit, like TensorFlow's decoders, keeps the stored pixel order)" if (h, w) == (width, height) else ""
    raise ImageProblem(f"the annotation says the image is {w}x{h}, but it is {width}x{height}{hint}")
