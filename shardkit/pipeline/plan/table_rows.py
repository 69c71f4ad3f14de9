"""A table's rows planned a column batch at a time (Parquet): no Python work per value.

Each feature's kind checks its whole column (``FeatureKind.column_problems``: screened in NumPy,
the few suspect values typed one by one for their message), nulls are bad input unless the
feature gives a default, open class lists collect each column's distinct names, keys are
computed for the batch at once (``arithmetic.table_keys``), and the plan lines, which name rows
by number and carry no payload, go to the spool a bucket at a time. A bad row is reported as the
per-row path reports it: its file, its row number (from 1) and the first feature that refuses it.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from shardkit.errors import ConfigError, EntryError
from shardkit.features import columns as arrow_columns
from shardkit.features.base import FeatureSpec
from shardkit.pipeline.config import IDENTITY_COLUMN, Config
from shardkit.pipeline.inputs.entries import null_reason
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row, file_name
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan.arithmetic import identity_keys, table_keys
from shardkit.pipeline.plan.plan_file import column_name
from shardkit.pipeline.plan.spool import Spool
from shardkit.pipeline.plan.staged_rows import Stager

Sample = list[tuple[int, tuple[int, int], int, Row]]  # the planner's: (-key, tiebreak, source, row)


@dataclasses.dataclass
class TablesPlanned:
    """What planning a table's pieces saw besides the lines spooled."""

    sample: Sample
    classes: dict[str, set[str]]
    errors: list[EntryError]
    names: dict[int, tuple[str, ...]]  # source position -> its columns


def plan_tables(
    pieces: Sequence[Piece],
    sources: Sequence[PlanSource],
    config: Config,
    spool: Spool,
    seed: int,
    on_error: str,
    part: int,
    sample_size: int,
    progress: Callable[[int], None] | None = None,
    stage: str | None = None,
    by_rows: Callable[[Iterable[Row | EntryError], TablesPlanned, set[str]], None] | None = None,
) -> TablesPlanned:
    """Check, key and spool the rows of ``pieces`` (each of a table source); ``part`` tells this
    pass's sample apart from other pieces'. With ``on_error`` "fail" the first bad row raises.
    ``stage``: the folder the mapped columns are staged in for the shards (``plan.staged_rows``).
    ``by_rows``: plans rows read one by one into what was found (``reads_rows_where_unclean``),
    checking that the file's first row has every column the config names (``checked_rows``): a
    first row read as a table has them."""
    position = {s.path: i for i, s in enumerate(sources)}
    found = TablesPlanned([], config.open_classes(), [], {})
    for piece in pieces:
        source = position[piece.path]
        table = sources[source].format
        batches: Iterable[Any]
        checks: list[tuple[FeatureSpec, str]] = []
        if table.reads_rows_where_unclean:
            types = _json_types(config)
            if types is None or stage is None or by_rows is None:  # a column by position; a bucket's OUT (nothing staged)
                found.names.setdefault(source, ())
                batches = [piece]
            else:
                checks = _checks(config, found.names.setdefault(source, tuple(types)), piece.path)
                batches = table.read_blocks(piece, types)
        else:
            if source not in found.names:  # a file's header (or first row) read once, not once a piece
                found.names[source] = table.column_names(piece.path)
            names = found.names[source]
            if not names and not table.keeps_names:  # a .txt file of no data line: nothing to check or plan
                continue
            checks = _checks(config, names, piece.path)
            batches = table.read_tables(piece, list(dict.fromkeys(column for _, column in checks)))
        names = found.names[source]
        stager = Stager(stage, source, piece.first_line) if stage is not None else None
        checked = set() if piece.start == 0 else {piece.path}  # the file's first row is in this piece, or not
        try:
            for batch in batches:
                if isinstance(batch, Piece):  # a block Arrow cannot read as Python does: its rows one by one
                    by_rows(table.read_rows(batch), found, checked)  # type: ignore[misc]
                    continue
                checked.add(piece.path)
                if stager is not None:
                    stager.add(batch.columns, batch.lines)
                _plan_batch(batch, checks, found, spool, seed, on_error, part, source, names, sample_size, progress, table)
        finally:
            if stager is not None:
                stager.close()
    return found


def _plan_batch(
    batch: Any,
    checks: list[tuple[FeatureSpec, str]],
    found: TablesPlanned,
    spool: Spool,
    seed: int,
    on_error: str,
    part: int,
    source: int,
    names: tuple[str, ...],
    sample_size: int,
    progress: Callable[[int], None] | None,
    table: InputFormat,
) -> None:
    """One batch of a piece (of a file of the format ``table``): checked, its class names
    collected, keyed, spooled, sampled."""
    bad = _problems(batch.columns, checks)
    rows = np.arange(batch.rows, dtype=np.int64)
    lines = batch.numbers()
    if bad or batch.errors:
        errors = sorted([EntryError(batch.source, int(lines[i]), bad[i]) for i in bad] + list(batch.errors), key=lambda e: e.line)
        if on_error != "skip":
            raise errors[0]
        found.errors += errors
        rows = np.setdiff1d(rows, np.fromiter(bad, dtype=np.int64, count=len(bad)))
    for spec, column in checks:
        if spec.key in found.classes:
            values = batch.columns[column]
            found.classes[spec.key] |= spec.kind.column_class_names(spec, values.take(rows) if bad else values)
    numbers = lines[rows]
    keys = identity_keys(seed, source, file_name(batch.source), numbers) if table.keys_by_identity else table_keys(seed, source, numbers)
    _spool(spool, keys, source, numbers)
    _sample(found.sample, keys, rows, numbers, batch, names, table.keeps_names, part, source, sample_size)
    if progress is not None:
        progress(len(rows))


def _json_types(config: Config) -> dict[str, str] | None:
    """Each mapped column's Arrow type, as its feature's kind reads it from JSON (``json_type``);
    None where a column is named by position, two features read one column as different types,
    or a kind's values are read row by row."""
    types: dict[str, str] = {}
    for spec in config.features:
        if spec.column == IDENTITY_COLUMN:
            continue
        kind = spec.kind.json_type if spec.kind.batchable(spec) else None
        if kind is None or not isinstance(spec.column, str) or types.setdefault(spec.column, kind) != kind:
            return None
    return types


def _checks(config: Config, names: tuple[str, ...], source: str) -> list[tuple[FeatureSpec, str]]:
    """Each feature read from the table, with the column it reads by name."""
    checks = []
    for spec in config.features:
        if spec.column == IDENTITY_COLUMN:
            continue
        column = column_name(spec, names, config.columns)
        if column is None or column not in names:
            reason = f"no column {spec.column!r} (columns: {', '.join(n for n in names if '.' not in n)})"
            raise ConfigError(f"features.{spec.key}.column", f"{reason} in {source}", config.source)
        checks.append((spec, column))
    return checks


def _problems(columns: dict[str, Any], checks: list[tuple[FeatureSpec, str]]) -> dict[int, str]:
    """Row index -> why the first feature (in config order) that refuses the row refuses it."""
    bad: dict[int, str] = {}
    for spec, column in checks:
        values = columns[column]
        if spec.default is None and values.null_count:
            for i in np.flatnonzero(arrow_columns.nulls(values)).tolist():
                bad.setdefault(i, f"{spec.key}: {null_reason(spec)}")
        for i, reason in spec.kind.column_problems(spec, values):
            bad.setdefault(i, f"{spec.key}: {reason}")
    return bad


def _spool(spool: Spool, keys: np.ndarray, source: int, numbers: np.ndarray) -> None:
    """The rows' plan lines (``KEY SOURCE ROW`` and an empty payload), a bucket at a time, made
    in NumPy and Arrow: formatting a line in Python cost more than planning its row."""
    if spool.sort:
        order = np.argsort(keys, kind="stable")
        keys, numbers = keys[order], numbers[order]
    data, ends = _plan_lines(keys, source, numbers)
    if not spool.sort:
        spool.add_lines(data, len(keys), 0)
        return
    buckets = (keys >> np.uint64(56)).astype(np.int64)
    edges = np.flatnonzero(np.diff(buckets)) + 1
    for start, stop in zip([0, *edges.tolist()], [*edges.tolist(), len(keys)], strict=True):
        if stop > start:
            spool.add_lines(data[ends[start] : ends[stop]], stop - start, int(buckets[start]))


_HEX = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)


def _plan_lines(keys: np.ndarray, source: int, numbers: np.ndarray) -> tuple[memoryview, list[int]]:
    """``KEY\\tSOURCE\\tROW\\t\\n`` for each row, end to end, and where each line starts (and the last ends)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(keys)
    hexed = _HEX[keys.astype(">u8").view(np.uint8).reshape(count, 8)].reshape(count, 16)
    keys_text = pa.StringArray.from_buffers(count, pa.py_buffer(np.arange(0, 16 * count + 1, 16, dtype=np.int32)), pa.py_buffer(hexed))
    rows = pc.cast(pa.array(numbers, pa.int64()), pa.string())
    lines = pc.binary_join_element_wise(keys_text, pa.scalar(f"\t{source}\t"), rows, pa.scalar("\t\n"), "")
    _, offsets, data = lines.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)[: count + 1]
    start = int(bounds[0]) if count else 0
    return (memoryview(data)[start : int(bounds[-1])] if count else memoryview(b"")), (bounds - start).tolist()


def _sample(
    sample: Sample,
    keys: np.ndarray,
    rows: np.ndarray,
    numbers: np.ndarray,
    batch: Any,
    names: tuple[str, ...],
    named: bool,
    part: int,
    source: int,
    size: int,
) -> None:
    """Keep the ``size`` smallest keys' rows (for the shard size), as the per-row path does;
    ``named``: whether a row carries its columns' names (not a ``.txt`` row's)."""
    if not len(keys):
        return
    smallest = np.argsort(keys, kind="stable")[:size]
    chosen = rows[smallest]
    values = {name: column.take(chosen).to_pylist() for name, column in batch.columns.items()}
    for j, (key, number) in enumerate(zip(keys[smallest].tolist(), numbers[smallest].tolist(), strict=True)):
        rank = -int(key)
        if len(sample) >= size and rank <= sample[0][0]:
            continue
        found = Row(batch.source, number, tuple(values[n][j] if n in values else None for n in names), names if named else None)
        item = (rank, (part, number), source, found)
        if len(sample) < size:
            heapq.heappush(sample, item)
        else:
            heapq.heapreplace(sample, item)
