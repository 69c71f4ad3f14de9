"""Features whose value is a file: where a path in an input resolves, and ``bytes``, a file's bytes stored as they are."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from shardkit.features import columns
from shardkit.features.base import BadValue, Encoder, FeatureKind, Features, FeatureSpec, Loaded, RecordStats
from shardkit.storage import location

_IMAGE_STRUCT = ("bytes", "path")  # the fields of Hugging Face's Image struct, in this order


def resolve_path(raw: Any, folder: str | None) -> str:
    """A file path as an input gives it, joined to ``folder`` (absolute: the index file's own), or
    left as written when ``folder`` is None. Relative paths resolve against the index file's
    folder, not the working directory."""
    if not isinstance(raw, str) or not raw:
        raise BadValue(f"expected a file path, got {raw!r}")
    if "\0" in raw:  # no file has one in its name, and os refuses it with a ValueError
        raise BadValue(f"{raw!r} is not a file path (it holds a NUL byte)")
    if folder is None:
        return raw
    if "://" in raw or "://" in folder:  # a URL, or a path in an index file in a bucket
        return _resolve_url(folder, raw)
    path = raw if raw[0] == "/" else f"{folder}/{raw}"
    return os.path.normpath(path) if "/." in path or "//" in path or path[-1] == "/" else path


def _resolve_url(folder: str, raw: str) -> str:
    """A file path where a URL is involved: a URL as written; a relative path against a bucket
    folder; a ``file://`` path as the local path it names."""
    if location.is_url(raw):
        return raw
    path = location.local_path(raw)
    if not path:
        raise BadValue(f"expected a file path, got {raw!r}")
    if location.is_url(folder):
        return location.resolve(folder, path)
    return os.path.normpath(path if path[0] == "/" else f"{folder}/{path}")


class FileKind(FeatureKind):
    """A feature read from the file its input value names."""

    reads_file: ClassVar[bool] = True
    plain_text_ok: ClassVar[bool] = True  # any word names a path; the worker finds out whether it exists
    statistics_role: ClassVar[str | None] = "blob"
    wire: ClassVar[str] = "bytes"
    schema_dtype: ClassVar[str] = "bytes"
    json_type: ClassVar[str | None] = "string"  # a path

    def column_problems(self, spec: FeatureSpec, column: Any, rows: Any = None) -> list[tuple[int, str]]:
        """Paths, bytes or the ``{bytes, path}`` struct: only empty values are suspect (whether a
        path names a file, the worker finds out); never a copy of a table's image bytes."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = column.type
        if rows is not None:
            return super().column_problems(spec, column, rows)
        if pa.types.is_struct(kind) and {kind.field(i).name for i in range(kind.num_fields)} >= set(_IMAGE_STRUCT):
            data, path = (pc.struct_field(column, field) for field in _IMAGE_STRUCT)
            empty = pc.or_kleene(pc.equal(pc.binary_length(data), 0), pc.and_kleene(data.is_null(), pc.equal(pc.binary_length(path), 0)))
            missing = pc.and_(data.is_null(), path.is_null())
            suspect = pc.or_(empty.fill_null(False), missing).to_numpy(zero_copy_only=False) & ~columns.nulls(column)
        elif columns.is_text(column) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            suspect = pc.equal(pc.binary_length(column), 0).fill_null(False).to_numpy(zero_copy_only=False)
        else:
            return super().column_problems(spec, column)
        return super().column_problems(spec, column, np.flatnonzero(suspect)) if suspect.any() else []

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        """A path, resolved; or the file's bytes where a table holds them: a binary value, or the
        Hugging Face ``Image`` struct ``{bytes, path}`` (its bytes, else its path)."""
        if isinstance(raw, (bytes, bytearray, memoryview)):
            if not raw:
                raise BadValue("expected a file's bytes, got an empty value")
            return bytes(raw)
        if isinstance(raw, dict) and raw.keys() & _IMAGE_STRUCT:
            data, path = (raw.get(field) for field in _IMAGE_STRUCT)
            return self.typed(spec, data if data is not None else path, folder)
        return resolve_path(raw, folder)


class BytesKind(FileKind):
    """``bytes``: a file's bytes, stored untouched (no check of what they are)."""

    name: ClassVar[str] = "bytes"

    def batchable(self, spec: FeatureSpec) -> bool:
        return True

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        import pyarrow as pa

        return [(spec.key, "bytes", pa.array(values, pa.large_binary()))]

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key = spec.key

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            out[key] = ("bytes", [loaded.files[key]])

        return encode
