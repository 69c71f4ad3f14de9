"""TFRecord shards read by record number, through their ``.idx`` files: TFRecord's ``open_records``.

One seek and one read a record, both CRCs compared. Local files are read with ``os.pread`` (no
shared file position: threads share a descriptor), each opened on first use in each process (a
forked or unpickled copy opens its own). On a bucket the indexes are fetched at once and each
record is one ranged read.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Sequence
from typing import Any

from shardkit.errors import CorruptShardError, ShardkitError
from shardkit.formats.containers.adapter import StoredShard
from shardkit.formats.containers.idx_sidecar import INDEX_SUFFIX, parse_index, read_index
from shardkit.formats.containers.masked_crc import masked_crc
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE
from shardkit.storage import location

_LENGTH_AND_CRC = struct.Struct("<QI")
_CRC = struct.Struct("<I")


class IndexedTFRecords:
    """TFRecord shards read through their ``.idx`` files.

    Local files are read with ``os.pread`` (no shared file position: threads share a descriptor),
    each opened on first use in each process (a forked or unpickled copy opens its own). On a
    bucket the indexes are fetched at once and each record is one ranged read.
    """

    def __init__(self, out: str, shards: Sequence[StoredShard]) -> None:
        self._remote = location.is_url(out)
        where = [(shard, shard.sidecar or shard.path + INDEX_SUFFIX) for shard in shards]
        fetched = location.read_many([index for _, index in where]) if self._remote else {}  # every index at once
        self._paths: list[str] = []
        self._entries: list[list[tuple[int, int]]] = []
        self._sizes: list[int] = []  # the manifest's byte counts: a stale index never reads past an object's end
        for shard, index_path in where:
            if self._remote:
                entries = _parse_fetched(index_path, fetched[index_path], f"{shard.path}: no index object ({_index_hint(out, shard)})")
            else:
                if not os.path.exists(index_path):
                    raise ShardkitError(f"{shard.path}: no index file ({_index_hint(out, shard)})")
                entries = read_index(index_path)
            if len(entries) != shard.records:
                raise ShardkitError(f"{index_path}: lists {len(entries)} records, the manifest says {shard.records}")
            self._paths.append(shard.path)
            self._entries.append(entries)
            self._sizes.append(shard.bytes)
        self.counts = [len(entries) for entries in self._entries]
        self._fds: dict[int, int] = {}  # shard -> descriptor, opened on first use
        self._pid = os.getpid()

    def record(self, shard: int, position: int) -> bytes:
        offset, length = self._entries[shard][position]
        if self._remote:  # the filesystem's client is safe from threads
            end = offset + length
            framed = location.read_bytes(self._paths[shard], offset, end) if 0 <= offset < end <= self._sizes[shard] else b""
        else:
            framed = os.pread(self._fd(shard), length, offset)
        if len(framed) != length or length < HEADER_SIZE + FOOTER_SIZE:
            raise CorruptShardError(self._paths[shard], "record runs past the end of the file (stale index?)", position, offset)
        data_length, length_crc = _LENGTH_AND_CRC.unpack_from(framed)
        if HEADER_SIZE + data_length + FOOTER_SIZE != length or masked_crc(framed[:8]) != length_crc:
            raise CorruptShardError(self._paths[shard], "the index does not point at a record here (stale index?)", position, offset)
        data = memoryview(framed)[HEADER_SIZE : HEADER_SIZE + data_length]
        if masked_crc(data) != _CRC.unpack_from(framed, HEADER_SIZE + data_length)[0]:
            raise CorruptShardError(self._paths[shard], "data CRC mismatch", position, offset)
        return bytes(data)

    def _fd(self, shard: int) -> int:
        if self._pid != os.getpid():  # forked into a worker: the parent's descriptors are not this process's to share
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(shard)
        if fd is None:
            opened = os.open(self._paths[shard], os.O_RDONLY)
            fd = self._fds.setdefault(shard, opened)  # one step: of two threads opening it at once, one keeps its own
            if fd != opened:
                os.close(opened)
        return fd

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fds": {}}

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        if self._pid == os.getpid():
            for fd in fds.values():
                os.close(fd)


def _index_hint(out: str, shard: StoredShard) -> str:
    return "GZIP shards cannot be indexed" if shard.path.endswith(".gz") else f"run: shardkit index {out}"


def _parse_fetched(index_path: str, data: bytes | None, missing: str) -> list[tuple[int, int]]:
    if data is None:
        raise ShardkitError(missing)
    try:
        return parse_index(index_path, data.decode("ascii").splitlines())
    except UnicodeDecodeError as exc:
        raise ShardkitError(f"{index_path}: cannot read the index: {exc}") from None


class MappedTFRecord:
    """One local TFRecord file read by the frame offsets ``locate`` found: payloads, or whole frames.

    The walk that found them checked every CRC, so a read here checks none again. A small record is
    a slice of the file mapped into memory (a page holds many); a large one is one ``pread`` (a
    mapping's page faults cost more than the kernel's copy). After each read the mapping's pages
    are let go of (the page cache keeps them), so a process reading at random from many large
    files holds none of them. Opened on first use in each process, and picklable as its path.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._map: mmap.mmap | None = None
        self._fd = -1

    def read(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        return self._take([start + HEADER_SIZE for start in locators], lengths)

    def frames(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """Each record's whole frame (length, its CRC, payload, its CRC), as a TFRecord writer writes it."""
        return self._take(locators, [length + HEADER_SIZE + FOOTER_SIZE for length in lengths])

    def _take(self, starts: Sequence[int], sizes: Sequence[int]) -> list[bytes]:
        if self._map is None:
            self._map = _mapped(self.path)
            self._fd = os.open(self.path, os.O_RDONLY)
        view, fd, pread = self._map, self._fd, os.pread
        taken = [
            pread(fd, size, start) if size >= _PREAD_FROM else view[start : start + size] for start, size in zip(starts, sizes, strict=True)
        ]
        view.madvise(mmap.MADV_DONTNEED)
        return taken

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            os.close(self._fd)
            self._map, self._fd = None, -1

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]


_PREAD_FROM = 16 << 10  # bytes from which a record is read with pread rather than sliced from the mapping


def _mapped(path: str) -> mmap.mmap:
    try:
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:  # ValueError: an empty file, which locate found no record in
        raise CorruptShardError(path, f"cannot map: {getattr(exc, 'strerror', None) or exc}") from None
