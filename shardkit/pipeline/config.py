"""The build config: frozen dataclasses, validated on load, with the key path in every error.

A config maps input columns to ``tf.train.Example`` features and optionally names an
albumentations pipeline::

    columns: [image, mask]          # names for the positional columns of .txt index files
    features:
      image: {kind: image, column: image, encoding: jpeg, quality: 95}
      mask:  {kind: mask, column: mask}
    augment:
      copies: 2                     # augmented records per input
      keep_original: true           # plus the input itself, unaugmented
      decode: reduced               # or exact: never decode a JPEG shrunk (see reduced_decode)
      pipeline:                     # albumentations' own serialization (A.to_dict), or a list of transforms
        - {__class_fullname__: HorizontalFlip, p: 0.5}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args

import yaml

from shardkit.errors import ConfigError
from shardkit.features.base import BadValue, FeatureSpec, int_in
from shardkit.features.registry import KINDS, kind_named
from shardkit.formats.image_headers import IMAGE_SUFFIXES
from shardkit.storage import location

Decode = Literal["reduced", "exact"]
SOURCE_ID = "source_id"
IDENTITY_COLUMN = "@identity"  # the column of a feature filled with the entry's identity, not an input value


@dataclasses.dataclass(frozen=True)
class BoxesSpec:
    """``augment.boxes``: which boxes of an objects feature outlive augmentation, as albumentations'
    ``BboxParams`` filters them. A box that fails is dropped with its mask, keypoints and class."""

    min_visibility: float = 0.0  # the fraction of its area a box must keep inside the picture when a transform moves it
    min_area: float = 0.0  # pixels of the augmented picture


@dataclasses.dataclass(frozen=True)
class AugmentSpec:
    """An albumentations pipeline (serialized dict) and how many records to make per input."""

    pipeline: Mapping[str, Any] = dataclasses.field(hash=False)
    copies: int = 1
    keep_original: bool = False
    # "reduced": a pipeline that begins by shrinking decodes JPEGs shrunk (pipeline.reduced_decode);
    # "exact": every image is decoded whole, as albumentations alone would see it.
    decode: Decode = "reduced"
    boxes: BoxesSpec = BoxesSpec()

    @property
    def records_per_entry(self) -> int:
        return self.copies + (1 if self.keep_original else 0)


@dataclasses.dataclass(frozen=True)
class Config:
    features: tuple[FeatureSpec, ...]
    augment: AugmentSpec | None = None
    columns: tuple[str, ...] | None = None
    source: str | None = dataclasses.field(default=None, compare=False)
    # For snapshot-materialize; not part of the build (changing it must not invalidate shards).
    snapshot_preprocess: str | None = dataclasses.field(default=None, compare=False)

    @property
    def records_per_entry(self) -> int:
        return self.augment.records_per_entry if self.augment else 1

    def feature(self, key: str) -> FeatureSpec:
        for spec in self.features:
            if spec.key == key:
                return spec
        raise KeyError(key)

    def with_classes(self, classes: Mapping[str, Iterable[str]]) -> Config:
        """Each class list the config leaves open filled with ``classes[key]``, sorted."""
        features = tuple(
            dataclasses.replace(spec, classes=tuple(sorted(classes.get(spec.key, ()))))
            if spec.kind.has_classes and spec.classes is None
            else spec
            for spec in self.features
        )
        return dataclasses.replace(self, features=features)

    def with_label_map(self, pairs: tuple[tuple[int, str], ...]) -> Config:
        """The config with the inputs' own label map (``(id, name)`` pairs) given to the features
        that take one (objects); a feature whose classes the config fixes refuses it."""
        features = tuple(spec.kind.with_label_map(spec, pairs, self.source) for spec in self.features)
        return dataclasses.replace(self, features=features)

    def with_source_id(self) -> Config:
        """The config plus a ``source_id`` string feature: each record's input, as its identity."""
        if any(spec.key == SOURCE_ID for spec in self.features):
            raise ConfigError(
                f"features.{SOURCE_ID}",
                "shardkit adds a source_id feature naming each record's input: rename this feature, or build with --no-source-id",
                self.source,
            )
        spec = FeatureSpec(key=SOURCE_ID, kind=kind_named("string"), column=IDENTITY_COLUMN)
        return dataclasses.replace(self, features=(*self.features, spec))

    def open_classes(self) -> dict[str, set[str]]:
        """An empty set for each feature whose class list the inputs decide."""
        return {spec.key: set() for spec in self.features if spec.kind.has_classes and spec.classes is None}

    def to_dict(self) -> dict[str, Any]:
        """Canonical plain-data form: what the manifest stores and the fingerprint hashes."""
        out: dict[str, Any] = {"features": {f.key: f.to_dict() for f in self.features}}
        if self.columns is not None:
            out["columns"] = list(self.columns)
        if self.augment is not None:
            out["augment"] = {
                "copies": self.augment.copies,
                "keep_original": self.augment.keep_original,
                "decode": self.augment.decode,
                "pipeline": dict(self.augment.pipeline),
            }
            # Only where it filters anything: a config without it keeps the fingerprint it always had.
            if self.augment.boxes != BoxesSpec():
                out["augment"]["boxes"] = dataclasses.asdict(self.augment.boxes)
        return out


_TOP_KEYS = ("columns", "features", "augment", "snapshot")
_FEATURE_KEYS = ("kind", "column", "encoding", "quality", "channels", "classes", "png_level", "masks", "default")
_AUGMENT_KEYS = ("copies", "keep_original", "decode", "boxes", "pipeline")
_BOXES_KEYS = ("min_visibility", "min_area")


def _require_mapping(value: object, path: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(value).__name__}", source)
    return value


def _reject_unknown(mapping: Mapping[str, Any], allowed: tuple[str, ...], path: str, source: str | None) -> None:
    for key in mapping:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(where, f"unknown key (allowed: {', '.join(allowed)})", source)


def _parse_feature(key: str, raw: object, source: str | None) -> FeatureSpec:
    path = f"features.{key}"
    spec = _require_mapping(raw, path, source)
    _reject_unknown(spec, _FEATURE_KEYS, path, source)
    name = spec.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ConfigError(f"{path}.kind", f"unknown feature kind {name!r} (known: {', '.join(KINDS)})", source)
    column = spec.get("column", key)
    if isinstance(column, bool) or not isinstance(column, (int, str)) or (isinstance(column, int) and column < 0):
        raise ConfigError(f"{path}.column", f"expected a column name or a 0-based position, got {column!r}", source)
    parsed = FeatureSpec(key=key, kind=kind, column=column, **kind.options(spec, path, source))
    default = spec.get("default")
    if default is not None:
        try:
            kind.typed(parsed, default, None)  # a default the feature could never store is a config mistake
        except BadValue as exc:
            raise ConfigError(f"{path}.default", str(exc), source) from None
        parsed = dataclasses.replace(parsed, default=default)
    return parsed


def _parse_augment(raw: object, features: tuple[FeatureSpec, ...], source: str | None) -> AugmentSpec:
    from shardkit.pipeline.shard import augment  # imports albumentations

    spec = _require_mapping(raw, "augment", source)
    _reject_unknown(spec, _AUGMENT_KEYS, "augment", source)
    copies = int_in(spec.get("copies", 1), "augment.copies", 0, 1000, source)
    keep_original = spec.get("keep_original", False)
    if not isinstance(keep_original, bool):
        raise ConfigError("augment.keep_original", f"expected true or false, got {keep_original!r}", source)
    decode = spec.get("decode", "reduced")
    if decode not in get_args(Decode):
        raise ConfigError("augment.decode", f"expected reduced or exact, got {decode!r}", source)
    if copies == 0 and not keep_original:
        raise ConfigError("augment.copies", "copies: 0 without keep_original: true would write no records", source)
    if "pipeline" not in spec:
        raise ConfigError("augment.pipeline", "missing: give an albumentations pipeline (A.to_dict output or a list of transforms)", source)
    try:
        pipeline = augment.normalize_pipeline(spec["pipeline"])
    except ConfigError as exc:
        raise ConfigError(f"augment.pipeline{exc.path}", exc.reason, source) from None
    if not any(f.kind.leads for f in features):
        raise ConfigError("augment", "augmentation needs an image feature", source)
    for f in features:
        f.kind.check_augment(f, copies, source)
    has_boxes = any(f.kind.augment_target == augment.OBJECTS for f in features)
    if has_boxes:
        try:
            augment.check_for_objects(pipeline)
        except ConfigError as exc:
            raise ConfigError(f"augment.pipeline{exc.path}", exc.reason, source) from None
    boxes = _parse_boxes(spec.get("boxes"), has_boxes, source)
    return AugmentSpec(pipeline=pipeline, copies=copies, keep_original=keep_original, decode=cast(Decode, decode), boxes=boxes)


def _parse_boxes(raw: object, has_boxes: bool, source: str | None) -> BoxesSpec:
    if raw is None:
        return BoxesSpec()
    path = "augment.boxes"
    spec = _require_mapping(raw, path, source)
    _reject_unknown(spec, _BOXES_KEYS, path, source)
    if not has_boxes:
        raise ConfigError(path, "filters the boxes of an objects feature, and this config has none", source)
    visibility = _number(spec.get("min_visibility", 0.0), f"{path}.min_visibility", 1.0, source)
    area = _number(spec.get("min_area", 0.0), f"{path}.min_area", math.inf, source)
    return BoxesSpec(min_visibility=visibility, min_area=area)


def _number(value: object, path: str, hi: float, source: str | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= hi or not math.isfinite(value):
        wanted = "a number from 0 to 1" if hi == 1.0 else "a number, 0 or more"
        raise ConfigError(path, f"expected {wanted}, got {value!r}", source)
    return float(value)


def parse_config(raw: object, source: str | None = None) -> Config:
    """Validate a config mapping (as loaded from YAML) and return the frozen ``Config``."""
    top = _require_mapping(raw if raw is not None else {}, "", source)
    _reject_unknown(top, _TOP_KEYS, "", source)
    columns = top.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise ConfigError("columns", "expected a list of column names", source)
        columns = tuple(columns)
    raw_features = _require_mapping(top.get("features"), "features", source)
    if not raw_features:
        raise ConfigError("features", "at least one feature is needed", source)
    features = tuple(_parse_feature(str(k), v, source) for k, v in raw_features.items())
    for f in features:
        f.kind.check_config(f, features, source)
    augment_spec = _parse_augment(top["augment"], features, source) if top.get("augment") is not None else None
    preprocess = None
    if top.get("snapshot") is not None:
        snapshot = _require_mapping(top["snapshot"], "snapshot", source)
        _reject_unknown(snapshot, ("preprocess",), "snapshot", source)
        preprocess = snapshot.get("preprocess")
        if not isinstance(preprocess, str) or ":" not in preprocess:
            raise ConfigError("snapshot.preprocess", "expected MODULE:FUNCTION or FILE.py:FUNCTION", source)
    return Config(features=features, augment=augment_spec, columns=columns, source=source, snapshot_preprocess=preprocess)


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file."""
    source = str(path)
    try:
        text = location.read_bytes(source).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"cannot read config: {getattr(exc, 'strerror', None) or exc}", source) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"not valid YAML: {exc}", source) from None
    return parse_config(raw, source)


def infer_config(first_values: tuple[object, ...], names: tuple[str, ...] | None) -> Config:
    """A config for the classic two-column index when none is given.

    Column 0 is an image stored as its original bytes; column 1, if present, is a mask when it
    names an image file, an int64 label when it is an integer, and a class name otherwise.
    """
    if not 1 <= len(first_values) <= 2:
        raise ConfigError("", f"the index has {len(first_values)} columns: give a --config that maps them to features")
    col0: int | str = names[0] if names else 0
    features = [FeatureSpec(key="image", kind=kind_named("image"), column=col0, encoding="raw")]
    if len(first_values) == 2:
        second = first_values[1]
        col1: int | str = names[1] if names else 1
        text = str(second)
        if text.lower().endswith(IMAGE_SUFFIXES):
            features.append(FeatureSpec(key="mask", kind=kind_named("mask"), column=col1, encoding="png"))
        elif isinstance(second, int) or text.lstrip("-").isdigit():
            features.append(FeatureSpec(key="label", kind=kind_named("int64"), column=col1))
        else:
            features.append(FeatureSpec(key="label", kind=kind_named("class_name"), column=col1))
    return Config(features=tuple(features))
