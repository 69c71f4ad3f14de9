"""A table's mapped columns staged beside the plan as Arrow IPC, for shuffled shards to take rows from.

A uniformly shuffled shard holds rows from every part of its table, so read from Parquet each
shard would decode every row group: the table read once per shard. For rows of numbers that is
cheap; for rows that carry files (a Hub export's images) it is the dataset read a hundred times.
There, planning (which reads every batch once anyway, to check it) writes the columns the config
maps, uncompressed, a file per piece of the table; a worker memory-maps them and takes its rows,
touching only their bytes. The files go with the plan folder (``OUT/.shardkit/plan-*``) and are
removed once the build is finished; an OUT in a bucket is built from the Parquet files instead.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from shardkit.pipeline.inputs.formats.input_format import TableBatch, found_at

SUFFIX = ".arrow"
LINES = "\x00line"  # the column of each staged row's number, where the rows are not consecutive (a CSV's lines)


class Stager:
    """Writes one piece's batches, its rows in order from row ``first``, to ``folder``."""

    def __init__(self, folder: str, source: int, first: int) -> None:
        self.path = os.path.join(folder, f"{source}-{first:012d}{SUFFIX}")
        self.folder = folder
        self._writer: Any = None

    def add(self, columns: dict[str, Any], lines: np.ndarray | None = None) -> None:
        import pyarrow as pa

        arrays, names = list(columns.values()), list(columns)
        if lines is not None:
            arrays, names = [*arrays, pa.array(lines, pa.int64())], [*names, LINES]
        batch = pa.RecordBatch.from_arrays(arrays, names=names)
        if self._writer is None:
            os.makedirs(self.folder, exist_ok=True)
            self._writer = pa.ipc.new_file(self.path, batch.schema)
        self._writer.write_batch(batch)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def taken(folder: str, source: int, path: str, numbers: Sequence[int], columns: Sequence[str]) -> TableBatch | None:
    """The rows numbered ``numbers`` of the table ``path`` (source ``source``), in that order, from
    its staged files in ``folder``; None where it has none (a table of numbers, an OUT in a bucket)."""
    import pyarrow as pa

    files = _files(folder, source)
    if not files:
        return None
    wanted = np.asarray(numbers, dtype=np.int64)
    order = np.argsort(wanted, kind="stable")
    ordered = wanted[order]
    parts = []
    for first, name in files:
        try:
            parts += _taken_from(os.path.join(folder, name), first, ordered, list(columns))
        except (OSError, ValueError):  # a copy a power cut left unfinished: the table itself still holds the rows
            return None
    found = sum(len(p) for p in parts)
    if found != len(wanted):
        raise OSError(f"{folder}: the staged rows of {path} hold {found} of the {len(wanted)} rows asked for")
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    table = table.take(pa.array(back))
    return TableBatch(path, 0, {name: table.column(name).combine_chunks() for name in columns})


def _take(batch: Any, first: int, ordered: np.ndarray, columns: list[str], parts: list[Any]) -> int:
    """The rows of ``ordered`` that ``batch`` (its rows from row ``first``, or numbered by a
    column of lines) holds, copied out of it into ``parts``; the next batch's first row."""
    import pyarrow as pa

    if LINES in batch.schema.names:  # rows named by their lines: each found by its number
        lines = np.array(batch.column(LINES))  # a copy: nothing may point into the map
        lo, hi = np.searchsorted(ordered, [lines[0], lines[-1] + 1]) if len(lines) else (0, 0)
        at, hit = found_at(lines, ordered[lo:hi])
        rows = at[hit]
    else:
        lo, hi = np.searchsorted(ordered, [first, first + batch.num_rows])
        rows = ordered[lo:hi] - first
    if len(rows):
        parts.append(pa.Table.from_batches([batch.select(columns)]).take(pa.array(rows)))  # a copy
    return first + int(batch.num_rows)


def _files(folder: str, source: int) -> list[tuple[int, str]]:
    """(first row, file name) of each staged piece of ``source``, in row order."""
    if "://" in folder or not os.path.isdir(folder):
        return []
    prefix = f"{source}-"
    return sorted((int(n[len(prefix) : -len(SUFFIX)]), n) for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(SUFFIX))


def _taken_from(path: str, first: int, ordered: np.ndarray, columns: list[str]) -> list[Any]:
    """The rows numbered ``ordered`` (sorted) that the staged file ``path`` (its rows from row
    ``first``, or numbered by a column of lines) holds, in order. The file is memory-mapped, its
    pages read as rows are taken and let go after each batch: a worker's memory holds one batch's
    pages, however large the table (a shuffled shard takes rows from every part of it)."""
    import pyarrow as pa

    parts: list[Any] = []
    with open(path, "rb") as f:
        # Closed below, not by a with-block: after a failure (a cancelled task, a bad file) the
        # traceback keeps the failed batch, which points into the map, and closing the map then
        # raises BufferError in place of what stopped the read. It goes with its last reference.
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        reader = pa.ipc.open_file(pa.py_buffer(mapped))
        for i in range(reader.num_record_batches):
            first = _take(reader.get_batch(i), first, ordered, columns, parts)
            mapped.madvise(mmap.MADV_DONTNEED)
        del reader  # nothing may point into the map when it closes
        mapped.close()
    return parts
