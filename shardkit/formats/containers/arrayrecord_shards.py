"""ArrayRecord as a shard container: ``.array_record`` shards that Grain and JAX read with random access.

Each shard is one ArrayRecord file of one record a chunk (``group_size:1``: Grain needs it), which
indexes itself, so there is no sidecar. The ``array_record`` package writes local files only, so a
shard is written to its local temp file and published whole (renamed, or uploaded to a bucket) as
every shard is; a shard in a bucket is read back through a local copy. ``arrayrecord_io`` holds the
file work; this module is what the build, the checkers and the readers ask.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import ClassVar

import numpy as np
import pyarrow as pa

from shardkit.errors import ShardkitError, WriteError
from shardkit.formats.containers import arrayrecord_io
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
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class ArrayRecordShards(ShardContainer):
    """ArrayRecord shards, written with the writer options ``options`` (recorded in the manifest)."""

    name: ClassVar[str] = "arrayrecord"
    title: ClassVar[str] = "ArrayRecord"
    tfds_file_format: ClassVar[str] = "array_record"
    markers: ClassVar[tuple[str, ...]] = (arrayrecord_io.SUFFIX,)
    suffixes: ClassVar[tuple[str, ...]] = (arrayrecord_io.SUFFIX,)
    indexes_itself: ClassVar[bool] = True

    options: str = arrayrecord_io.OPTIONS

    @classmethod
    def with_settings(cls, compression: str | None, index: bool) -> ShardContainer:
        made = super().with_settings(compression, index)
        arrayrecord_io.require()  # without the extra: one line naming it, before any work
        return made

    def suffix(self) -> str:
        return arrayrecord_io.SUFFIX

    def writer_options(self) -> str | None:
        return self.options

    def open_records(self, out: str, shards: Sequence[StoredShard]) -> RecordReader:
        if location.is_url(out):
            raise ShardkitError(
                f"{out}: ArrayRecord shards are read at random from a local disk only (array_record reads local files): "
                "copy the folder to a local disk, or build with --format tfrecord,arrayrecord to read the TFRecord twins here"
            )
        return _ArrayRecords(shards)

    def open_writer(self, temp: str, final: str) -> ShardWriter:
        return _Writer(temp, final, self.options)

    @classmethod
    def recognises(cls, head: bytes) -> str | None:
        return "none" if arrayrecord_io.looks_like(head) else None

    def stage(self, path: str, target: str, compression: str) -> str | None:
        with open(target, "wb") as out, location.explained(path), location.open_read(path) as source:
            shutil.copyfileobj(source, out, 8 << 20)
        return None

    def locate(self, path: str, on_damaged: OnDamaged | None = None) -> Located:
        locators, lengths = array("q"), array("q")

        def found(index: int, _: int, payload: memoryview) -> None:
            locators.append(index)
            lengths.append(len(payload))

        walked = arrayrecord_io.walk(path, found, checksum=False, on_damaged=on_damaged)
        result = ScanResult(path, "none", len(locators), walked.file_bytes, "", walked.error, walked.error_record)
        return np.frombuffer(locators, np.int64), np.frombuffer(lengths, np.int64), result

    def read_located(self, path: str) -> LocatedReader:
        return _Located(arrayrecord_io.RecordFileReader(path))

    def walk(
        self,
        path: str,
        on_record: OnRecord | None = None,
        limit: int | None = None,
        checksum: bool = True,
        on_frame: OnFrame | None = None,
    ) -> ScanResult:
        try:
            with _local(path) as local:
                found = arrayrecord_io.walk(local, on_record, limit, checksum)
        except (OSError, ShardkitError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).removeprefix(f"{path}: ")
            return ScanResult(path, "none", 0, 0, "", f"cannot read: {reason}")
        return ScanResult(path, "none", found.records, found.file_bytes, found.crc32c, found.error, found.error_record)


@contextlib.contextmanager
def _local(path: str) -> Iterator[str]:
    """``path`` itself, or a local copy of an object in a bucket (``array_record`` reads local files)."""
    if not location.is_url(path):
        yield path
        return
    handle, copy = tempfile.mkstemp(prefix="shardkit-copy-", suffix=arrayrecord_io.SUFFIX)
    try:
        with os.fdopen(handle, "wb") as target, location.explained(path), location.open_read(path) as source:
            shutil.copyfileobj(source, target, 8 << 20)
        yield copy
    finally:
        os.unlink(copy)


class _Located:
    """An ArrayRecord file read by record number (its locators); the lengths are not needed."""

    def __init__(self, reader: arrayrecord_io.RecordFileReader) -> None:
        self._reader = reader

    def read(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        return self._reader.read(locators)

    def frames(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        raise NotImplementedError("ArrayRecord records are read as payloads: its chunks are not copied as they are")

    def close(self) -> None:
        self._reader.close()


class _ArrayRecords:
    """A split's ArrayRecord shards, one lazily opened reader each (each process opens its own)."""

    def __init__(self, shards: Sequence[StoredShard]) -> None:
        self._files = [arrayrecord_io.RecordFileReader(shard.path) for shard in shards]
        self.counts = [shard.records for shard in shards]

    def record(self, shard: int, position: int) -> bytes:
        return self._files[shard].read([position])[0]

    def close(self) -> None:
        for reader in self._files:
            reader.close()


class _Writer(ShardWriter):
    """An ``arrayrecord_io.RecordFileWriter`` whose OS errors name the shard."""

    def __init__(self, temp: str, final: str, options: str) -> None:
        self._final = final
        try:
            self._file = arrayrecord_io.RecordFileWriter(temp, options)
        except OSError as exc:
            raise WriteError.from_os_error(final, exc) from None

    def write(self, record: bytes) -> None:
        try:
            self._file.write(record)
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None

    def write_batch(self, records: pa.Array) -> None:
        try:
            self._file.write_batch(records)
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None

    def close(self, sync: bool) -> WrittenFile:
        try:
            written = self._file.close()
            if sync:
                with open(self._file.path, "rb") as f:
                    os.fsync(f.fileno())
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None
        return WrittenFile(written.records, written.file_bytes, written.crc32c)

    def abandon(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self._file.__exit__(RuntimeError, None, None)
