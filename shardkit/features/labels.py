"""``class_name``: a class name in the input, its index in the class list in the record.

The list is the config's ``classes``, or the sorted names the inputs hold; the manifest (and
``KEY.labels.txt`` for TFDS) keeps the names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from shardkit.errors import ConfigError
from shardkit.features import columns
from shardkit.features.base import TFDS, BadValue, Encoder, FeatureKind, Features, FeatureSpec, Loaded, RecordStats
from shardkit.units import plural


class ClassNameKind(FeatureKind):
    name: ClassVar[str] = "class_name"
    json_type: ClassVar[str | None] = "string"
    wire: ClassVar[str] = "int64"
    schema_dtype: ClassVar[str] = "int64"
    has_classes: ClassVar[bool] = True
    counts_labels: ClassVar[bool] = True
    label_role: ClassVar[str] = "always"

    def classes(self, value: object, path: str, source: str | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(c, (str, int)) for c in value):
            raise ConfigError(f"{path}.classes", "expected a list of class names", source)
        classes = tuple(str(c) for c in value)
        if len(set(classes)) != len(classes):
            raise ConfigError(f"{path}.classes", "class names repeat", source)
        return classes

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        if isinstance(raw, (dict, list, bool)) or raw is None or raw == "":
            raise BadValue(f"expected a class name, got {raw!r}")
        name = str(raw)
        if spec.classes is not None and name not in spec.classes:
            raise BadValue(f"unknown class {name!r} (the config lists {len(spec.classes)} classes)")
        return name

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """A text column: only names outside a fixed class list are suspect."""
        if rows is not None or not columns.is_text(column):
            return super().column_problems(spec, column, rows)
        import pyarrow as pa
        import pyarrow.compute as pc

        suspect = pc.equal(pc.utf8_length(column), 0).fill_null(False).to_numpy(zero_copy_only=False)
        if spec.classes is not None:
            suspect |= ~pc.is_in(column, value_set=pa.array(spec.classes)).to_numpy(zero_copy_only=False)
        suspect &= ~columns.nulls(column)
        return super().column_problems(spec, column, np.flatnonzero(suspect)) if suspect.any() else []

    def column_class_names(self, spec: FeatureSpec, column: Any) -> set[str]:
        if not columns.is_text(column):
            return super().column_class_names(spec, column)
        import pyarrow.compute as pc

        return set(pc.unique(column.drop_null()).to_pylist())

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key = spec.key
        ids = {name: i for i, name in enumerate(spec.classes or ())}

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            out[key] = ("int64", [ids[value]])
            labels.append((key, value))

        return encode

    def batchable(self, spec: FeatureSpec) -> bool:
        return True

    def native_column(self, spec: FeatureSpec, column: Any) -> bool:
        return columns.is_text(column)

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        """Names (a text column, or typed names) as their places in the class list, counted by name."""
        import pyarrow as pa
        import pyarrow.compute as pc

        names = pa.array(values, pa.string()) if isinstance(values, list) else values
        stats.counts(spec.key, columns.value_counts(names))
        return [(spec.key, "int64", pc.index_in(names, value_set=pa.array(spec.classes or (), pa.string())).cast(pa.int64()))]

    def schema(
        self, key: str, config: Mapping[str, Any], lengths: Mapping[str, tuple[int, int]], sizes: Mapping[str, list[Any]]
    ) -> list[dict[str, Any]]:
        entries = super().schema(key, config, lengths, sizes)
        entries[0]["num_classes"] = len(config.get("classes", []))
        return entries

    def details(self, entry: Mapping[str, Any]) -> list[str]:
        return [*super().details(entry), plural(entry.get("num_classes", 0), "class", "classes")]

    def tfds_feature(self, entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        return {"pythonClassName": TFDS + "class_label_feature.ClassLabel", "classLabel": {"numClasses": str(len(config["classes"]))}}

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        array = np.asarray(values, dtype=np.int64)
        return array[0].item() if entry.get("shape") == [] and array.size == 1 else array

    def python_single(self, entry: Mapping[str, Any], decode_images: bool) -> Literal["value", "text"] | None:
        return "value" if entry.get("shape") == [] else None

    def caption(self, values: list[Any], classes: list[str] | tuple[str, ...] | None) -> str | None:
        return str((classes or ())[values[0]])


class ClassIdKind(ClassNameKind):
    """``class_id``: a class's id (0, 1, ...) in the input, as Hugging Face's ``ClassLabel`` stores
    it, its name from the config's ``classes`` list; the record holds the id, the manifest the names."""

    name: ClassVar[str] = "class_id"
    json_type: ClassVar[str | None] = "int64"

    def classes(self, value: object, path: str, source: str | None) -> tuple[str, ...] | None:
        if value is None:
            raise ConfigError(f"{path}.classes", "a class_id feature needs its class names, in id order", source)
        return super().classes(value, path, source)

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """An integer column (or digits in text): only ids outside the class list are suspect."""
        text = rows is None and columns.is_text(column)
        if rows is not None or not (text or columns.is_integer(column)):
            return FeatureKind.column_problems(self, spec, column, rows)
        ids_column, other = columns.parsed_text(column, integer=True) if text else (column, np.zeros(len(column), dtype=bool))
        ids = columns.numbers(ids_column)
        suspect = (other | (ids < 0) | (ids >= len(spec.classes or ()))) & ~columns.nulls(column)
        return FeatureKind.column_problems(self, spec, column, np.flatnonzero(suspect)) if suspect.any() else []

    def from_text(self, spec: FeatureSpec, column: Any) -> Any:
        """Ids written as digits: cast in Arrow where every one is plain digits, else typed one by one."""
        parsed, other = columns.parsed_text(column, integer=True)
        return None if other.any() else parsed

    def native_column(self, spec: FeatureSpec, column: Any) -> bool:
        return columns.is_integer(column)

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        """An integer column's ids as they are, counted by name; typed values are names already."""
        import pyarrow as pa

        if isinstance(values, list):
            return super().batch_columns(spec, values, stats)
        names = spec.classes or ()
        stats.counts(spec.key, {names[int(i)]: n for i, n in columns.value_counts(values).items()})
        return [(spec.key, "int64", values.cast(pa.int64()))]

    def column_class_names(self, spec: FeatureSpec, column: Any) -> set[str]:
        return set(spec.classes or ())  # fixed by the config (or the Hub's metadata): nothing to collect

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        names = spec.classes or ()
        if isinstance(raw, str) and raw.strip().isdecimal():  # not isdigit: int() refuses '²
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise BadValue(f"expected a class id, got {raw!r}")
        if not 0 <= raw < len(names):
            unlabelled = " (-1: Hugging Face's mark of an unlabelled row)" if raw == -1 else ""
            raise BadValue(f"class id {raw} is not one of the {len(names)} classes (0 to {len(names) - 1}){unlabelled}")
        return names[raw]
