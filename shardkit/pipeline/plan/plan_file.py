"""The plan on disk: one file per split, its entries in shard order, one line each.

``OUT/.shardkit/plan-<fingerprint>/<split>.plan`` holds ``KEY\\tSOURCE\\tLINE\\tROW`` lines:
the entry's shuffle key (hex), the position of its input among the split's sources, its line
number, and the row as its source's format writes it (``InputFormat.plan_payload``: a ``.txt``
or ``.jsonl`` line verbatim; other rows as a JSON list). A task carries a ``PlanSlice``, the
byte range of its shard's lines, and the worker reads and types those entries itself: no process
ever holds a split's entries in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence

from shardkit.features.base import FeatureSpec
from shardkit.output import layout
from shardkit.pipeline.config import IDENTITY_COLUMN, Config
from shardkit.pipeline.inputs.entries import Entry, to_entry
from shardkit.pipeline.inputs.formats.input_format import Row, rows_of
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan import staged_rows
from shardkit.pipeline.plan.arithmetic import shard_bounds
from shardkit.storage import location
from shardkit.storage.atomic import flush_to_disk

BLOCK_BYTES = 8 * 1024 * 1024  # a worker reads its shard's plan lines in blocks of this size


@dataclasses.dataclass(frozen=True)
class PlanSlice:
    """The lines of one shard: ``file`` (relative to ``.shardkit/``), bytes ``start:stop``."""

    file: str
    start: int
    stop: int
    entries: int


def encode_line(key: bytes, source: int, row: Row, payload: str) -> bytes:
    """``row``'s plan line; ``payload``, its ``ROW`` field, as the source's format writes it."""
    return f"{key.hex()}\t{source}\t{row.line}\t{payload}".encode("utf-8", "surrogateescape")


def read_entries(plan_dir: str, part: PlanSlice, sources: Sequence[PlanSource], config: Config) -> Iterator[Entry]:
    """The entries of one shard, typed and with paths resolved, in plan order."""
    staged = location.join(plan_dir, layout.staged_rows(part.file))
    for lines in shard_lines(location.join(plan_dir, part.file), part):
        yield from block_entries([line.decode("utf-8", "surrogateescape").split("\t", 3) for line in lines], sources, config, staged)


def block_entries(fields: list[list[str]], sources: Sequence[PlanSource], config: Config, staged: str) -> Iterator[Entry]:
    """The entries of a block of plan lines (split into their fields), in order. A table's row
    whose line keeps no payload is read back from the table, many at a time; every other row
    (of a table too, where its format read it row by row: ``reads_rows_where_unclean``) from its
    payload."""
    # Each source's format reads its rows back, looked up once a block, not once a line.
    readers = [(s.format.plan_row, s.path, s.names, s.folder) for s in sources]
    tables = {i for i, s in enumerate(sources) if s.format.reads_tables}
    read = _table_rows(fields, tables, sources, config, staged) if tables else {}
    for _, position, number, payload in fields:
        source = int(position)
        if source in tables and not payload:
            row = read[source][int(number)]
        else:
            plan_row, path, names, _ = readers[source]
            row = plan_row(path, names, int(number), payload)
        yield to_entry(row, config, readers[source][3])


def _table_rows(
    fields: list[list[str]], tables: set[int], sources: Sequence[PlanSource], config: Config, staged: str
) -> dict[int, dict[int, Row]]:
    """The rows of a block of plan lines whose sources are tables, read back many at a time (from
    the rows staged for the shards, where planning staged them)."""
    wanted: dict[int, list[int]] = {}
    for _, position, number, payload in fields:
        if int(position) in tables and not payload:
            wanted.setdefault(int(position), []).append(int(number))
    columns = table_columns(config, sources)
    read = {}
    for source, numbers in wanted.items():
        found, named = sources[source], columns[source]
        batch = staged_rows.taken(staged, source, found.path, numbers, named) if named is not None else None
        if batch is None:
            rows = found.format.rows_at(found.path, numbers, named)
        else:
            rows = rows_of(batch, numbers, found.names or tuple(batch.columns), found.format.keeps_names)
        read[source] = {row.line: row for row in rows}
    return read


def column_name(spec: FeatureSpec, names: Sequence[str], columns: Sequence[str] | None = None) -> str | None:
    """The table column ``spec`` reads, by name (a position indexes ``names``; so does a name
    the config's ``columns:`` list gives a ``.txt`` position); None where a position has no name."""
    column = spec.column
    if isinstance(column, str) and columns and column in columns and column not in names:
        column = list(columns).index(column)
    if isinstance(column, str):
        return column
    return names[column] if column < len(names) else None


def table_columns(config: Config, sources: Sequence[PlanSource]) -> list[list[str] | None]:
    """Per source, the columns the config reads of it, by name; None where a position has no
    name: all columns, for the row's own check to report."""
    out: list[list[str] | None] = []
    for source in sources:
        named = [column_name(spec, source.names or (), config.columns) for spec in config.features if spec.column != IDENTITY_COLUMN]
        out.append(None if None in named else list(dict.fromkeys(n for n in named if n is not None)))
    return out


def shard_lines(path: str, part: PlanSlice) -> Iterator[list[bytes]]:
    """The lines of ``part``, a block at a time (``shard_blocks``)."""
    for block in shard_blocks(path, part):
        lines = block.split(b"\n")
        lines.pop()  # after the block's last newline
        yield lines


def shard_blocks(path: str, part: PlanSlice) -> Iterator[bytes]:
    """The lines of ``part`` as blocks of whole lines, each ending with a newline, read
    ``BLOCK_BYTES`` at a time (in a bucket: a ranged read each). Not the slice at once: a shard of
    100,000 small images whose rows carry polygons (COCO) has a slice of hundreds of MB."""
    rest = b""
    for start in range(part.start, part.stop, BLOCK_BYTES):
        stop = min(part.stop, start + BLOCK_BYTES)
        block = rest + location.read_bytes(path, start, stop)
        if len(block) != len(rest) + stop - start:
            raise OSError(f"{part.file}: the plan file is shorter than this build's state says")
        end = block.rfind(b"\n") + 1  # a line the next block ends; nothing after the slice's last newline
        rest = block[end:]
        if end:
            yield block[:end]


def write_plan(path: str, buckets: Iterable[list[bytes]], num_entries: int, per_shard: int, durable: bool = True) -> list[list[int]]:
    """Write the ordered lines to ``path`` (flushed to disk when ``durable``); returns each
    shard's ``[start, stop, entries]``."""
    bounds = shard_bounds(num_entries, per_shard)
    shards: list[list[int]] = []
    offset = seen = 0  # bytes written, lines written
    with open(path, "wb") as f:
        for lines in buckets:
            first, seen = seen, seen + len(lines)
            done = 0  # lines of this bucket already counted into offset
            while len(shards) < len(bounds) and bounds[len(shards)][1] <= seen:  # a shard ends in this bucket
                a, b = bounds[len(shards)]
                inside = b - first
                offset += sum(map(len, lines[done:inside])) + inside - done
                shards.append([offset, b - a])
                done = inside
            offset += sum(map(len, lines[done:])) + len(lines) - done
            if lines:
                f.write(b"\n".join(lines))
                f.write(b"\n")
        if durable:
            f.flush()
            flush_to_disk(f.fileno())
    if seen != num_entries:
        raise AssertionError(f"the plan has {seen} lines, {num_entries} were counted")
    starts = [0, *(stop for stop, _ in shards[:-1])] if shards else []
    return [[start, stop, count] for start, (stop, count) in zip(starts, shards, strict=True)]
