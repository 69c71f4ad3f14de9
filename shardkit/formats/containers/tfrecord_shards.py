"""TFRecord as a shard container: ``.tfrecord`` (or ``.tfrecord.gz``) shards with a ``.idx`` beside each.

The adapter the build, the checkers and the readers ask about TFRecord files. Its settings are
TFRecord's own: GZIP compression of the whole file, and the ``.idx`` sidecar (offset and framed
length per record, as DALI and the ``tfrecord`` package read it), written for uncompressed shards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
from collections.abc import Sequence
from typing import BinaryIO, ClassVar, cast

import numpy as np
import pyarrow as pa

from shardkit.errors import ShardkitError, WriteError
from shardkit.formats.containers import tfrecord_locate, tfrecord_scan
from shardkit.formats.containers.adapter import (
    Located,
    LocatedReader,
    OnDamaged,
    OnFrame,
    OnRecord,
    RecordReader,
    ScanResult,
    ShardContainer,
    ShardWriter,
    StoredShard,
    WrittenFile,
)
from shardkit.formats.containers.idx_sidecar import INDEX_SUFFIX, flat_index_text, index_text
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE, RecordWriter, file_crc32c, frame_batch
from shardkit.formats.containers.tfrecord_reads import IndexedTFRecords, MappedTFRecord
from shardkit.storage import atomic, location

SUFFIX = ".tfrecord"
GZIP_SUFFIX = ".tfrecord.gz"
_NOT_SHARDS = (INDEX_SUFFIX, ".tfindex", ".json")  # sidecars and metadata named after a TFRecord file


@dataclasses.dataclass(frozen=True)
class TFRecordShards(ShardContainer):
    """TFRecord shards, written with ``compression`` (None or "gzip") and, uncompressed, a ``.idx`` each.

    ``read_compression`` is how the walk reads a file: "auto" tells plain, GZIP and ZLIB apart by
    their first bytes; "none", "gzip" or "zlib" insist (``verify --compression``)."""

    name: ClassVar[str] = "tfrecord"
    title: ClassVar[str] = "TFRecord"
    tfds_file_format: ClassVar[str] = "tfrecord"
    read_by_tf_data: ClassVar[bool] = True
    locates_by_offset: ClassVar[bool] = True
    copies_frames: ClassVar[bool] = True
    markers: ClassVar[tuple[str, ...]] = (".tfrecord", ".tfrec", ".tfrecords")
    suffixes: ClassVar[tuple[str, ...]] = (SUFFIX + "*",)

    compression: str | None = None
    index: bool = True
    read_compression: str = "auto"

    @classmethod
    def names_file(cls, name: str) -> bool:
        return super().names_file(name) and not name.endswith(_NOT_SHARDS)

    @classmethod
    def for_reading(cls, compression: str = "auto") -> ShardContainer:
        return cls(read_compression=compression)

    @classmethod
    def with_settings(cls, compression: str | None, index: bool) -> ShardContainer:
        return cls(compression, index)

    def suffix(self) -> str:
        return GZIP_SUFFIX if self.compression == "gzip" else SUFFIX

    def sidecar_name(self, shard: str) -> str | None:
        return shard + INDEX_SUFFIX if self.index and self.compression is None else None

    def owned_sidecars(self, shard: str) -> tuple[str, ...]:
        """A ``.idx`` lists a shard's offsets, whether the build or ``shardkit index`` wrote it: stale beside a new shard."""
        return (shard + INDEX_SUFFIX,)

    def check(self, path: str, on_record: OnRecord | None = None, sidecar: str | None = None) -> tuple[ScanResult, str | None]:
        frames: list[tuple[int, int]] = []
        on_frame = (lambda offset, length: frames.append((offset, length))) if sidecar else None
        result = self.walk(path, on_record, on_frame=on_frame)
        if not result.ok:
            return result, None
        return result, self._name_problem(path, result.compression) or (_index_mismatch(sidecar, frames) if sidecar else None)

    def _name_problem(self, path: str, found: str) -> str | None:
        if self.read_compression != "auto":
            return None
        named_gz = path.endswith((".gz", ".gzip"))
        if found == "gzip" and not named_gz:
            return "GZIP-compressed, but the name does not end in .gz: TensorFlow reads it only with compression_type='GZIP'"
        if found == "none" and named_gz:
            return "named .gz but not compressed: TensorFlow's compression_type='GZIP' would fail on it"
        return None

    def open_records(self, out: str, shards: Sequence[StoredShard]) -> RecordReader:
        return IndexedTFRecords(out, shards)

    @classmethod
    def recognises(cls, head: bytes) -> str | None:
        return tfrecord_scan.recognised(head)

    def stage(self, path: str, target: str, compression: str) -> str | None:
        return tfrecord_scan.inflate_to(path, compression, target)

    def locate(self, path: str, on_damaged: OnDamaged | None = None) -> Located:
        return tfrecord_locate.locate(path, on_damaged)

    def read_located(self, path: str) -> LocatedReader:
        return MappedTFRecord(path)

    def open_writer(self, temp: str, final: str) -> ShardWriter:
        return _Writer(temp, final, self.compression, index=self.sidecar_name(final) is not None)

    def walk(
        self,
        path: str,
        on_record: OnRecord | None = None,
        limit: int | None = None,
        checksum: bool = True,
        on_frame: OnFrame | None = None,
    ) -> ScanResult:
        return tfrecord_scan.scan(path, self.read_compression, on_record, limit, checksum, on_frame)


class _Writer(ShardWriter):
    def __init__(self, temp: str, final: str, compression: str | None, index: bool) -> None:
        self._temp = temp
        self._raw = _ShardFile(temp, final)
        self._gzip = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6, mtime=0) if compression == "gzip" else None
        # A _ShardFile writes as a binary file does, with its errors named.
        self._records = RecordWriter(cast(BinaryIO, self._gzip or self._raw))
        self._index = index

    def write(self, record: bytes) -> None:
        self._records.write(record)

    def write_batch(self, records: pa.Array) -> None:
        framed, lengths = frame_batch(records)
        self._records.write_framed(framed, lengths)

    def write_frames(self, frames: Sequence[bytes], lengths: Sequence[int]) -> None:
        self._records.write_framed(b"".join(frames), np.asarray(lengths, np.int64) + HEADER_SIZE + FOOTER_SIZE)

    def close(self, sync: bool) -> WrittenFile:
        if self._gzip is not None:
            self._gzip.close()
        self._raw.flush()
        if sync:
            self._raw.sync()
        self._raw.close()
        records = self._records
        if self._gzip is not None:  # the writer counted the bytes it handed to gzip: checksum what is on disk
            size, crc = os.path.getsize(self._temp), file_crc32c(self._temp)
        else:
            size, crc = records.bytes_written, records.crc32c
        sidecar = flat_index_text(records.flat_offsets) if self._index else None
        return WrittenFile(records.records, size, f"{crc:08x}", sidecar)

    def abandon(self) -> None:
        self._raw.abandon()


class _ShardFile:
    """A shard's temp file, as the record writer (and gzip) see it: every OS error writing it (a
    full disk, a quota) is a ``WriteError`` naming the shard, while input errors stay entry errors."""

    def __init__(self, temp: str, final: str) -> None:
        self._final = final
        with atomic.naming(final):
            # A larger buffer: one write call per 256 KB, not one per small record.
            self._raw: BinaryIO = open(temp, "wb", buffering=1 << 18)  # noqa: SIM115 (closed by close() or abandon())

    def write(self, data: bytes) -> int:
        try:  # once per record: a bare try, not atomic.naming's context manager
            return self._raw.write(data)
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None

    def flush(self) -> None:
        with atomic.naming(self._final):
            self._raw.flush()

    def sync(self) -> None:
        with atomic.naming(self._final):
            atomic.flush_to_disk(self._raw.fileno())

    def close(self) -> None:
        with atomic.naming(self._final):  # closing flushes: a full disk can fail it too
            self._raw.close()

    def abandon(self) -> None:
        """Already failing: closing flushes what is buffered, which may fail again and hide why."""
        with contextlib.suppress(OSError):
            self._raw.close()


def _index_mismatch(index_path: str, frames: list[tuple[int, int]]) -> str | None:
    """Whether the ``.idx`` at ``index_path`` lists exactly the records the walk found."""
    try:
        text = location.read_bytes(index_path)
    except OSError as exc:  # a store's missing object has no strerror
        why = "no such object" if location.is_url(index_path) and isinstance(exc, FileNotFoundError) else exc.strerror
        return f"its index {index_path} cannot be read: {why}"
    except ShardkitError as exc:  # a store's failure, one line naming the URL
        return f"its index cannot be read: {exc}"
    if text != index_text(frames):
        return f"its index {os.path.basename(index_path)} does not list the file's records (shardkit index rewrites it)"
    return None
