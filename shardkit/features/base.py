"""What every kind of feature answers, and the parsed config entry of one feature.

A kind of feature (an image, a mask, a class label, numbers, text, a file's bytes) is one class, registered by name in
``features.registry``. The build, the checkers, the readers and the previews ask each feature's kind, never branch on
it. The defaults here serve a feature with one value per record that reads no file; a kind overrides what it does differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, TypeVar

import numpy as np

from shardkit.errors import ConfigError
from shardkit.features.drawn import ObjectLists, Overlay
from shardkit.formats.example_proto import FeatureValue
from shardkit.formats.image_headers import ImageInfo
from shardkit.statistics.recording import RecordStats as RecordStats  # re-exported: kinds import it from here

Labels = Mapping[str, Mapping[str, int]]  # a split's label counts: counted key -> value -> how many


Features = dict[str, tuple[str, FeatureValue]]  # key -> (Example list type, values): one record's features
T = TypeVar("T")


class BadValue(ValueError):
    """A raw input value a kind cannot take; the caller adds the file, line and feature key."""


class Loaded(Protocol):
    """One entry's files in memory (``pipeline.shard.records``): what an encoder reads."""

    files: dict[str, bytes]
    lead: str | None  # the key of the record's leading picture, which masks and objects belong to

    def stored(self, key: str) -> tuple[ImageInfo, str]: ...  # a picture's header and the mode it is stored in

    def array(self, spec: FeatureSpec) -> np.ndarray: ...

    def decoded(self, key: str) -> np.ndarray | None: ...  # the pixels if decoded whole already, else None

    def once(self, key: str, make: Callable[[], T]) -> T: ...  # made once per entry, shared by all its records

    # A picture as the augmenter gets it: whole, or with the pipeline's leading downscale applied
    # (``pipeline.shard.reduced_decode``); and a full-size mask of its size downscaled as masks are.
    def pre_augment(self, key: str) -> np.ndarray: ...

    def pre_augment_mask(self, mask: np.ndarray) -> np.ndarray: ...


# One feature's encoder for one shard: (the entry's value, its files, augmented arrays or None,
# the record's features to fill, the (key, label value) pairs to count once the entry is done).
Encoder = Callable[[Any, Loaded, "dict[str, np.ndarray] | None", Features, "list[tuple[str, str | None]]"], None]


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """One feature of the output records, filled from one input column."""

    key: str
    kind: FeatureKind
    column: int | str
    encoding: str | None = None  # image: jpeg/png/raw; mask: always png
    quality: int = 95  # jpeg only
    channels: int | None = None  # images: 1, 3 or 4; None keeps the file's own (palette -> RGB)
    classes: tuple[str, ...] | None = None  # class_name: fixed list, or None to collect from the data
    png_level: int | None = None  # png: zlib level 0-9; None is 1 (fast, lossless either way)
    masks: bool | None = None  # objects: write an instance mask per object
    class_ids: tuple[int, ...] | None = None  # objects: each class's id where the input fixes them (COCO); else 1, 2, ...
    input_ids: tuple[int, ...] | None = None  # objects: each class's id in the input, where 0-based ids are moved up by 1
    default: Any = None  # the raw value a row's missing (null) value stands for; None: a null is bad input

    @property
    def zlib_level(self) -> int:
        return 1 if self.png_level is None else self.png_level

    def to_dict(self) -> dict[str, Any]:
        """The config entry in canonical plain data (what the manifest stores and the fingerprint hashes)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self)[1:]:
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = value.name if field.name == "kind" else list(value) if field.name in _LISTS else value
        return out


_LISTS = ("classes", "class_ids", "input_ids")


def int_in(value: object, path: str, lo: int, hi: int, source: str | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(path, f"expected an integer from {lo} to {hi}, got {value!r}", source)
    return value


def length_shape(lo: int, hi: int) -> dict[str, Any]:
    """A schema entry's shape from the shortest and longest value list the records had."""
    return {"shape": [] if lo == 1 else [lo]} if lo == hi else {"shape": None, "ragged": True, "min_length": lo, "max_length": hi}


class FeatureKind:
    """The interface of a kind of feature, with the behaviour of a one-value feature that reads no file.
    Kinds hold no state: one instance per kind, equal to any other instance of its class (a
    ``FeatureSpec`` pickled to a worker compares equal to the parent's).
    """

    name: ClassVar[str]
    wire: ClassVar[str]  # the Example list type its values are stored as: "int64", "float" or "bytes"
    schema_dtype: ClassVar[str]  # the manifest schema's dtype: the wire type, or "string" for text
    reads_file: ClassVar[bool] = False  # its value is a path, loaded by the worker
    # Pictures: how many a record has of them matters to augmentation (targets), previews (tiles,
    # overlays) and checks (masks match their image's size).
    augment_target: ClassVar[str | None] = None  # the albumentations target it rides as, if any (pipeline.shard.augment)
    picture: ClassVar[bool] = False  # its value is pixels: an image or a mask
    leads: ClassVar[bool] = False  # the picture that masks belong to and augmentation needs
    follows_lead: ClassVar[bool] = False  # must have the size of the record's leading picture
    class_values: ClassVar[bool] = False  # pixel values are class ids: palettes kept as indices, never interpolated
    shrinks_on_decode: ClassVar[bool] = False  # may be decoded at a fraction of its size when the pipeline begins by shrinking
    has_classes: ClassVar[bool] = False  # its values are indices into a class list (names in the manifest)
    counts_labels: ClassVar[bool] = False  # the manifest counts how many records carry each value
    # Whether previews and label balance treat it as a label: "always", "by_name" (its key reads like one: label, class) or "never".
    label_role: ClassVar[str] = "never"
    plain_text_ok: ClassVar[bool] = False  # any non-empty word of a .txt line is a valid value
    json_type: ClassVar[str | None] = None  # the Arrow type a .jsonl column is read as, each value what json.loads gives; None: by rows
    statistics_role: ClassVar[str | None] = None  # its bytes to the statistics: "text", "blob" or "picture"; None: numbers
    counts_objects: ClassVar[bool] = False  # its label counts are per object and by class, however many classes

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"<{self.name} feature>"

    # -- the config entry -----------------------------------------------------------------------

    def options(self, raw: Mapping[str, Any], path: str, source: str | None) -> dict[str, Any]:
        """The entry's options (encoding, quality, channels, png_level, classes) checked for this kind,
        in this order, so an entry with several mistakes reports the same one on every kind."""
        encoding = self.encoding(raw.get("encoding"), path, source)
        quality = int_in(raw.get("quality", 95), f"{path}.quality", 1, 100, source)
        channels = self.channels(raw.get("channels"), encoding, path, source)
        png_level = raw.get("png_level")
        if png_level is not None:
            png_level = int_in(png_level, f"{path}.png_level", 0, 9, source)
            if encoding != "png":
                raise ConfigError(f"{path}.png_level", "png_level applies to png-encoded images and to masks", source)
        classes = self.classes(raw.get("classes"), path, source)
        options = {"encoding": encoding, "quality": quality, "channels": channels, "png_level": png_level, "classes": classes}
        masks = self.masks(raw.get("masks"), path, source)
        return options if masks is None else {**options, "masks": masks}

    def masks(self, value: object, path: str, source: str | None) -> bool | None:
        if value is not None:
            raise ConfigError(f"{path}.masks", "only objects features take masks", source)
        return None

    def encoding(self, value: object, path: str, source: str | None) -> str | None:
        if value is not None:
            raise ConfigError(f"{path}.encoding", f"only image features have an encoding, not {self.name}", source)
        return None

    def channels(self, value: object, encoding: str | None, path: str, source: str | None) -> int | None:
        if value is not None:
            raise ConfigError(f"{path}.channels", "channels applies to image and mask features and is 1, 3 or 4", source)
        return None

    def classes(self, value: object, path: str, source: str | None) -> tuple[str, ...] | None:
        if value is not None:
            raise ConfigError(f"{path}.classes", "only class_name features take a classes list", source)
        return None

    def wire_of(self, entry: Mapping[str, Any]) -> str:
        """The Example list type of the schema entry ``entry``'s values."""
        return self.wire

    def extra_keys(self, spec: FeatureSpec) -> tuple[str, ...]:
        """Keys written beside the feature's own in every record."""
        return ()

    def counted_keys(self, spec: FeatureSpec) -> tuple[str, ...]:
        """The keys whose values the manifest counts (``counts_labels``)."""
        return (spec.key,)

    def with_label_map(self, spec: FeatureSpec, pairs: tuple[tuple[int, str], ...], source: str | None) -> FeatureSpec:
        """``spec`` given the inputs' own label map, for a kind whose classes have ids of their own."""
        return spec

    def trims_plan(self, spec: FeatureSpec) -> bool:
        """Whether ``plan_value`` leaves out part of a raw value this config never uses."""
        return False

    def plan_value(self, spec: FeatureSpec, raw: Any) -> Any:
        """A checked raw value as the plan keeps it for the worker (``trims_plan``)."""
        return raw

    def class_names(self, value: Any) -> Iterable[str]:
        """The class names a typed value holds (``has_classes``): what an open class list collects."""
        return (value,)

    def check_config(self, spec: FeatureSpec, features: tuple[FeatureSpec, ...], source: str | None) -> None:
        """What this feature needs from the rest of the config."""

    def check_augment(self, spec: FeatureSpec, copies: int, source: str | None) -> None:
        """Whether augmented copies can store this feature."""

    # -- a raw value from an input row; a column of a table (pyarrow, imported by the caller) ---

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        """``raw`` converted and checked; raises ``BadValue``. ``folder``: what relative file paths
        resolve against (None leaves them as written)."""
        raise NotImplementedError

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """(row index, reason) for each non-null value of the Arrow array ``column`` (only at
        ``rows``, where given) that ``typed`` refuses, in row order: value by value here; a kind
        screens a column whose Arrow type it knows and asks this for the few suspect rows."""
        rows = range(len(column)) if rows is None else [int(i) for i in rows]
        problems = []
        for i, raw in zip(rows, column.take(list(rows)).to_pylist(), strict=True):
            if raw is not None:
                try:
                    self.typed(spec, raw, None)
                except BadValue as exc:
                    problems.append((i, str(exc)))
        return problems

    def column_class_names(self, spec: FeatureSpec, column: Any) -> set[str]:
        """The class names a checked column's non-null values hold (``has_classes``)."""
        return {n for raw in column.drop_null().to_pylist() for n in self.class_names(self.typed(spec, raw, None))}

    # -- records ---------------------------------------------------------------------------------

    def batchable(self, spec: FeatureSpec) -> bool:
        """Whether ``batch_columns`` makes this feature's values for records without augmentation."""
        return False

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        """The feature in a batch of records (``pipeline.shard.batches``): (key, Example list type,
        Arrow array of one value or list per record) for each key it writes. ``values``: a table's
        Arrow column the kind takes as it is (``native_column``), or a list of ``typed`` values;
        for a kind that ``reads_file``, what ``batch_file`` made of each record's file."""
        raise NotImplementedError(f"{self.name} features are encoded record by record")

    def native_column(self, spec: FeatureSpec, column: Any) -> bool:
        """Whether ``batch_columns`` takes the Arrow ``column`` (no nulls) as it is, untyped."""
        return False

    def from_text(self, spec: FeatureSpec, column: Any) -> Any:
        """A checked column of texts (a CSV's) as ``batch_columns`` takes it, each as ``typed``
        reads it; None where the kind takes texts as they are, or one by one."""
        return None

    def batch_file(self, spec: FeatureSpec, data: bytes, stored: tuple[ImageInfo, str] | None) -> Any:
        """A record's file as ``batch_columns`` takes it (raises ``ImageProblem``: the record is bad)."""
        return data

    def stored(self, spec: FeatureSpec, data: bytes) -> tuple[ImageInfo, str] | None:
        """A picture file's header and the mode it is stored in (raises ``ImageProblem``); None
        for a feature without pixels."""
        return None

    def augment_input(self, spec: FeatureSpec, value: Any, loaded: Loaded) -> Any:
        """What the augmenter moves for this feature (one with an ``augment_target``), the same
        for every copy of the entry."""
        raise NotImplementedError(f"{self.name} features are not augmented")

    def initial_lengths(self, spec: FeatureSpec) -> dict[str, tuple[int, int]]:
        """List lengths known before any record: one value a record, whatever the input."""
        return {spec.key: (1, 1)}

    def statistics_roles(self, spec: FeatureSpec) -> dict[str, str]:
        """What each bytes key it writes is to the statistics (``statistics.shard_statistics``):
        "text" (distinct and top values), "blob" (opaque: sizes) or "picture"."""
        return {} if self.statistics_role is None else {spec.key: self.statistics_role}

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        """The function that writes this feature into each record of one shard."""
        key, wire = spec.key, self.wire

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            out[key] = (wire, [value])

        return encode

    # -- the manifest ----------------------------------------------------------------------------

    def schema(
        self, key: str, config: Mapping[str, Any], lengths: Mapping[str, tuple[int, int]], sizes: Mapping[str, list[Any]]
    ) -> list[dict[str, Any]]:
        """The manifest's schema entries for this feature: its key, and any written beside it."""
        entry: dict[str, Any] = {"key": key, "dtype": self.schema_dtype, "kind": self.name}
        entry.update(length_shape(*lengths.get(key, (1, 1))))
        return [entry]

    def notes(self, key: str, manifest: Any) -> list[str]:
        """Lines for the build's summary about this feature in the finished ``manifest``
        (``output.manifest.Manifest``): what was left out of the records and why."""
        return []

    def label_map_file(self, config: Mapping[str, Any]) -> str | None:
        """The text of ``OUT/label_map.pbtxt`` for the feature's config entry, where it has one."""
        return None

    def details(self, entry: Mapping[str, Any]) -> list[str]:
        """What ``inspect`` says of the feature beyond its dtype and shape: its encoding and the
        range of picture sizes, where the schema entry has them."""
        parts = [entry["encoding"]] if entry.get("encoding") else []
        if "height" in entry:
            (h0, h1), (w0, w1) = entry["height"], entry["width"]
            parts.append(f"{h0 if h0 == h1 else f'{h0}-{h1}'}x{w0 if w0 == w1 else f'{w0}-{w1}'}")
            parts.append("channels " + ",".join(str(c) for c in entry["channels"]))
        return parts

    # -- readers ---------------------------------------------------------------------------------

    def tfds_feature(self, entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        """The feature in TFDS's ``features.json``."""
        shape = entry.get("shape")
        dims = {} if shape == [] else {"dimensions": ["-1"] if shape is None else [str(d) for d in shape]}
        dtype = {"int64": "int64", "float": "float32", "bytes": "string"}[self.wire]
        return {"pythonClassName": TFDS + "tensor_feature.Tensor", "tensor": {"shape": dims, "dtype": dtype, "encoding": "none"}}

    def tf_decoder(self, entry: Mapping[str, Any]) -> tuple[str, int] | None:
        """(encoding, channels) for ``shardkit.tfdata`` to decode the feature into pixels, or None."""
        return None

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        """The feature as ``ShardReader`` gives it: one value where the schema says one, else a list."""
        return values[0] if entry.get("shape") == [] and len(values) == 1 else list(values)

    def python_single(self, entry: Mapping[str, Any], decode_images: bool) -> Literal["value", "text"] | None:
        """Where ``python_value`` gives one value of the wire type as itself ("value") or its UTF-8 text ("text"): ShardReader skips it."""
        return "value" if entry.get("shape") == [] and type(self).python_value is FeatureKind.python_value else None

    def decoded_size(self, key: str, features: Mapping[str, tuple[str, list[Any]]]) -> tuple[int, int] | None:
        """``verify --deep``: (width, height) of the stored picture, checked against its size
        features (raises ``ImageProblem``); None for a feature without pixels."""
        return None

    def caption(self, values: list[Any], classes: list[str] | tuple[str, ...] | None) -> str | None:
        """The feature's value as a preview tile's caption shows a label, or None when it is no label."""
        return None

    # -- a feature written under several keys (objects): the record as a whole ------------------

    def feature_key(self, entry: Mapping[str, Any]) -> str:
        """The config key of the feature a manifest schema entry belongs to."""
        return str(entry["key"])

    def tfds_features(self, key: str, entries: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any] | None:
        """The feature in TFDS's ``features.json`` from all its schema entries; None leaves it out."""
        own = next((e for e in entries if e["key"] == key), None)
        return None if own is None else self.tfds_feature(own, config)

    def object_lists(self, key: str, config: Mapping[str, Any]) -> ObjectLists | None:
        """Where the feature keeps objects, for ``shardkit.tfdata``; None for a feature of no objects."""
        return None

    def python_record(
        self, key: str, config: Mapping[str, Any], record: dict[str, Any], decode_images: bool, size: tuple[int, int] | None
    ) -> None:
        """``ShardReader``: add to (or change in) a decoded record what the feature gives beyond its
        keys' values. ``size``: (height, width) of the record's leading picture, where known."""

    def record_problem(self, key: str, features: Mapping[str, tuple[str, Sequence[Any]]], size: tuple[int, int] | None) -> str | None:
        """``verify --deep``: what is wrong with the feature in one record, in one line, or None.
        ``size``: (width, height) of the record's leading picture, where it has one."""
        return None

    def overlay(
        self, key: str, features: Mapping[str, tuple[str, Sequence[Any]]], classes: Sequence[str] | None, shown: tuple[int, int]
    ) -> Overlay | None:
        """What a preview draws over the record's picture, shown at ``shown`` (width, height) pixels."""
        return None

    def found_in(self, features: Mapping[str, tuple[str, Sequence[Any]]]) -> list[str]:
        """The keys of features of this kind that previews draw (``overlay``) in a record no
        manifest describes (a file another tool wrote), told by its keys."""
        return []

    def summary(
        self, key: str, entries: Sequence[Mapping[str, Any]], splits: Mapping[str, tuple[int, Labels]], classes: Sequence[str]
    ) -> dict[str, Any] | None:
        """What ``inspect`` says of the feature as a whole (JSON-ready), from its schema entries,
        each split's (records, label counts) and its class names; None: nothing beyond the schema table."""
        return None

    def summary_lines(self, summary: Mapping[str, Any]) -> list[str]:
        """``summary`` as ``inspect`` prints it."""
        return []


TFDS = "tensorflow_datasets.core.features."
