"""ArrayRecord files on a local disk: write records, walk and check a file, read records by number.

``array_record``'s Python writer takes one ``bytes`` at a time (no batch call in 0.8.6; the loop
itself is about 4% of the writer's time, the rest is its per-chunk work). Its reader checks every
chunk's hash itself; what it does not do, this module does before or around it:
- a reader over a damaged or truncated file opens without an error and says ``ok() == False`` and
  0 records (``ArrayRecordDataSource`` then reads the file as empty): ``walk`` and ``RecordFileReader``
  check ``ok()`` and take the reason from ``close()``;
- the 64-byte Riegeli signature is not checked by the reader (a flipped bit there reads fine):
  ``walk`` compares it; the zero padding before the postscript block is hashed by nobody and only
  the file checksum covers it;
- a full disk is reported by ``close()`` only (chunks are written behind ``write``), as a
  ``RuntimeError``: the writer raises ``OSError`` with the errno its message names.
No input found crashes the C++ reader (every bit of a small file flipped, truncations, random and
TFRecord bytes, empty files: all give a Python exception or ``ok() == False``).

``array_record`` is an extra (Python >= 3.11): it is imported when a file is first written or read,
so this module (``looks_like``) works without it. TensorFlow is never imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import crc32c

from shardkit.errors import CorruptShardError, UsageError

if TYPE_CHECKING:
    import pyarrow as pa

# One record a chunk: random access reads one chunk per record (Grain requires it; array_record
# before 0.8 defaulted to 65536 a chunk). Uncompressed: a one-record chunk leaves zstd nothing to
# share between records, so it did not make files smaller (92-byte table records: 31.5 MB zstd vs
# 29.1 MB uncompressed; 100 KB JPEG-like records: the same size) and it made writing 1.5-3.8x
# slower. Readers read any compression; the writer records its options in the file.
OPTIONS = "group_size:1,uncompressed"
# Random reads: no readahead and no thread pool (seek + read of 1 KB records: about 220k/s against
# under 1k/s with the default 16 MB readahead). Sequential walks read the same way (faster too).
READ_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"
SUFFIX = ".array_record"
BLOCK = 1 << 16  # Riegeli's block: an ArrayRecord file is a whole number of them
# Every Riegeli file begins with this block header and signature chunk.
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f0000000000000000400000000000000091bac23c9287e1a90000000000000000e19f13c0e9b1c37273000000000000000000000000000000"
)
MISSING = "ArrayRecord needs the array-record package: pip install 'shardkit[arrayrecord]' (Python >= 3.11)"
_READ_SIZE = 8 << 20
_HASHES = re.compile(r" \(computed 0x[0-9a-f]+, stored 0x[0-9a-f]+\)")

OnRecord = Callable[[int, int, memoryview], None]  # (record index, its address: the index again, payload)
OnDamaged = Callable[[int, str], None]  # (record index, reason) of a record whose data is damaged


def _module() -> Any:
    try:
        from array_record.python import array_record_module  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        raise UsageError(MISSING) from None
    return array_record_module


def looks_like(head: bytes) -> bool:
    """Whether a file's first bytes are a Riegeli (ArrayRecord) file's signature: 64 bytes needed."""
    return head[: len(SIGNATURE)] == SIGNATURE


def _os_error(message: str, path: str) -> OSError:
    """An ``OSError`` for a Riegeli failure message such as ``write() failed: No space left on device; ...``."""
    for code in sorted(errno.errorcode):
        if os.strerror(code) in message:
            return OSError(code, os.strerror(code), path)
    return OSError(errno.EIO, message.split(";")[0], path)


@dataclasses.dataclass(frozen=True)
class WrittenFile:
    records: int
    file_bytes: int
    crc32c: str  # of the file's bytes, as the manifest records it


def file_checksum(path: str) -> tuple[int, str]:
    """(size, CRC32C hex) of a local file, read in bounded steps."""
    crc = size = 0
    buf = bytearray(_READ_SIZE)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc = crc32c.crc32c(view[:n], value=crc)
            size += n
    return size, f"{crc:08x}"


class RecordFileWriter:
    """One ArrayRecord file at a local path; ``close`` finishes it and says what it holds.

    A failure to create or write the file (a missing folder, a full disk: reported at ``close``)
    is an ``OSError`` naming the path."""

    def __init__(self, path: str, options: str = OPTIONS) -> None:
        self.path = path
        self.records = 0
        self._writer = _module().ArrayRecordWriter(path, options)  # a bad options string: ValueError
        self._closed = False
        if not self._writer.ok():  # the file could not be created: close says why
            self._fail_close()

    def write(self, record: bytes) -> None:
        try:
            self._writer.write(record)
        except RuntimeError as exc:
            raise _os_error(str(exc), self.path) from None
        self.records += 1

    def write_batch(self, records: pa.BinaryArray | pa.LargeBinaryArray | Sequence[bytes]) -> None:
        """Write many records: an Arrow binary array (no nulls) or a list of ``bytes``."""
        batch: Sequence[bytes] = records.to_pylist() if hasattr(records, "to_pylist") else records  # pybind takes bytes only
        write = self._writer.write
        try:
            for record in batch:
                write(record)
                self.records += 1
        except RuntimeError as exc:
            raise _os_error(str(exc), self.path) from None

    def close(self) -> WrittenFile:
        """Finish the file (footer, postscript) and return its record count, size and checksum.

        The checksum reads the file back once (from the page cache: about 1.4 GB/s here); the
        writer's own file handle is inside array_record and cannot be tapped."""
        if not self._closed:
            self._closed = True
            try:
                self._writer.close()
            except RuntimeError as exc:
                raise _os_error(str(exc), self.path) from None
        size, crc = file_checksum(self.path)
        return WrittenFile(self.records, size, crc)

    def _fail_close(self) -> None:
        self._closed = True
        try:
            self._writer.close()
        except RuntimeError as exc:
            raise _os_error(str(exc), self.path) from None
        raise OSError(errno.EIO, "cannot create the ArrayRecord file", self.path)

    def __enter__(self) -> RecordFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._writer.close()
            except RuntimeError:
                if exc[0] is None:
                    raise


@dataclasses.dataclass(frozen=True)
class WalkResult:
    """What ``walk`` found; the fields ``tfrecord_scan.ScanResult`` has, for the same reports."""

    path: str
    records: int  # records read and hash-checked before the first problem
    file_bytes: int
    crc32c: str  # of the file's bytes ("" without checksum)
    options: str = ""  # the writer's options, as the file records them
    error: str | None = None
    error_record: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe_error(self) -> str:
        if self.error is None:
            return ""
        return self.error if self.error_record is None else f"record {self.error_record}: {self.error}"


def _reason(exc: BaseException) -> str:
    """Riegeli's message on one line, without the hash values nobody can act on."""
    return _HASHES.sub("", " ".join(str(exc).split())).removeprefix("Corrupted Riegeli/records file: ")


def _open_problem(path: str, size: int, head: bytes) -> str | None:
    """What is wrong before a reader sees the file, or None."""
    if size == 0:
        return "empty file (0 bytes): no records"
    if not looks_like(head):
        if len(head) < len(SIGNATURE) and SIGNATURE.startswith(head):
            return f"truncated file: no ArrayRecord footer ({size} bytes)"
        return "no Riegeli file signature (not an ArrayRecord file, or its first 64 bytes are damaged)"
    return None


def _footer_problem(size: int, reader: Any) -> str:
    try:
        reader.close()
        reason = "no records index"
    except RuntimeError as exc:
        reason = _reason(exc)
    if size < 2 * BLOCK:
        return f"truncated file: no ArrayRecord footer ({size} bytes, under the 128 KiB of the smallest ArrayRecord file)"
    if size % BLOCK:
        return f"truncated file: no ArrayRecord footer ({size} bytes, not a whole number of 64 KiB blocks)"
    return f"damaged or truncated file: cannot read the ArrayRecord footer ({reason})"


def walk(
    path: str, on_record: OnRecord | None = None, limit: int | None = None, checksum: bool = True, on_damaged: OnDamaged | None = None
) -> WalkResult:
    """Read every record of a local ArrayRecord file (or the first ``limit``), counting them.

    Never raises for bad data: the first problem is one line in the result. Records are read one
    at a time (memory is one record); ``on_record`` sees each, and ``on_damaged`` the number of a
    record whose data is damaged, the walk going on past it. With ``checksum`` the whole file is
    read once more for its CRC32C, also when the walk stops early."""
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            head = f.read(len(SIGNATURE))
    except OSError as exc:
        return WalkResult(path, 0, 0, "", error=f"cannot open: {exc.strerror or exc}")
    problem = _open_problem(path, size, head)
    records = 0
    options = ""
    failed_at: int | None = None
    if problem is None:
        problem, records, options, failed_at = _read_records(path, size, on_record, limit, on_damaged)
    crc = ""
    if checksum:
        try:
            size, crc = file_checksum(path)
        except OSError as exc:
            return WalkResult(path, records, size, "", options, f"cannot read: {exc.strerror or exc}")
    return WalkResult(path, records, size, crc, options, problem, failed_at)


def _read_records(
    path: str, size: int, on_record: OnRecord | None, limit: int | None, on_damaged: OnDamaged | None = None
) -> tuple[str | None, int, str, int | None]:
    """(problem, records read, writer options, record of the problem) of one pass of the reader."""
    try:
        reader = _module().ArrayRecordReader(path, READ_OPTIONS)
    except RuntimeError as exc:  # the file cannot be opened (permissions, vanished)
        return f"cannot open: {_reason(exc)}", 0, "", None
    if not reader.ok():
        return _footer_problem(size, reader), 0, "", None
    try:
        options = reader.writer_options_string() or ""
        total = reader.num_records()
        stop = total if limit is None else min(total, limit)
        read = reader.read
        for index in range(stop):
            try:
                record = read()
            except (RuntimeError, IndexError) as exc:
                if on_damaged is None:
                    return f"damaged data: {_reason(exc)}", index, options, index
                on_damaged(index, f"damaged data: {_reason(exc)}")
                if index + 1 < stop:  # a reader that failed stays failed: a new one goes on at the next record
                    with contextlib.suppress(RuntimeError):
                        reader.close()
                    reader = _module().ArrayRecordReader(path, READ_OPTIONS)
                    reader.seek(index + 1)
                    read = reader.read
                continue
            if on_record is not None:
                on_record(index, index, memoryview(record))
        return None, stop, options, None
    finally:
        if reader.is_open():
            with contextlib.suppress(RuntimeError):  # a failure is reported above already
                reader.close()


def read_at(path: str, indices: Sequence[int]) -> list[bytes]:
    """The records at ``indices`` (in that order) of a local ArrayRecord file."""
    with RecordFileReader(path) as reader:
        return reader.read(indices)


class RecordFileReader:
    """Random access to one local ArrayRecord file by record number, for worker processes too.

    Opens on first use; pickles as its path (each process opens its own reader). Thread-safe: a
    lock guards the seek-and-read pair (Grain reads a source from several threads). A file that is
    damaged or not ArrayRecord raises ``CorruptShardError`` naming it."""

    def __init__(self, path: str, options: str = READ_OPTIONS) -> None:
        self.path = path
        self.options = options
        self._reader: Any = None
        self._len = -1
        self._lock = threading.Lock()

    def _open(self) -> Any:
        if self._reader is None:
            with self._lock:
                if self._reader is None:
                    self._reader = self._opened()
        return self._reader

    def _opened(self) -> Any:
        try:
            size = os.stat(self.path).st_size
            with open(self.path, "rb") as f:
                head = f.read(len(SIGNATURE))
        except OSError as exc:
            raise CorruptShardError(self.path, f"cannot open: {exc.strerror or exc}") from None
        problem = _open_problem(self.path, size, head)
        if problem is not None:
            raise CorruptShardError(self.path, problem)
        try:
            reader = _module().ArrayRecordReader(self.path, self.options)
        except RuntimeError as exc:
            raise CorruptShardError(self.path, f"cannot open: {_reason(exc)}") from None
        if not reader.ok():
            raise CorruptShardError(self.path, _footer_problem(size, reader))
        self._len = reader.num_records()
        return reader

    def __len__(self) -> int:
        self._open()
        return self._len

    def __getitem__(self, index: int) -> bytes:
        return self.read([index])[0]

    def read(self, indices: Sequence[int]) -> list[bytes]:
        """The records at ``indices``, by one seek and read each (faster than array_record's
        batched ``read(list)`` for records in the page cache: 220k/s against 45k/s for 1 KB)."""
        reader = self._open()
        out = []
        with self._lock:
            for i in indices:
                index = int(i)
                if not 0 <= index < self._len:
                    raise IndexError(f"record {index} of {self.path}, which holds {self._len}")
                try:
                    reader.seek(index)
                    out.append(reader.read())
                except (RuntimeError, IndexError) as exc:
                    raise CorruptShardError(self.path, f"record {index}: damaged data: {_reason(exc)}") from None
        return out

    def close(self) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(RuntimeError):  # reads already reported any damage
                reader.close()

    def __enter__(self) -> RecordFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["options"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RecordFileReader({self.path!r})"


def require() -> None:
    """Raise the one-line ``UsageError`` naming the extra unless ``array_record`` imports."""
    _module()
