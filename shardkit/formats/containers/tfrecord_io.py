"""TFRecord framing, written and read without TensorFlow.

Each record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``,
little-endian, exactly as ``tf.io.TFRecordWriter`` writes it. The writer works over any binary file
object (plain or gzip) and keeps a running CRC32C of the bytes it hands to the file, so the caller
gets a whole-file checksum without a second pass.
"""

from __future__ import annotations

import gzip
import itertools
import struct
from collections.abc import Iterator
from typing import BinaryIO

import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from shardkit.errors import CorruptShardError
from shardkit.formats.containers.masked_crc import length_crcs, mask_all, masked_crc
from shardkit.formats.example_batch import as_binary_array, binary_offsets, binary_values

_EMPTY_RECORD = pa.scalar(b"", pa.large_binary())
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
HEADER_SIZE = 12
FOOTER_SIZE = 4


def frame(data: bytes) -> bytes:
    """One record's bytes as they appear in the file."""
    length = _U64.pack(len(data))
    return b"".join((length, _U32.pack(masked_crc(length)), data, _U32.pack(masked_crc(data))))


def frame_batch(records: pa.Array | pa.ChunkedArray) -> tuple[memoryview, npt.NDArray[np.int64]]:
    """The TFRecord framing of every record, concatenated in order, and each record's framed length.

    The bytes equal ``b"".join(frame(r) for r in records)``; pass both to ``RecordWriter.write_framed``.
    """
    records = binary_values(records, "records")
    count = len(records)
    offsets = binary_offsets(records)
    lengths = np.diff(offsets)
    view = memoryview(records.buffers()[2] or b"")
    bounds = offsets.tolist()
    crc = crc32c.crc32c
    # One C call per record: slicing a memoryview is the cheapest way Python has to hand each one over.
    data_crcs = np.array([crc(view[start:end]) for start, end in itertools.pairwise(bounds)], dtype=np.uint64)
    header = np.empty((count, HEADER_SIZE), dtype=np.uint8)
    header[:, :8] = lengths.astype("<u8").view(np.uint8).reshape(count, 8)
    header[:, 8:] = mask_all(length_crcs(lengths)).view(np.uint8).reshape(count, 4)
    footer = mask_all(data_crcs).view(np.uint8).reshape(count, FOOTER_SIZE)
    framed = pc.binary_join_element_wise(as_binary_array(header), records, as_binary_array(footer), _EMPTY_RECORD)
    framed_offsets = binary_offsets(framed)
    buffer = framed.buffers()[2]
    data = memoryview(b"") if buffer is None else memoryview(buffer)[int(framed_offsets[0]) : int(framed_offsets[-1])]
    return data, lengths + HEADER_SIZE + FOOTER_SIZE


class RecordWriter:
    """Appends framed records to ``fileobj`` and tracks count, size and CRC32C of what it wrote.

    ``bytes_written`` and ``crc32c`` describe the bytes on disk only when ``fileobj`` is a plain
    file; for gzip the caller checksums the compressed file itself (see ``worker.py``).
    """

    def __init__(self, fileobj: BinaryIO) -> None:
        self._file = fileobj
        self.records = 0
        self.bytes_written = 0
        self.crc32c = 0
        self.flat_offsets: list[int] = []  # offset, framed length, offset, ... per record, for .idx files

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """(offset, framed length) of every record written."""
        return list(zip(self.flat_offsets[0::2], self.flat_offsets[1::2], strict=True))

    def write(self, data: bytes) -> None:
        chunk = frame(data)
        self._file.write(chunk)
        self.crc32c = crc32c.crc32c(chunk, value=self.crc32c)
        self.flat_offsets += (self.bytes_written, len(chunk))
        self.bytes_written += len(chunk)
        self.records += 1

    def write_framed(self, buffer: bytes | bytearray | memoryview, framed_lengths: npt.ArrayLike) -> None:
        """Append records already framed (``frame_batch``) in one write.

        ``buffer`` is the frames one after another, ``framed_lengths`` each frame's size; the
        count, size, CRC32C and offsets afterwards are those of a ``write()`` per record.
        """
        lengths = np.asarray(framed_lengths, dtype=np.int64).reshape(-1)
        view = memoryview(buffer).cast("B")
        if int(lengths.sum()) != len(view):
            raise ValueError(f"the framed lengths add up to {int(lengths.sum())} bytes, the buffer holds {len(view)}")
        self._file.write(view)
        self.crc32c = crc32c.crc32c(view, value=self.crc32c)
        starts = self.bytes_written + np.cumsum(lengths) - lengths
        self.flat_offsets += np.column_stack((starts, lengths)).ravel().tolist()  # no tuple a record
        self.bytes_written += len(view)
        self.records += len(lengths)


def open_maybe_gzip(path: str) -> BinaryIO:
    """Open ``path`` for reading, transparently un-gzipping when it starts with gzip's magic bytes."""
    raw = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def read_records(path: str) -> Iterator[bytes]:
    """Yield every record's payload, checking both CRCs; raise ``CorruptShardError`` at the first fault.

    This is the simple, obviously-correct reader (used by tests, manifest rebuilds and small reads).
    """
    offset = 0
    index = 0
    with open_maybe_gzip(path) as f:
        while True:
            header = f.read(HEADER_SIZE)
            if not header:
                return
            if len(header) < HEADER_SIZE:
                raise CorruptShardError(path, "truncated record header", index, offset)
            length_bytes = header[:8]
            (length,) = _U64.unpack(length_bytes)
            (length_crc,) = _U32.unpack(header[8:])
            if masked_crc(length_bytes) != length_crc:
                raise CorruptShardError(path, "length CRC mismatch", index, offset)
            data = f.read(length)
            if len(data) < length:
                raise CorruptShardError(path, "truncated record payload", index, offset)
            footer = f.read(FOOTER_SIZE)
            if len(footer) < FOOTER_SIZE:
                raise CorruptShardError(path, "truncated record footer", index, offset)
            if masked_crc(data) != _U32.unpack(footer)[0]:
                raise CorruptShardError(path, "data CRC mismatch", index, offset)
            yield data
            offset += HEADER_SIZE + length + FOOTER_SIZE
            index += 1


def file_crc32c(path: str, chunk_size: int = 1 << 22) -> int:
    """CRC32C of a whole file, read in large chunks into one reused buffer."""
    crc = 0
    buf = bytearray(chunk_size)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc = crc32c.crc32c(view[:n], value=crc)
    return crc
