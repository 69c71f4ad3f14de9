"""``string``: UTF-8 text, one value per record (also the ``source_id`` shardkit adds), or a list
of them where the input holds a list (a table's ``list<string>``), its lengths in the schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from shardkit.errors import printable
from shardkit.features import columns
from shardkit.features.base import TFDS, BadValue, Encoder, FeatureKind, Features, FeatureSpec, Loaded, RecordStats


class StringKind(FeatureKind):
    name: ClassVar[str] = "string"
    statistics_role: ClassVar[str | None] = "text"
    wire: ClassVar[str] = "bytes"
    schema_dtype: ClassVar[str] = "string"
    label_role: ClassVar[str] = "by_name"
    json_type: ClassVar[str | None] = "string"

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        """A text as UTF-8 bytes; a list of texts as a list of them."""
        if isinstance(raw, list):
            return [self._text(item) for item in raw]
        return self._text(raw)

    @staticmethod
    def _text(raw: Any) -> bytes:
        if isinstance(raw, (dict, list)) or raw is None:
            raise BadValue(f"expected text, got {raw!r}")
        if isinstance(raw, bytes):  # a table's binary column
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BadValue("text is not valid UTF-8") from None
            return raw
        text = str(raw)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # os hands a file name's bytes that are not UTF-8 over as lone surrogates
            raise BadValue(f"{printable(text)} is not UTF-8 text (a file name's bytes, most often): rename the file") from None

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """Arrow's strings are valid UTF-8 already: only a list's null items are suspect."""
        if rows is not None or not (columns.is_text(column) or (columns.is_list(column) and columns.is_text(column.flatten()))):
            return super().column_problems(spec, column, rows)
        values, parents = columns.values_and_rows(column)
        suspect = columns.nulls(values) if columns.is_list(column) else np.zeros(len(values), dtype=bool)
        return super().column_problems(spec, column, columns.suspect_rows(parents, suspect)) if suspect.any() else []

    def batchable(self, spec: FeatureSpec) -> bool:
        return True

    def native_column(self, spec: FeatureSpec, column: Any) -> bool:
        import pyarrow as pa

        if type(self).typed is not StringKind.typed:  # a kind made from this one that types texts its own way
            return False
        plain = columns.is_text(column) or pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
        return plain or (columns.is_list(column) and columns.is_text(column.flatten()))

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        """Texts as they are (Arrow's strings are UTF-8); typed values (bytes, or lists of them:
        a single text then is a list of one, as a record stores it) as a binary column."""
        import pyarrow as pa

        if isinstance(values, list):
            if any(isinstance(v, list) for v in values):
                values = pa.array([v if isinstance(v, list) else [v] for v in values], pa.large_list(pa.large_binary()))
            else:
                values = pa.array(values, pa.large_binary())
        stats.length_range(spec.key, *columns.list_lengths(values))
        return [(spec.key, "bytes", values)]

    def initial_lengths(self, spec: FeatureSpec) -> dict[str, tuple[int, int]]:
        return {}  # one text, or a list of any length: the records tell

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key = spec.key

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            values = value if isinstance(value, list) else [value]
            out[key] = ("bytes", values)
            stats.length(key, len(values))

        return encode

    def tfds_feature(self, entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        return {"pythonClassName": TFDS + "text_feature.Text", "text": {}}

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        texts = [v.decode("utf-8") for v in values]
        return texts[0] if entry.get("shape") == [] and len(texts) == 1 else texts

    def python_single(self, entry: Mapping[str, Any], decode_images: bool) -> Literal["value", "text"] | None:
        return "text" if entry.get("shape") == [] else None
