"""``int64`` and ``float``: lists of numbers, one or more per record (ragged lengths are kept)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from shardkit.features import columns
from shardkit.features.base import BadValue, Encoder, FeatureKind, Features, FeatureSpec, Loaded, RecordStats

_FLOAT32_MAX = 3.4028234663852886e38


class NumberKind(FeatureKind):
    """Numbers: a scalar or a list in the input, a list in the record, its lengths in the schema."""

    numpy_dtype: ClassVar[type[np.generic]]

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        items = raw if isinstance(raw, list) else [raw]
        out: list[Any] = []
        for item in items:
            if isinstance(item, (bool, list, dict)) or item is None:
                raise BadValue(f"expected {self.name}, got {item!r}")
            self.check_item(item)
            try:
                out.append(self.cast(item))
            except BadValue:
                raise
            except (TypeError, ValueError, OverflowError):
                raise BadValue(f"{_short_repr(item)} is not a valid {self.name}") from None
        self.check_range(out)
        return out

    def cast(self, item: Any) -> Any:
        raise NotImplementedError

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """A column of numbers (or lists of them, or texts) screened in NumPy; only suspect rows are typed."""
        if rows is None and columns.is_text(column):
            parsed, other = columns.parsed_text(column, self.integer)
            numbers = columns.numbers(parsed)
            suspect = (other | self.suspect(numbers) | ~np.isfinite(numbers)) & ~columns.nulls(column)  # inf from digits: 1e400
            return super().column_problems(spec, column, np.flatnonzero(suspect)) if suspect.any() else []
        if rows is not None or not self.native_column(spec, column):
            return super().column_problems(spec, column, rows)
        values, parents = columns.values_and_rows(column)
        suspect = columns.nulls(values) | self.suspect(columns.numbers(values))
        return super().column_problems(spec, column, columns.suspect_rows(parents, suspect)) if suspect.any() else []

    @property
    def integer(self) -> bool:
        return bool(np.issubdtype(self.numpy_dtype, np.integer))

    def from_text(self, spec: FeatureSpec, column: Any) -> Any:
        """Texts as numbers: cast in Arrow, the few that are not plain digits typed one by one."""
        import pyarrow as pa

        parsed, other = columns.parsed_text(column, self.integer)
        if not other.any():
            return parsed
        values = parsed.to_numpy(zero_copy_only=False).copy()
        for i, raw in zip(np.flatnonzero(other).tolist(), column.take(pa.array(np.flatnonzero(other))).to_pylist(), strict=True):
            values[i] = self.typed(spec, raw, None)[0]
        return pa.array(values)

    def suspect(self, values: np.ndarray) -> np.ndarray:
        """Which values ``typed`` may refuse (screened for the few to check one by one)."""
        raise NotImplementedError

    def check_item(self, item: Any) -> None:
        """A value that converts but should not (a fraction for an integer)."""

    def check_range(self, values: list[Any]) -> None:
        """Values the record's type cannot hold."""

    def initial_lengths(self, spec: FeatureSpec) -> dict[str, tuple[int, int]]:
        return {}  # a list of any length: the records tell

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key, wire = spec.key, self.wire

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            out[key] = (wire, value)
            stats.length(key, len(value))

        return encode

    def batchable(self, spec: FeatureSpec) -> bool:
        return True

    def native_column(self, spec: FeatureSpec, column: Any) -> bool:
        return columns.is_number(column) or (columns.is_list(column) and columns.is_number(column.flatten()))

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        values = self.arrow(values)
        stats.length_range(spec.key, *columns.list_lengths(values))
        return [(spec.key, self.wire, values)]

    def arrow(self, values: Any) -> Any:
        """A native column as it is; typed values (a list of numbers a record) as an Arrow list column."""
        import pyarrow as pa

        if not isinstance(values, list):
            return values
        item = pa.int64() if self.integer else pa.float64()
        return pa.array(values, pa.large_list(item))

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        array = np.asarray(values, dtype=self.numpy_dtype)
        return array[0].item() if entry.get("shape") == [] and array.size == 1 else array

    def python_single(self, entry: Mapping[str, Any], decode_images: bool) -> Literal["value", "text"] | None:
        exact = {"int64": np.int64, "float": np.float32}[self.wire] is self.numpy_dtype  # .item() gives the wire's value back
        return "value" if exact and entry.get("shape") == [] else None


class Int64Kind(NumberKind):
    """``int64``: integers; a single small-valued one is counted as a label in the manifest."""

    name: ClassVar[str] = "int64"
    wire: ClassVar[str] = "int64"
    schema_dtype: ClassVar[str] = "int64"
    numpy_dtype: ClassVar[type[np.generic]] = np.int64
    json_type: ClassVar[str | None] = "int64"  # a JSON integer past int64 is not one: its block is read row by row
    counts_labels: ClassVar[bool] = True
    label_role: ClassVar[str] = "by_name"

    def cast(self, item: Any) -> Any:
        return int(item)

    def suspect(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind == "f":
            return np.asarray(~np.isfinite(values) | (values != np.floor(values)) | (np.abs(values) >= 2.0**63))
        if values.dtype.kind == "u":
            return np.asarray(values > np.iinfo(np.int64).max)
        return np.zeros(len(values), dtype=bool)

    def check_item(self, item: Any) -> None:
        if isinstance(item, float) and not item.is_integer():
            raise BadValue(f"{item!r} is not an integer")

    def check_range(self, values: list[Any]) -> None:
        if any(not -(2**63) <= v < 2**63 for v in values):
            raise BadValue("value out of int64 range")

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key = spec.key

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            out[key] = ("int64", value)
            stats.length(key, len(value))
            labels.append((key, str(value[0]) if len(value) == 1 else None))

        return encode

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        """Integers as int64 (a float column's whole numbers too), each single value counted as a label."""
        import pyarrow as pa

        values = self.arrow(values)
        listed = columns.is_list(values)
        values = values.cast(pa.large_list(pa.int64()) if listed else pa.int64())
        lo, hi = columns.list_lengths(values)
        stats.length_range(spec.key, lo, hi)
        single = values.flatten() if listed and lo == hi == 1 else None if listed else values
        stats.counts(spec.key, None if single is None else {str(v): n for v, n in columns.value_counts(single).items()})
        return [(spec.key, "int64", values)]

    def caption(self, values: list[Any], classes: list[str] | tuple[str, ...] | None) -> str | None:
        return str(values[0]) if len(values) == 1 else None


class FloatKind(NumberKind):
    """``float``: numbers stored as float32 (values beyond its range are refused, infinities kept)."""

    name: ClassVar[str] = "float"
    wire: ClassVar[str] = "float"
    schema_dtype: ClassVar[str] = "float"
    numpy_dtype: ClassVar[type[np.generic]] = np.float32
    json_type: ClassVar[str | None] = "double"  # 1 and 1.0 are one number here (not so for a text feature)

    def cast(self, item: Any) -> Any:
        value = float(item)
        if math.isinf(value) and isinstance(item, str) and "inf" not in item.lower():  # '1e400': past any float
            raise BadValue("value out of float32 range")
        return value

    def suspect(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.asarray(np.isfinite(values) & (np.abs(values.astype(np.float64)) > _FLOAT32_MAX))

    def check_range(self, values: list[Any]) -> None:
        if any(abs(v) > _FLOAT32_MAX and v not in (float("inf"), float("-inf")) for v in values):
            raise BadValue("value out of float32 range")


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
