"""``.parquet`` files, the Hugging Face Hub's exports among them: read by row group, never whole.

A file is cut into pieces of whole row groups for planning. A plan line names a row by its
number (rows count from 1, as lines do) and carries no payload: a worker reads its shard's rows
back, a row group at a time and only the columns its config maps, so no image held in a table
passes through the plan. Columns are named as in the file; a field of a struct column by a
dotted name (``image.path``). The Hub's own schema metadata (the ``huggingface`` key) gives the
default config of an image-classification export: the ``Image`` column's bytes and the
``ClassLabel`` column as class ids with their names.

pyarrow is imported where a Parquet file is read, not for ``--help``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from shardkit.errors import EntryError, ShardkitError, quoted
from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row, TableBatch, file_name, split_name
from shardkit.storage import location

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

BATCH_ROWS = 8192  # rows a batch read in planning, at most ...
BATCH_BYTES = 32 << 20  # ... and about this many bytes of the columns read (a table of images: a few hundred rows)
_SHARD_NAME = re.compile(r"^\d+$")  # the Hub's converted layout: CONFIG/SPLIT/0000.parquet


@dataclasses.dataclass(frozen=True)
class Parquet(InputFormat):
    keeps_names: ClassVar[bool] = True
    reads_tables: ClassVar[bool] = True
    confines_paths: ClassVar[bool] = True  # a path column, the Hub's {bytes, path}: written by another tool

    def split_name(self, path: str) -> str:
        """``train-00000-of-00003.parquet`` -> ``train``; in the Hub's converted layout
        (``default/validation/0000.parquet``) the folder names the split."""
        stem = os.path.splitext(file_name(path))[0]
        if _SHARD_NAME.match(stem):
            return file_name(location.dirname(path))
        return split_name(file_name(path))

    def default_config(self, path: str) -> Mapping[str, Any] | None:
        """A Hub image-classification export (an ``Image`` column, a ``ClassLabel`` column) builds
        as the classic case with no config: the image's bytes untouched, the label as its class id."""
        features = hub_features(path)
        images = [name for name, f in features.items() if f.get("_type") == "Image"]
        labels = [name for name, f in features.items() if f.get("_type") == "ClassLabel"]
        if len(images) != 1 or len(labels) > 1:
            return None
        config: dict[str, Any] = {"image": {"kind": "image", "column": images[0], "encoding": "raw"}}
        if labels:
            config["label"] = {"kind": "class_id", "column": labels[0], "classes": list(features[labels[0]]["names"])}
        return {"features": config}

    def cut(self, path: str, piece_bytes: int) -> list[Piece]:
        """Runs of whole row groups of about ``piece_bytes`` (compressed) each."""
        meta = _file(path).metadata
        pieces: list[Piece] = []
        start = size = 0
        first = 1
        for group in range(meta.num_row_groups):
            size += meta.row_group(group).total_byte_size
            if size >= piece_bytes or group == meta.num_row_groups - 1:
                pieces.append(Piece(path, start, group + 1, first))
                first += sum(meta.row_group(g).num_rows for g in range(start, group + 1))
                start, size = group + 1, 0
        return pieces or [Piece(path)]

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        """Every row of ``piece`` with every column, a batch at a time: values as Python values
        (a struct as a dict), named by column, struct fields by dotted names too."""
        for batch in self.read_tables(piece, None):
            names = tuple(batch.columns)
            values = [column.to_pylist() for column in batch.columns.values()]
            for i, row in enumerate(zip(*values, strict=True)):
                yield Row(batch.source, batch.first + i, row, names)

    def read_tables(self, piece: Piece, columns: Sequence[str] | None) -> Iterator[TableBatch]:
        """``piece``'s rows as column batches of ``columns`` (None: all, struct fields flattened too)."""
        parquet = _file(piece.path)
        groups = list(range(piece.start, parquet.metadata.num_row_groups if piece.stop is None else piece.stop))
        first = piece.first_line
        top = None if columns is None else _top_level(parquet, columns, piece.path)
        batches = parquet.iter_batches(_batch_rows(parquet, top), row_groups=groups, columns=top, use_threads=False)
        while True:
            with _reading(piece.path):  # a damaged page is found only here, past the footer
                batch = next(batches, None)
            if batch is None:
                return
            yield TableBatch(piece.path, first, _columns(batch, columns))
            first += batch.num_rows

    def plan_payload(self, row: Row) -> str:
        return ""  # a worker reads the row back from the file by its number

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        return self.rows_at(source, [line], None)[0]

    def rows_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> list[Row]:
        """The rows numbered ``numbers`` (from 1), in that order, with ``columns`` (None: all)."""
        batch = self.table_at(source, numbers, columns)
        names = tuple(batch.columns)
        values = [column.to_pylist() for column in batch.columns.values()]
        return [Row(source, number, row, names) for number, row in zip(numbers, zip(*values, strict=True), strict=True)]

    def table_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> TableBatch:
        """The rows numbered ``numbers``, in that order, as columns: one row group read at a time
        (only ``columns``), its rows taken, so memory is one group and the rows asked for."""
        import numpy as np
        import pyarrow as pa

        parquet = _file(source)
        starts = _group_starts(source)
        wanted = np.asarray(numbers, dtype=np.int64) - 1
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        if len(ordered) and (ordered[0] < 0 or ordered[-1] >= starts[-1]):
            last = int(ordered[-1]) + 1
            raise ShardkitError(f"{source}: the plan names row {last}, but the file has {starts[-1]} rows: it changed since planning")
        top = None if columns is None else _top_level(parquet, columns, source)
        parts = []
        bounds = np.searchsorted(ordered, starts)
        for group in range(len(starts) - 1):
            lo, hi = bounds[group], bounds[group + 1]
            if lo == hi:
                continue
            with _reading(source):
                table = parquet.read_row_group(group, columns=top, use_threads=False)
            parts.append(table.take(pa.array(ordered[lo:hi] - starts[group])))
        if not parts:
            empty = parquet.schema_arrow.empty_table()
            return TableBatch(source, 0, _columns(empty.select(top) if top is not None else empty, columns))
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return TableBatch(source, 0, _columns(table.take(pa.array(back)), columns))

    def column_names(self, path: str) -> tuple[str, ...]:
        """The file's columns: the top-level ones, then every struct field by its dotted name."""
        return tuple(_flat_names(_file(path).schema_arrow))


def hub_features(path: str) -> dict[str, dict[str, Any]]:
    """The Hub's feature types of a file's columns (``{"label": {"_type": "ClassLabel", "names":
    [...]}}``), from its schema metadata; empty for a file ``datasets`` did not write."""
    metadata = _file(path).schema_arrow.metadata or {}
    raw = metadata.get(b"huggingface")
    if raw is None:
        return {}
    try:
        bounded_json.check(raw)
        document = json.loads(raw)
    except (ValueError, bounded_json.Exceeded) as exc:  # UnicodeDecodeError is a ValueError
        reason = exc.reason if isinstance(exc, bounded_json.Exceeded) else str(exc)
        raise ShardkitError(f"{path}: its Hugging Face metadata (the schema's 'huggingface' key) is not valid JSON: {reason}; "
                            "give a config (-c) to build it without") from None  # fmt: skip
    info = document.get("info") if isinstance(document, dict) else None
    features = info.get("features") if isinstance(info, dict) else None
    found = {k: v for k, v in features.items() if isinstance(v, dict)} if isinstance(features, dict) else {}
    for name, feature in found.items():
        names = feature.get("names")
        if feature.get("_type") == "ClassLabel" and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ShardkitError(f"{path}: its Hugging Face metadata gives the ClassLabel column {quoted(name)} no list of class names; "
                                "give a config (-c) to build it without")  # fmt: skip
    return found


def _flat_names(schema: pa.Schema) -> list[str]:
    import pyarrow as pa

    names = list(schema.names)
    stack = [(f.name, f.type) for f in schema]
    while stack:
        prefix, kind = stack.pop(0)
        if pa.types.is_struct(kind):
            for child in kind:
                name = f"{prefix}.{child.name}"
                names.append(name)
                stack.append((name, child.type))
    return names


def _batch_rows(parquet: pq.ParquetFile, top: Sequence[str] | None) -> int:
    """Rows a batch of the columns ``top`` (None: all) holds about ``BATCH_BYTES`` in, told by the
    first row group's uncompressed sizes."""
    meta = parquet.metadata
    if meta.num_row_groups == 0 or meta.row_group(0).num_rows == 0:
        return BATCH_ROWS
    group = meta.row_group(0)
    wanted = None if top is None else set(top)
    size = 0
    for i in range(group.num_columns):
        column = group.column(i)
        if wanted is None or column.path_in_schema.split(".", 1)[0] in wanted:
            size += column.total_uncompressed_size
    return int(max(16, min(BATCH_ROWS, BATCH_BYTES * group.num_rows // max(size, 1))))


def _top_level(parquet: pq.ParquetFile, columns: Sequence[str], source: str) -> list[str]:
    """The top-level columns that hold ``columns``, in the file's order."""
    names = parquet.schema_arrow.names
    known = set(_flat_names(parquet.schema_arrow))
    for column in columns:
        if column not in known:
            raise ShardkitError(f"{source}: no column {column!r} (columns: {', '.join(names)})")
    wanted = {c if c in names else c.split(".", 1)[0] for c in columns}
    return [n for n in names if n in wanted]


def _columns(batch: pa.RecordBatch | pa.Table, columns: Sequence[str] | None) -> dict[str, pa.Array]:
    """``columns`` of ``batch`` (None: all, and every struct field by its dotted name), as arrays."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def array(name: str) -> pa.Array:
        if name in batch.schema.names:
            found = batch.column(name)
        else:
            head, *fields = name.split(".")
            found = batch.column(head)
            for field in fields:
                found = pc.struct_field(found, field)
        found = found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
        return found.dictionary_decode() if pa.types.is_dictionary(found.type) else found  # pandas' categoricals

    return {name: array(name) for name in (_flat_names(batch.schema) if columns is None else columns)}


def _file(path: str) -> pq.ParquetFile:
    """The file opened once per process and version (its footer read once); a store's through
    fsspec. Not shared with a forked child (a store's file object needs its own process's event
    loop), nor with a later build after the file was rewritten (a notebook's next run)."""
    version = None
    if not location.is_url(path):
        with contextlib.suppress(OSError):
            found = os.stat(location.local_path(path))
            version = (found.st_mtime_ns, found.st_size, found.st_ino)
    return _opened(path, os.getpid(), version)


@functools.lru_cache(maxsize=16)
def _opened(path: str, pid: int, version: tuple[int, int, int] | None) -> pq.ParquetFile:
    import pyarrow.parquet as pq

    try:
        if location.is_url(path):
            return pq.ParquetFile(location.open_read(path))
        return pq.ParquetFile(location.local_path(path), memory_map=False)
    except FileNotFoundError:
        raise ShardkitError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid (a ValueError): not a Parquet file
        raise ShardkitError(f"{path}: cannot read as Parquet: {exc}") from None


@contextlib.contextmanager
def _reading(path: str) -> Iterator[None]:
    """pyarrow's errors reading a file's pages (ArrowInvalid, ArrowNotImplementedError, ...; a
    failed read) -> one line naming the file."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as exc:
        raise ShardkitError(f"{path}: cannot read as Parquet: {exc}") from None


def _group_starts(path: str) -> list[int]:
    """The first row index of every row group, and the row count last."""
    meta = _file(path).metadata
    starts = [0]
    for group in range(meta.num_row_groups):
        starts.append(starts[-1] + meta.row_group(group).num_rows)
    return starts


PARQUET = Parquet("parquet", (".parquet",))
