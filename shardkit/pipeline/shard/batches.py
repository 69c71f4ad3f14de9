"""A shard's records made a batch at a time, where no record needs augmenting: column work.

The record-by-record path (``pipeline.shard.records``) costs tens of microseconds a record in
Python: a row typed into an entry, a dict of features, the Example written value by value. For
rows of numbers and short texts (a table) and for small files passed through, that is all the
work there is. Here a block of the shard's plan lines becomes one Arrow column per feature (a
table's own columns, read back many rows at once; or the entries' values), each feature's kind
turns its column into the columns it writes (``FeatureKind.batch_columns``), and
``formats.example_batch`` encodes and frames every record of the batch at once: the same bytes
as the per-record path, which tests hold it to.

Files (images, bytes) are still read and probed one by one, and a file that is not what it should
be is an entry error as on the other path: the shard stops, or with ``--on-error skip`` the
record is left out and listed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardkit.errors import EntryError
from shardkit.features import columns as arrow_columns
from shardkit.features.base import BadValue, FeatureSpec
from shardkit.formats.example_batch import encode_batch
from shardkit.formats.image_headers import ImageProblem
from shardkit.output import layout
from shardkit.pipeline.config import IDENTITY_COLUMN, Config
from shardkit.pipeline.inputs.formats.input_format import file_name
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan import staged_rows
from shardkit.pipeline.plan.plan_file import PlanSlice, block_entries, column_name, shard_blocks, table_columns
from shardkit.pipeline.shard.fetch import Fetcher
from shardkit.pipeline.shard.fingerprints import Fingerprints, pixels_of
from shardkit.pipeline.shard.stats import Stats, file_label
from shardkit.storage import location
from shardkit.storage.boundary import Boundary

Skipped = list[tuple[str, int, str]]  # (source, line, reason) of entries left out
CHUNK_ROWS = 16384  # records encoded together: a few MB of rows of numbers
FILE_CHUNK_ROWS = 256  # ... where each record holds a file, which may be megabytes, at first:
_NO_RECORDS = pa.array([], pa.large_binary())
CHUNK_BYTES = 8 << 20  # then as many as make about this many bytes (small files: a chunk's fixed costs spread)


@dataclasses.dataclass(frozen=True)
class Block:
    """Encoded records, and what the shard's record keeps of them."""

    encoded: pa.Array  # large_binary: element i is record i's serialized Example
    inputs: list[tuple[str, int]]  # (source, line) of each entry, in order, those left out too
    skipped: Skipped

    @property
    def records(self) -> int:
        return len(self.encoded)


def applies(config: Config, sources: Sequence[PlanSource]) -> bool:
    """Whether a shard of this build is made a batch at a time: one record an entry (nothing
    augmented), every feature's kind able to, and its sources all tables or none."""
    if config.records_per_entry != 1 or (config.augment is not None and config.augment.copies):
        return False
    if not all(spec.kind.batchable(spec) for spec in config.features):
        return False
    return len({source.format.reads_tables for source in sources}) == 1


class BatchMaker:
    """Makes one shard's records a block of plan lines at a time, keeping the manifest's statistics."""

    def __init__(self, config: Config, sources: Sequence[PlanSource], on_error: str, rule: Boundary | None = None) -> None:
        self.config = config
        self.sources = list(sources)
        self.on_error = on_error
        self.stats = Stats(config)
        self.fingerprints: Fingerprints | None = None  # set for --duplicates: a row a record
        for spec in config.features:
            self.stats.lengths.update(spec.kind.initial_lengths(spec))
        self.files = [(i, spec) for i, spec in enumerate(config.features) if spec.kind.reads_file]
        self.fetcher = Fetcher([i for i, _ in self.files], rule)
        self.chunk = FILE_CHUNK_ROWS if self.files else CHUNK_ROWS
        self.tables = bool(self.sources) and self.sources[0].format.reads_tables
        self.columns = table_columns(config, self.sources) if self.tables else []

    def blocks(self, plan_dir: str, part: PlanSlice) -> Iterator[Block]:
        staged = location.join(plan_dir, layout.staged_rows(part.file))  # the table rows planning staged, if any
        for block in shard_blocks(location.join(plan_dir, part.file), part):
            if self.tables and block.count(b"\t\n") == block.count(b"\n"):  # every line a table's row, without a payload
                yield from self._table_blocks(*_table_lines(block), staged)
            else:  # some of a table's rows read row by row (``reads_rows_where_unclean``): each typed as an entry
                yield from self._entry_blocks(
                    [line.split("\t", 3) for line in block.decode("utf-8", "surrogateescape").split("\n")[:-1]], staged
                )

    # -- where the values come from -----------------------------------------------------------

    def _table_blocks(self, positions: np.ndarray, numbers: np.ndarray, staged: str) -> Iterator[Block]:
        """Rows of tables: read back many at a time, each feature's column sliced per chunk."""
        columns = self._table_values(positions, numbers, staged)
        start = 0
        while start < len(positions):
            stop = min(start + self.chunk, len(positions))
            where, lines = positions[start:stop], numbers[start:stop]
            origin = list(zip([self.sources[p].path for p in where.tolist()], lines.tolist(), strict=True))
            values: list[Any] = [
                self._identities(where, lines) if spec.column == IDENTITY_COLUMN else _sliced(column, start, stop)
                for spec, column in zip(self.config.features, columns, strict=True)
            ]
            folders = [self.sources[p].folder for p in where.tolist()] if self.files else None
            identities = [f"{file_name(source)}:{line}" for source, line in origin] if self.fingerprints is not None else []
            yield self._sized(self._encoded(values, origin, folders, identities))
            start = stop

    def _identities(self, positions: np.ndarray, numbers: np.ndarray) -> Any:
        """Each row's identity (``FILE:ROW``, as ``Row.identity`` says it), made in Arrow."""
        import pyarrow as pa
        import pyarrow.compute as pc

        prefixes = pa.array([f"{file_name(s.path)}:".encode("utf-8", "surrogateescape") for s in self.sources], pa.binary())
        rows = pc.cast(pa.array(numbers), pa.string()).cast(pa.binary())
        return pc.binary_join_element_wise(prefixes.take(pa.array(positions)), rows, pa.scalar(b"", pa.binary()))

    def _table_values(self, positions: np.ndarray, numbers: np.ndarray, staged: str) -> list[Any]:
        """Each feature's values for a block's rows, in plan order, however many tables they come
        from: the Arrow column where its kind takes it as it is (one type, no nulls), else each
        value typed as the per-record path types it (a default for a null, a date as a name)."""
        import pyarrow as pa

        parts: list[tuple[np.ndarray, list[Any]]] = []
        for source in np.unique(positions).tolist():
            where = np.flatnonzero(positions == source)
            found, named = self.sources[source], self.columns[source]
            rows = numbers[where].tolist()
            batch = staged_rows.taken(staged, source, found.path, rows, named) if named is not None else None
            batch = batch if batch is not None else found.format.table_at(found.path, rows, named)
            names = found.names or ()  # every column has a name here: planning refused a position past them
            known = [None if s.column == IDENTITY_COLUMN else column_name(s, names, self.config.columns) for s in self.config.features]
            parts.append((where, [None if name is None else batch.columns[name] for name in known]))
        back = np.argsort(np.concatenate([where for where, _ in parts]), kind="stable")
        out: list[Any] = []
        for i, spec in enumerate(self.config.features):
            columns = [p[1][i] for p in parts]
            if spec.column == IDENTITY_COLUMN:
                out.append(None)
                continue
            one_type = len({c.type for c in columns}) == 1
            joined = (columns[0] if len(columns) == 1 else pa.concat_arrays(columns).take(pa.array(back))) if one_type else None
            parsed = spec.kind.from_text(spec, joined) if one_type and not spec.kind.reads_file and arrow_columns.is_text(joined) else None
            if one_type and (spec.kind.reads_file or _native(spec, columns)):
                out.append(joined)
            elif parsed is not None:  # a CSV's texts, read as numbers a column at a time
                out.append(parsed)
            else:  # typed value by value; a file's value is typed with its folder, later
                typed = [v for c in columns for v in _typed(spec, c)]
                out.append([typed[j] for j in back.tolist()])
        return out

    def _entry_blocks(self, fields: list[list[str]], staged: str) -> Iterator[Block]:
        """Rows of other inputs: each typed into an entry (as the per-record path does), then columns."""
        start = 0
        while start < len(fields):
            chunk, start = fields[start : start + self.chunk], start + self.chunk
            entries = list(block_entries(chunk, self.sources, self.config, staged))
            entries = list(self.fetcher.ahead(entries)) if self.files else entries
            values: list[Any] = [[e.values[i] for e in entries] for i in range(len(self.config.features))]
            yield self._sized(self._encoded(values, [(e.source, e.line) for e in entries], None, [e.identity for e in entries]))

    def _sized(self, block: Block) -> Block:
        """``block`` as it is; the chunks after it sized by its records' bytes, where they hold files."""
        if self.files and block.records:
            self.chunk = int(min(CHUNK_ROWS, max(FILE_CHUNK_ROWS, CHUNK_BYTES * block.records // max(block.encoded.nbytes, 1))))
        return block

    # -- records ------------------------------------------------------------------------------

    def _encoded(self, values: list[Any], origin: list[tuple[str, int]], folders: list[str] | None, identities: list[str]) -> Block:
        """The chunk's records from each feature's values (Arrow arrays, or Python lists);
        ``identities``: each entry's, for ``--duplicates``."""
        import pyarrow as pa

        keep, skipped = self._files(values, origin, folders)
        if len(skipped) == len(origin):  # nothing left to encode, or to count
            return Block(_NO_RECORDS, origin, skipped)
        if skipped:
            mask = pa.array(keep)
            values = [v.filter(mask) if isinstance(v, (pa.Array, pa.ChunkedArray)) else _kept(v, keep) for v in values]
        columns: list[tuple[str, str, Any]] = []
        for spec, column in zip(self.config.features, values, strict=True):
            columns += spec.kind.batch_columns(spec, column, self.stats)
        self.stats.statistics.columns(columns, len(origin) - len(skipped))
        encoded = encode_batch(columns, len(origin) - len(skipped))
        if self.fingerprints is not None:
            self._fingerprint(values, encoded, [i for i, kept in zip(identities, keep, strict=True) if kept])
        return Block(encoded, origin, skipped)

    def _fingerprint(self, values: list[Any], encoded: pa.Array, identities: list[str]) -> None:
        """Each kept record's row for ``--duplicates``: its picture (bytes as written, decoded here
        for the hash) or, without one, the record's bytes."""
        assert self.fingerprints is not None
        picture = self.fingerprints.picture
        if picture is None:
            for identity, record in zip(identities, encoded.to_pylist(), strict=True):
                self.fingerprints.add(identity, None, record)
            return
        made = values[self.config.features.index(picture)]
        for identity, value in zip(identities, made, strict=True):
            self.fingerprints.add(identity, pixels_of(value[0]), value[0])

    def _files(self, values: list[Any], origin: list[tuple[str, int]], folders: list[str] | None) -> tuple[list[bool], Skipped]:
        """Each file feature's values made (bytes, stored header) in place; which records are kept."""
        keep = [True] * len(origin)
        skipped: Skipped = []
        for i, spec in self.files:
            given = values[i].to_pylist() if hasattr(values[i], "to_pylist") else values[i]
            loaded: list[Any] = []
            for j, value in enumerate(given):
                try:
                    if folders is not None:  # a table's raw value: typed here, as ``to_entry`` would
                        value = spec.kind.typed(spec, spec.default if value is None else value, folders[j])
                    data = self.fetcher.read(value, spec.key, origin[j][0])
                    loaded.append(_made(spec, data, value))
                except (ImageProblem, BadValue) as exc:
                    reason = str(exc) if isinstance(exc, ImageProblem) else f"{spec.key}: {exc}"
                    if self.on_error != "skip":
                        raise EntryError(origin[j][0], origin[j][1], reason) from None
                    if keep[j]:
                        keep[j] = False
                        skipped.append((origin[j][0], origin[j][1], reason))
                    loaded.append(None)
            values[i] = loaded
        return keep, skipped


def _table_lines(block: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The sources and row numbers of a block of table plan lines (``KEY SOURCE ROW`` and an empty
    payload), parsed in C: a Python split of each line cost more than encoding its record."""
    import pyarrow as pa
    import pyarrow.csv as csv

    read = csv.ReadOptions(column_names=["key", "source", "row", "payload"], use_threads=False, block_size=max(1 << 20, len(block) + 1))
    parse = csv.ParseOptions(delimiter="\t", quote_char=False)
    convert = csv.ConvertOptions(column_types={"source": pa.int64(), "row": pa.int64()}, include_columns=["source", "row"])
    table = csv.read_csv(pa.py_buffer(block), read_options=read, parse_options=parse, convert_options=convert)
    return table.column("source").to_numpy(), table.column("row").to_numpy()


def _kept(values: list[Any], keep: list[bool]) -> list[Any]:
    return [value for value, kept in zip(values, keep, strict=True) if kept]


def _made(spec: FeatureSpec, data: bytes, value: Any) -> Any:
    """A record's file as its kind's ``batch_columns`` takes it; a problem names the feature and
    file (as ``stats.naming`` does: not a context manager, whose cost a tiny file's record felt)."""
    try:
        return spec.kind.batch_file(spec, data, spec.kind.stored(spec, data))
    except ImageProblem as exc:
        raise ImageProblem(f"{spec.key}: {file_label(value)}: {exc}") from None


def _native(spec: FeatureSpec, columns: list[Any]) -> bool:
    return all(c.null_count == 0 and spec.kind.native_column(spec, c) for c in columns)


def _typed(spec: FeatureSpec, column: Any) -> list[Any]:
    """A table column's values as ``typed`` makes them, a null as the feature's default
    (planning let through no null without one); a file's raw value is typed later, with its folder."""
    raws = column.to_pylist()
    if spec.kind.reads_file:
        return list(raws)
    return [spec.kind.typed(spec, spec.default if raw is None else raw, None) for raw in raws]


def _sliced(values: Any, start: int, stop: int) -> Any:
    return values[start:stop] if isinstance(values, list) else values.slice(start, stop - start)
