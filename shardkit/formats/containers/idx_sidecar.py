"""``NAME.idx`` files: byte offset and framed length of every record, one ``offset length`` line each.

The format DALI's ``tfrecord2idx`` and the ``tfrecord`` package's ``tfrecord2idx`` write and read:
with it, readers shard and shuffle TFRecords across workers by seeking. ``shardkit build`` writes
it while writing each shard; ``shardkit index`` makes it for existing (uncompressed) files, in a
bucket too (``gs://``, ``s3://``: the object is read in block reads, its index is one upload).
"""

from __future__ import annotations

import dataclasses
import glob
import multiprocessing as mp
import os
from collections.abc import Iterable, Sequence

from shardkit.errors import Interrupted, ShardkitError
from shardkit.formats.containers import tfrecord_scan
from shardkit.formats.containers.adapter import ScanResult
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.storage import atomic, location

INDEX_SUFFIX = ".idx"


def index_text(offsets: list[tuple[int, int]]) -> bytes:
    """The index format of DALI's and the ``tfrecord`` package's tfrecord2idx: ``offset length`` per line."""
    return flat_index_text([n for pair in offsets for n in pair])


def flat_index_text(flat: list[int]) -> bytes:
    """``index_text`` of offsets given as one list (offset, length, offset, ...): one formatting call."""
    return (("%d %d\n" * (len(flat) // 2)) % tuple(flat)).encode()


def read_index(path: str) -> list[tuple[int, int]]:
    """(offset, framed length) of every record an index lists; an unreadable one is a ShardkitError."""
    if location.is_url(path):
        try:
            text = location.read_bytes(path).decode("ascii")
        except FileNotFoundError:
            raise ShardkitError(f"{path}: cannot read the index: no such object") from None
        except ValueError as exc:
            raise ShardkitError(f"{path}: cannot read the index: {exc}") from None
        return parse_index(path, text.splitlines())
    try:
        with open(path, encoding="ascii") as f:
            return parse_index(path, f)
    except (OSError, ValueError) as exc:
        raise ShardkitError(f"{path}: cannot read the index: {exc}") from None


def parse_index(path: str, lines: Iterable[str]) -> list[tuple[int, int]]:
    """The (offset, framed length) pairs of an index's lines; ``path`` names it in the error."""
    try:
        return [(int(a), int(b)) for a, b in (line.split() for line in lines if line.strip())]
    except ValueError as exc:
        raise ShardkitError(f"{path}: cannot read the index: {exc}") from None


@dataclasses.dataclass(frozen=True)
class IndexReport:
    path: str
    records: int
    index: str | None  # the .idx written, or None
    problem: str | None = None
    skipped: str | None = None  # why no index was needed (a container that indexes itself)


def offsets(path: str, compression: str = "auto") -> tuple[ScanResult, list[tuple[int, int]]]:
    """CRC-checked walk of ``path`` collecting (offset, framed length) of every record."""
    found: list[tuple[int, int]] = []
    result = tfrecord_scan.scan(path, compression, checksum=False, on_frame=lambda offset, length: found.append((offset, length)))
    return result, found


def write_index(path: str, compression: str = "auto") -> IndexReport:
    result, found = offsets(path, compression)
    if not result.ok:
        return IndexReport(path, result.records, None, result.describe_error())
    if result.compression != "none":
        return IndexReport(path, result.records, None, f"{result.compression}-compressed: index files need uncompressed TFRecords")
    target = path + INDEX_SUFFIX
    try:
        if location.is_url(target):
            location.put_bytes(target, index_text(found))  # an object upload appears whole or not at all
        else:
            atomic.write_atomic(target, index_text(found))
    except ShardkitError as exc:  # a full disk, a read-only folder or bucket fails this file, not the whole run
        return IndexReport(path, result.records, None, str(exc))
    return IndexReport(path, result.records, target)


def write_idx_files(paths: Sequence[str], workers: int = 1, compression: str = "auto") -> list[IndexReport]:
    """Write ``.idx`` beside every file, in parallel; a file that fails gets a report, not an exception."""
    try:
        if workers > 1 and len(paths) > 1:
            pool = quiet_pool(mp.get_context(), min(workers, len(paths)))
            try:
                return pool.starmap(write_index, [(p, compression) for p in paths], chunksize=1)
            finally:
                stop_pool(pool)
        return [write_index(p, compression) for p in paths]
    except KeyboardInterrupt as exc:
        for path in (p for p in paths if not location.is_url(p)):  # a worker stopped inside its atomic write leaves the temp file
            folder, name = os.path.split(path)
            for temp in glob.glob(os.path.join(glob.escape(folder), f".{glob.escape(name + INDEX_SUFFIX)}{atomic.INCOMPLETE}*")):
                atomic.remove_quietly(temp)
        raise Interrupted.after(exc, "interrupted: every .idx file is written whole or not at all; run the same command to finish") from exc
