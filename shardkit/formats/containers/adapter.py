"""What a shard container is to the rest of shardkit: ``ShardContainer`` and its ``ShardWriter``.

One adapter per container (``tfrecord_shards``, later others) says everything the build and the
checkers ask of the files: its name and file suffix, the names it writes in OUT, how a shard is
written (record by record or a batch of encoded records at once), the walk that ``verify``,
``inspect``, ``preview`` and counting use, and what TFDS calls it. An adapter is a small frozen
value with the container's own settings (TFRecord's compression and ``.idx``), so it travels to
every worker inside a task. Encoded ``tf.train.Example`` bytes go in; framing them is the
container's business alone.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from shardkit.errors import UsageError

OnRecord = Callable[[int, int, memoryview], None]  # (record index, offset in the record stream, payload)
OnFrame = Callable[[int, int], None]  # (stream offset, stored length) of every valid record
OnDamaged = Callable[[int, str], None]  # (locator, reason) of a record whose data is damaged: the walk goes on past it


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """What a walk over one file found: valid records before the first problem, and the file's checksum."""

    path: str
    compression: str  # none, gzip or zlib: what the bytes are, whatever the name says
    records: int  # complete, checked records before the first problem
    file_bytes: int
    crc32c: str  # of the file's bytes on disk (what the manifest records)
    error: str | None = None
    error_record: int | None = None
    error_offset: int | None = None  # in the record stream

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe_error(self) -> str:
        if self.error is None:
            return ""
        if self.error_record is None:
            return self.error
        if self.error_offset is None:
            return f"record {self.error_record}: {self.error}"
        return f"record {self.error_record} at byte {self.error_offset}: {self.error}"


@dataclasses.dataclass(frozen=True)
class WrittenFile:
    """One shard file, whole in its temp file: what its shard record and the manifest keep of it."""

    records: int
    size: int  # bytes
    crc32c: str  # of the file's bytes, hex
    sidecar: bytes | None = None  # what goes beside it (``sidecar_name``), when the container keeps one


@dataclasses.dataclass(frozen=True)
class StoredShard:
    """One shard file as a reader finds it: where it is, what the manifest says it holds, its sidecar."""

    path: str
    records: int
    bytes: int
    sidecar: str | None = None  # the sidecar the manifest lists beside it (a path), if any


class RecordReader(Protocol):
    """A split's shards in one container, read by record number; safe from threads, and picklable
    (each process opens its own files)."""

    counts: list[int]  # records in each shard, in order

    def record(self, shard: int, position: int) -> bytes:
        """The serialized Example at ``position`` of shard ``shard``, checked."""
        ...

    def close(self) -> None:
        """Let go of open files (a later read opens them again)."""
        ...


Located = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int64]", ScanResult]  # (locators, payload lengths, the walk's result)


class LocatedReader(Protocol):
    """One local file's records read where ``ShardContainer.locate`` found them, in any order."""

    def read(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """The payloads at ``locators`` (their ``lengths`` as ``locate`` gave them), in that order."""
        ...

    def frames(self, locators: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """Each record whole as the file frames it, for a writer of the same container
        (``ShardContainer.copies_frames``); only such containers' readers are asked."""
        ...

    def close(self) -> None: ...


class ShardWriter(abc.ABC):
    """Appends records to one shard's temp file. OS errors while writing are ``WriteError``s
    naming the shard's final name (the file the user knows), not the temp file."""

    @abc.abstractmethod
    def write(self, record: bytes) -> None:
        """Append one encoded record."""

    @abc.abstractmethod
    def write_batch(self, records: pa.Array) -> None:
        """Append a batch of encoded records (a binary array, element ``i`` record ``i``), as ``write`` of each would."""

    def write_frames(self, frames: Sequence[bytes], lengths: Sequence[int]) -> None:
        """Append records framed as this container's files frame them (read by ``LocatedReader.frames``,
        their payloads ``lengths`` bytes), as ``write`` of each payload would: no framing, no checksum again."""
        raise NotImplementedError(f"{type(self).__name__} does not take framed records")

    @abc.abstractmethod
    def close(self, sync: bool) -> WrittenFile:
        """Finish the file (flushed to stable storage with ``sync``) and say what it holds."""

    @abc.abstractmethod
    def abandon(self) -> None:
        """Close after a failure, quietly: the caller removes the temp file and reports the first error."""


class ShardContainer(abc.ABC):
    """A shard container's adapter. Subclasses are frozen dataclasses holding the container's settings."""

    name: ClassVar[str]  # what --format calls it
    title: ClassVar[str]  # what messages call it: "TFRecord"
    tfds_file_format: ClassVar[str]  # dataset_info.json's fileFormat, for tfds.builder_from_directory
    indexes_itself: ClassVar[bool] = False  # random access built in: ``shardkit index`` has nothing to write
    read_by_tf_data: ClassVar[bool] = False  # tf.data reads it (TFRecordDataset): shardkit.tfdata and snapshots can
    locates_by_offset: ClassVar[bool] = False  # ``locate``'s locators are byte offsets (else record numbers)
    copies_frames: ClassVar[bool] = False  # its writer takes its files' frames as they are (``write_frames``)
    markers: ClassVar[tuple[str, ...]]  # what a name holds to be one of its files, wherever it came from (for PATHs given)
    suffixes: ClassVar[tuple[str, ...]]  # globs of the ends of the names it writes in OUT, sidecars too (``--overwrite`` replaces them)

    @classmethod
    def names_file(cls, name: str) -> bool:
        """Whether a file named ``name`` is one of this container's (not a sidecar of one)."""
        return any(marker in name for marker in cls.markers)

    @classmethod
    def for_reading(cls, compression: str = "auto") -> ShardContainer:
        """This container to walk files with: TFRecord takes the compression asked (``--compression``)."""
        return cls()

    @classmethod
    def with_settings(cls, compression: str | None, index: bool) -> ShardContainer:
        """This container for a build with TFRecord's settings given (``--compression``, ``--no-index``);
        a container they mean nothing to refuses a compression, in one line."""
        if compression is not None:
            raise UsageError(
                f"--compression {compression} is TFRecord's: {cls.title} files are read at any record, so they are not gzipped; "
                "drop --compression"
            )
        return cls()

    @abc.abstractmethod
    def suffix(self) -> str:
        """The file suffix of its shards, with these settings (``.tfrecord``, ``.tfrecord.gz``)."""

    def shard_name(self, split: str, index: int, num_shards: int) -> str:
        """``{split}-{i:05d}-of-{n:05d}`` and the suffix: TFDS' file template matches it."""
        return f"{split}-{index:05d}-of-{num_shards:05d}{self.suffix()}"

    def writer_options(self) -> str | None:
        """The options its files are written with, for the manifest (ArrayRecord's options string)."""
        return None

    def sidecar_name(self, shard: str) -> str | None:
        """The file a shard's writer leaves beside it (``WrittenFile.sidecar``), if this container keeps one."""
        return None

    def owned_sidecars(self, shard: str) -> tuple[str, ...]:
        """Files beside a shard that belong to it whoever wrote them: replaced or removed with the shard."""
        return ()

    @abc.abstractmethod
    def open_writer(self, temp: str, final: str) -> ShardWriter:
        """A writer into the local file ``temp``; errors name ``final``."""

    def check(self, path: str, on_record: OnRecord | None = None, sidecar: str | None = None) -> tuple[ScanResult, str | None]:
        """``walk`` with checksum, and what else this container knows is wrong with a file the walk
        found whole: its name, its sidecar ``sidecar`` (a path beside it). ``verify`` asks this."""
        return self.walk(path, on_record), None

    @abc.abstractmethod
    def open_records(self, out: str, shards: Sequence[StoredShard]) -> RecordReader:
        """Random access to ``shards`` (a split's, in OUT ``out``); a ``ShardkitError`` saying what
        to do where this container cannot read them that way (no ``.idx``, GZIP)."""

    @classmethod
    def recognises(cls, head: bytes) -> str | None:
        """The compression of a file whose first bytes are ``head``, when its content says it is
        one of this container's files, whatever its name (None: it is not)."""
        return None

    def stage(self, path: str, target: str, compression: str) -> str | None:
        """Copy the records of ``path`` (a URL, or compressed) to the local file ``target``, as
        ``locate`` and ``read_located`` read them; returns the problem that cut the copy short, if any."""
        raise NotImplementedError(f"{self.title} files are not staged")

    @abc.abstractmethod
    def locate(self, path: str, on_damaged: OnDamaged | None = None) -> Located:
        """Check every record of the local, plain file ``path``: (locators, payload lengths) of the
        sound ones, as int64 arrays, and what the walk found. A locator is what ``read_located``
        takes (a byte offset, ``locates_by_offset``, or a record number). With ``on_damaged``, a
        record whose data is damaged is handed to it and the walk goes on past it where the framing
        allows; the problem the walk cannot pass is in the result."""

    @abc.abstractmethod
    def read_located(self, path: str) -> LocatedReader:
        """Records of the local, plain file ``path`` by where ``locate`` found them."""

    @abc.abstractmethod
    def walk(
        self,
        path: str,
        on_record: OnRecord | None = None,
        limit: int | None = None,
        checksum: bool = True,
        on_frame: OnFrame | None = None,
    ) -> ScanResult:
        """Check every record of ``path`` (or the first ``limit``), handing each payload to
        ``on_record``; never raises for bad data: the first problem is in the result."""
