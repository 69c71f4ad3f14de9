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

import functools
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
    try:
        tables = [(first, _mapped(os.path.join(folder, name), os.getpid())) for first, name in files]
    except (OSError, ValueError):  # a copy a power cut left unfinished: the table itself still holds the rows
        return None
    for first, table in tables:
        if LINES in table.column_names:  # rows named by their lines: each found by its number
            at, hit = found_at(table.column(LINES).to_numpy(), ordered)
            if hit.any():
                parts.append(table.select(list(columns)).take(pa.array(at[hit])))
            continue
        lo, hi = np.searchsorted(ordered, [first, first + table.num_rows])
        if hi > lo:
            parts.append(table.select(list(columns)).take(pa.array(ordered[lo:hi] - first)))
    found = sum(len(p) for p in parts)
    if found != len(wanted):
        raise OSError(f"{folder}: the staged rows of {path} hold {found} of the {len(wanted)} rows asked for")
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    table = table.take(pa.array(back))
    return TableBatch(path, 0, {name: table.column(name).combine_chunks() for name in columns})


def _files(folder: str, source: int) -> list[tuple[int, str]]:
    """(first row, file name) of each staged piece of ``source``, in row order."""
    if "://" in folder or not os.path.isdir(folder):
        return []
    prefix = f"{source}-"
    return sorted((int(n[len(prefix) : -len(SUFFIX)]), n) for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(SUFFIX))


@functools.lru_cache(maxsize=64)
def _mapped(path: str, pid: int) -> Any:
    """A staged file, memory-mapped once per process: its pages are read as rows are taken."""
    import pyarrow as pa

    return pa.ipc.open_file(pa.memory_map(path)).read_all()  # the map stays open while the table is used
