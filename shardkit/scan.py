"""The fast framing walk: every record's length CRC and data CRC, truncation, and a file checksum.

One pass over the file in large reads into one reused buffer; records are checked in place
through memoryviews (the ``crc32c`` package takes them without a copy), and a record larger than
the buffer is checked in pieces, so memory stays bounded whatever the file or a hostile length
field says. GZIP and ZLIB files are inflated in bounded steps too. TensorFlow is never imported.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Callable
from typing import BinaryIO

import crc32c

from shardkit.tfrecord import FOOTER_SIZE, HEADER_SIZE

CHUNK = 8 << 20
_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
COMPRESSIONS = ("none", "gzip", "zlib")

OnRecord = Callable[[int, int, memoryview], None]  # (record index, stream offset, payload)


@dataclasses.dataclass(frozen=True)
class ScanResult:
    path: str
    compression: str  # none, gzip or zlib: what the bytes are, whatever the name says
    records: int  # complete, CRC-valid records before the first problem
    file_bytes: int
    crc32c: str  # of the file's bytes on disk (what the manifest records)
    error: str | None = None
    error_record: int | None = None
    error_offset: int | None = None  # in the uncompressed record stream

    @property
    def ok(self) -> bool:
        return self.error is None

    def describe_error(self) -> str:
        if self.error is None:
            return ""
        if self.error_record is None:
            return self.error
        return f"record {self.error_record} at byte {self.error_offset}: {self.error}"


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def detect_compression(head: bytes) -> str:
    """What a file starts with: a valid record header, gzip's magic bytes, or a zlib header."""
    if len(head) >= HEADER_SIZE:
        _, length_crc = _HEADER.unpack_from(head)
        if _masked(crc32c.crc32c(head[:8])) == length_crc:
            return "none"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return "none"


class _Source:
    """Fills buffers with the record stream, inflating if needed; checksums the raw file bytes."""

    def __init__(self, f: BinaryIO, compression: str) -> None:
        self._f = f
        self.file_crc = 0
        self.file_bytes = 0
        self._raw = bytearray(CHUNK)
        self._raw_view = memoryview(self._raw)
        self._inflate = None if compression == "none" else zlib.decompressobj(31 if compression == "gzip" else 15)
        self._pending = b""  # inflated bytes not yet handed out
        self._eof = False

    def read_raw(self) -> memoryview:
        n = self._f.readinto(self._raw)  # type: ignore[attr-defined]
        chunk = self._raw_view[:n]
        if n:
            self.file_crc = crc32c.crc32c(chunk, value=self.file_crc)
            self.file_bytes += n
        return chunk

    def readinto(self, target: memoryview) -> int:
        if self._inflate is None:
            n = self._f.readinto(target)  # type: ignore[attr-defined]
            if n:
                self.file_crc = crc32c.crc32c(target[:n], value=self.file_crc)
                self.file_bytes += n
            return n or 0
        want = len(target)
        while not self._pending and not self._eof:
            tail = self._inflate.unconsumed_tail
            if tail:
                self._pending = self._inflate.decompress(tail, want)
                continue
            chunk = self.read_raw()
            if not chunk:
                self._eof = True
                self._pending = self._inflate.flush()
                if not self._inflate.eof:
                    raise zlib.error("compressed stream ends early (truncated file)")
                break
            self._pending = self._inflate.decompress(chunk, want)
            if self._inflate.eof and self._inflate.unused_data:
                # concatenated gzip members, as `cat a.gz b.gz` makes: start the next one
                rest = self._inflate.unused_data
                self._inflate = zlib.decompressobj(31)
                self._pending += self._inflate.decompress(rest, want)
        n = min(want, len(self._pending))
        target[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def scan(
    path: str, compression: str = "auto", on_record: OnRecord | None = None, limit: int | None = None, checksum: bool = True
) -> ScanResult:
    """Walk every record of ``path`` (or the first ``limit``), checking framing and CRCs.

    Never raises for bad data: the first problem is returned in the result. ``on_record`` sees
    each valid payload that fits in the buffer (records over 8 MB are CRC-checked but not passed).
    With ``checksum`` the whole file is read for its CRC32C even when the walk stops early.
    """
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below, whatever happens
    except OSError as exc:
        return ScanResult(path, "none", 0, 0, "", f"cannot open: {exc.strerror}")
    with f:
        try:
            head = f.read(HEADER_SIZE)
            f.seek(0)
        except OSError as exc:
            return ScanResult(path, "none", 0, 0, "", f"cannot read: {exc.strerror}")
        if not head:
            return ScanResult(path, "none", 0, 0, f"{0:08x}", "empty file (0 bytes): no records")
        kind = detect_compression(head) if compression == "auto" else compression
        source = _Source(f, kind)
        try:
            records, error, offset = _walk(source, on_record, limit)
            while checksum and source.read_raw():
                pass  # the walk stopped early: finish the file checksum
        except (zlib.error, OSError) as exc:
            return ScanResult(path, kind, 0, source.file_bytes, "", f"cannot read {kind} data: {exc}")
        result = ScanResult(path, kind, records, source.file_bytes, f"{source.file_crc:08x}" if checksum else "")
        if error:
            return dataclasses.replace(result, error=error, error_record=records, error_offset=offset)
        return result


def _walk(source: _Source, on_record: OnRecord | None, limit: int | None) -> tuple[int, str | None, int]:
    """The record loop: returns (valid records, first error or None, stream offset of the error)."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    start = end = 0  # valid unread bytes are buf[start:end]
    offset = 0  # stream offset of buf[start]
    records = 0
    eof = False

    def fill(need: int) -> bool:
        """Make at least ``need`` bytes available at buf[start:]; False if the stream ends first."""
        nonlocal start, end, eof
        if end - start >= need:
            return True
        if start:
            view[: end - start] = view[start:end]
            end -= start
            start = 0
        while end - start < need and not eof and end < len(buf):
            n = source.readinto(view[end:])
            if n == 0:
                eof = True
            end += n
        return end - start >= need

    crc, unpack_header, unpack_u32 = crc32c.crc32c, _HEADER.unpack_from, _U32.unpack_from  # hot loop: local names
    mask = 0xFFFFFFFF
    while limit is None or records < limit:
        if end - start < HEADER_SIZE and not fill(HEADER_SIZE):
            if end - start == 0:
                return records, None, offset
            return records, f"truncated record header ({end - start} of 12 bytes)", offset
        length, length_crc = unpack_header(buf, start)
        c = crc(view[start : start + 8])
        if (((c >> 15) | (c << 17)) + _MASK_DELTA) & mask != length_crc:
            return records, "length CRC mismatch (not a TFRecord file, or damaged)", offset
        need = HEADER_SIZE + length + FOOTER_SIZE
        if end - start >= need or (need <= len(buf) and fill(need)):
            payload_end = start + HEADER_SIZE + length
            payload = view[start + HEADER_SIZE : payload_end]
            c = crc(payload)
            if (((c >> 15) | (c << 17)) + _MASK_DELTA) & mask != unpack_u32(buf, payload_end)[0]:
                return records, "data CRC mismatch", offset
            if on_record is not None:
                on_record(records, offset, payload)
            start += need
        elif need <= len(buf):
            return records, f"truncated record (length field says {length} bytes, {end - start - HEADER_SIZE} remain)", offset
        else:
            # A record larger than the buffer: checksum it in pieces.
            start += HEADER_SIZE
            remaining, running = length, 0
            while remaining:
                if not fill(1):
                    return records, f"truncated record (length field says {length} bytes, {length - remaining} remain)", offset
                take = min(remaining, end - start)
                running = crc(view[start : start + take], value=running)
                start += take
                remaining -= take
            if not fill(FOOTER_SIZE):
                return records, "truncated record footer", offset
            if _masked(running) != unpack_u32(buf, start)[0]:
                return records, "data CRC mismatch", offset
            start += FOOTER_SIZE
        offset += need
        records += 1
    return records, None, offset
