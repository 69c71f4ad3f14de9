"""Many ``tf.train.Example`` records decoded at once into columns: per key, the records holding it,
how many values each holds, and the values, with NumPy over all records together.

Each step of the walk reads one map entry of every record still in its features, so a batch
costs a few dozen array operations per feature, not a Python call per value. The layout read is
the one TensorFlow and shardkit write: each entry a key then a Feature holding one list, numbers
packed. A record laid out any other way (unpacked numbers, an empty Feature, a key twice, a key
given as another type than in the other records) or not an Example at all is left to the caller
(``ExampleColumns.by_hand``), which decodes it with ``example_proto.decode_example``: its values
and its errors are always that function's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]
Bytes = npt.NDArray[np.uint8]

_WIRES = {0x0A: "bytes", 0x12: "float", 0x1A: "int64"}  # Feature's oneof: field 1, 2, 3, length-delimited
_LONGEST_KEY = 256  # longer keys go by hand: a schema's keys are short


@dataclasses.dataclass(frozen=True)
class Column:
    """One key's values: ``rows`` (record numbers in the batch) hold it, ``counts[i]`` values each."""

    wire: str
    rows: Ints
    counts: Ints
    values: pa.Array  # int64, float32 or large_binary; row i's are the next counts[i]

    def lists(self) -> pa.LargeListArray:
        offsets = np.zeros(len(self.counts) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=offsets[1:])
        return pa.LargeListArray.from_arrays(pa.array(offsets), self.values)


@dataclasses.dataclass(frozen=True)
class ExampleColumns:
    columns: dict[str, Column]
    by_hand: Ints  # record numbers left to ``decode_example``


def decode_columns(buf: Bytes, starts: Ints, lengths: Ints) -> ExampleColumns:
    """Records ``buf[starts[i] : starts[i] + lengths[i]]``, as columns."""
    walk = _Walk(buf, len(starts))
    ends = starts + lengths
    rows = np.flatnonzero(lengths > 0)  # an empty record is an Example without features
    at = starts[rows]
    size, inside, ok = walk.varint(at + 1, ends[rows])
    ok &= (walk.byte(at) == 0x0A) & (inside + size == ends[rows])
    walk.refuse(rows[~ok])
    rows, at, end = rows[ok], inside[ok], ends[rows][ok]
    going = at < end  # Features with no entry: nothing more to read
    rows, at, end = rows[going], at[going], end[going]
    while len(rows):
        rows, at, end = walk.entry(rows, at, end)
    return walk.columns()


class _Walk:
    def __init__(self, buf: Bytes, records: int) -> None:
        self.buf = buf
        self.last = max(len(buf) - 1, 0)
        self.bad = np.zeros(records, dtype=np.bool_)
        self.keys: dict[bytes, int] = {}
        self.found: list[tuple[Ints, Ints, Ints, Ints, Ints]] = []  # (rows, key ids, wire tags, list starts, list ends)

    def byte(self, at: Ints) -> Ints:
        return self.buf[np.minimum(at, self.last)].astype(np.int64) if len(self.buf) else np.zeros(len(at), dtype=np.int64)

    def refuse(self, rows: Ints) -> None:
        self.bad[rows] = True

    def varint(self, at: Ints, end: Ints, most: int = 5) -> tuple[Ints, Ints, Flags]:
        """The varint at each ``at`` (of at most ``most`` bytes, before ``end``): value, where it ends, whether it is one."""
        value = np.zeros(len(at), dtype=np.int64)
        after = at.copy()
        done = np.zeros(len(at), dtype=np.bool_)
        for i in range(most):
            live = ~done & (at + i < end)
            if not live.any():
                break
            b = self.byte(at + i)
            value[live] |= (b[live] & 0x7F) << (7 * i)
            stop = live & (b < 0x80)
            after[stop] = at[stop] + i + 1
            done |= stop
        return value, after, done

    def entry(self, rows: Ints, at: Ints, end: Ints) -> tuple[Ints, Ints, Ints]:
        """One map entry {1: key, 2: Feature{N: list}} of each record: noted, and where each goes on."""
        size, inside, ok = self.varint(at + 1, end)
        ok &= self.byte(at) == 0x0A
        entry_end = inside + size
        ok &= entry_end <= end
        key_size, key_at, good = self.varint(inside + 1, entry_end)
        ok &= good & (self.byte(inside) == 0x0A) & (key_size <= _LONGEST_KEY)
        key_end = key_at + key_size
        feature_size, feature_at, good = self.varint(key_end + 1, entry_end)
        ok &= good & (key_end < entry_end) & (self.byte(key_end) == 0x12) & (feature_at + feature_size == entry_end)
        tag = self.byte(feature_at)
        list_size, list_at, good = self.varint(feature_at + 1, entry_end)
        ok &= good & (feature_size > 0) & ((tag == 0x0A) | (tag == 0x12) | (tag == 0x1A)) & (list_at + list_size == entry_end)
        self.refuse(rows[~ok])
        rows, entry_end, end = rows[ok], entry_end[ok], end[ok]
        ids = self._key_ids(key_at[ok], key_size[ok], rows)
        self.found.append((rows, ids, tag[ok], list_at[ok], list_at[ok] + list_size[ok]))
        going = entry_end < end
        return rows[going], entry_end[going], end[going]

    def _key_ids(self, at: Ints, size: Ints, rows: Ints) -> Ints:
        """Each key's number in ``self.keys``; the first record's key is checked against all at once, as
        records of one writer mostly agree, then the rest by hash, every match checked byte for byte."""
        if not len(at):
            return np.zeros(0, dtype=np.int64)
        width = int(size.max())
        cells = self.byte(at[:, None] + np.arange(width)) if width else np.zeros((len(at), 0), dtype=np.int64)
        cells = np.where(np.arange(width) < size[:, None], cells, -1)
        same = (cells == cells[0]).all(axis=1)
        if same.all():
            return np.full(len(at), self._key(cells[0]), dtype=np.int64)
        hashes = np.zeros(len(at), dtype=np.uint64)
        for column in range(width):
            hashes = hashes * np.uint64(1099511628211) + cells[:, column].astype(np.uint64)
        _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        clash = ~(cells == cells[first[inverse]]).all(axis=1)  # a hash two keys share: by hand
        self.refuse(rows[clash])
        ids = np.array([self._key(cells[i]) for i in first], dtype=np.int64)
        return ids[inverse.reshape(-1)]

    def _key(self, cells: Ints) -> int:
        key = cells[cells >= 0].astype(np.uint8).tobytes()
        return self.keys.setdefault(key, len(self.keys))

    def columns(self) -> ExampleColumns:
        if not self.found:
            return ExampleColumns({}, np.flatnonzero(self.bad))
        rows, ids, tags, starts, ends = (np.concatenate(parts) for parts in zip(*self.found, strict=True))
        self._refuse_odd(rows, ids, tags)
        names = {}
        for key, number in self.keys.items():
            try:
                names[number] = key.decode("utf-8")
            except UnicodeDecodeError:  # not a key decode_example takes: it says so
                self.refuse(rows[ids == number])
        decoded: dict[str, tuple[int, Ints, Ints, Ints, Ints]] = {}
        for number, name in names.items():
            mine = (ids == number) & ~self.bad[rows]
            if mine.any():
                decoded[name] = (int(tags[mine][0]), rows[mine], starts[mine], ends[mine], np.flatnonzero(mine))
        values: dict[str, tuple[Ints, pa.Array]] = {}
        for name, (tag, key_rows, key_starts, key_ends, _) in decoded.items():
            counts, array, refused = self._values(tag, key_starts, key_ends)
            self.refuse(key_rows[refused])
            values[name] = (counts, array)
        columns = {}
        for name, (tag, key_rows, _, _, _) in decoded.items():
            counts, array = values[name]
            keep = ~self.bad[key_rows]
            if not keep.all():  # a row another key refused: its values leave this column too
                taken = np.repeat(keep, counts)
                array = array.filter(pa.array(taken)) if len(taken) else array
                counts = counts[keep]
            if keep.any():
                columns[name] = Column(_WIRES[tag], key_rows[keep], counts, array)
        return ExampleColumns(columns, np.flatnonzero(self.bad))

    def _refuse_odd(self, rows: Ints, ids: Ints, tags: Ints) -> None:
        """A key twice in one record, or a key of another type than its first record's: by hand."""
        pairs = rows * (len(self.keys) + 1) + ids
        order = np.argsort(pairs, kind="stable")
        twice = pairs[order][1:] == pairs[order][:-1]
        self.refuse(rows[order][1:][twice])
        for number in range(len(self.keys)):
            mine = ids == number
            if mine.any():
                first = tags[np.argmax(mine)]
                self.refuse(rows[mine & (tags != first)])

    def _values(self, tag: int, starts: Ints, ends: Ints) -> tuple[Ints, pa.Array, Flags]:
        """(values per list, the values, lists refused) of the lists ``[starts, ends)`` of one wire type."""
        if tag == 0x0A:
            return self._bytes(starts, ends)
        empty = starts == ends
        size, at, ok = self.varint(starts + 1, ends)
        ok = empty | (ok & (self.byte(starts) == 0x0A) & (at + size == ends))  # packed: one field 1 holding them all
        size = np.where(ok & ~empty, size, 0)
        if tag == 0x12:
            ok &= size % 4 == 0
            size = np.where(ok, size, 0)
            data = self._gather(at, size)
            return size // 4, pa.array(data.view("<f4")), ~ok
        ok &= empty | (self.byte(at + size - 1) < 0x80)  # each packed run ends a varint
        size = np.where(ok, size, 0)
        data = self._gather(at, size)
        if not len(data):
            return np.zeros(len(size), dtype=np.int64), pa.array(np.zeros(0, dtype=np.int64)), ~ok
        ends_here = data < 0x80
        groups = np.flatnonzero(ends_here)
        group_starts = np.concatenate([[0], groups[:-1] + 1]).astype(np.int64)
        place = np.arange(len(data), dtype=np.int64) - np.repeat(group_starts, groups - group_starts + 1)
        too_long = place >= 10
        if too_long.any():  # a varint of more than ten bytes: not an int64, by hand
            owner = np.searchsorted(np.cumsum(size), np.flatnonzero(too_long), side="right")
            refused = ~ok
            refused[owner] = True
            counts, array, _ = self._values(tag, starts, np.where(refused, starts, ends))  # refused lists read as empty
            return counts, array, refused
        bits = (data & 0x7F).astype(np.uint64) << (7 * place).astype(np.uint64)
        numbers = np.bitwise_or.reduceat(bits, group_starts)
        counts = np.zeros(len(size), dtype=np.int64)
        filled = size > 0  # reduceat over an empty run would give the next run's first value
        firsts = (np.cumsum(size) - size)[filled]
        counts[filled] = np.add.reduceat(ends_here.astype(np.int64), firsts)
        return counts, pa.array(numbers.view(np.int64)), ~ok

    def _bytes(self, starts: Ints, ends: Ints) -> tuple[Ints, pa.Array, Flags]:
        """Bytes lists: {1: value} repeated, read one value of every list a step."""
        refused = np.zeros(len(starts), dtype=np.bool_)
        counts = np.zeros(len(starts), dtype=np.int64)
        lists, at_all, sizes = [], [], []
        live = np.flatnonzero(starts < ends)
        at = starts[live]
        while len(live):
            size, inside, ok = self.varint(at + 1, ends[live])
            ok &= (self.byte(at) == 0x0A) & (inside + size <= ends[live])
            refused[live[~ok]] = True
            live, inside, size = live[ok], inside[ok], size[ok]
            lists.append(live)
            at_all.append(inside)
            sizes.append(size)
            counts[live] += 1
            at = inside + size
            going = at < ends[live]
            live, at = live[going], at[going]
        if not lists:
            return counts, pa.array([], type=pa.large_binary()), refused
        owner = np.concatenate(lists)
        order = np.argsort(owner, kind="stable")
        keep = ~refused[owner[order]]
        value_at, value_size = np.concatenate(at_all)[order][keep], np.concatenate(sizes)[order][keep]
        counts[refused] = 0
        offsets = np.zeros(len(value_size) + 1, dtype=np.int64)
        np.cumsum(value_size, out=offsets[1:])
        data = self._gather(value_at, value_size)
        array = pa.Array.from_buffers(pa.large_binary(), len(value_size), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        return counts, array, refused

    def _gather(self, at: Ints, size: Ints) -> Bytes:
        """The bytes ``[at[i], at[i] + size[i])`` of every i, one after another."""
        total = int(size.sum())
        if not total:
            return np.zeros(0, dtype=np.uint8)
        firsts = np.zeros(len(size), dtype=np.int64)
        np.cumsum(size[:-1], out=firsts[1:])
        return self.buf[np.arange(total, dtype=np.int64) + np.repeat(at - firsts, size)]
