"""The fast framing walk: every record's length CRC and data CRC, truncation, and a file checksum.

One pass over the file in large reads into one reused buffer; records are checked in place
through memoryviews (the ``crc32c`` package takes them without a copy), and a record larger than
the buffer is checked in pieces, so memory stays bounded whatever the file or a hostile length
field says. GZIP and ZLIB files are inflated in bounded steps too. TensorFlow is never imported.
A URL (``gs://``, ``s3://``) is streamed the same way through ``storage.location.open_read``:
block reads of a few MB, never the whole object in memory; a local file is read unbuffered.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import IO, Protocol

import crc32c

from shardkit.errors import ShardkitError
from shardkit.formats.containers.adapter import OnDamaged, OnFrame, OnRecord, ScanResult
from shardkit.formats.containers.masked_crc import mask
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE
from shardkit.storage import location

CHUNK = 8 << 20
MAX_PARSED_RECORD = 256 << 20  # records handed to on_record (inspect, verify --deep) are held whole
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
COMPRESSIONS = ("none", "gzip", "zlib")


def detect_compression(head: bytes) -> str:
    """What a file starts with: a valid record header, gzip's magic bytes, or a zlib header."""
    if len(head) >= HEADER_SIZE:
        _, length_crc = _HEADER.unpack_from(head)
        if mask(crc32c.crc32c(head[:8])) == length_crc:
            return "none"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return "none"


def recognised(head: bytes) -> str | None:
    """The compression of a TFRecord file that starts with ``head`` (an empty file is one, with no
    records); None when the first bytes are neither a sound record header nor gzip or zlib."""
    if not head:
        return "none"
    kind = detect_compression(head)
    if kind != "none":
        return kind
    if len(head) >= HEADER_SIZE and mask(crc32c.crc32c(head[:8])) == _HEADER.unpack_from(head)[1]:
        return "none"
    return None


def inflate_to(path: str, compression: str, target: str) -> str | None:
    """Write the record stream of ``path`` (a URL, or GZIP/ZLIB) to the local file ``target``,
    in bounded steps; returns why the stream ended early (a truncated or damaged member), if it did."""
    if location.is_url(path):
        with location.explained(path):
            f: IO[bytes] = location.open_read(path)
        stream: _Readable = _StoreFile(f, path)
    else:
        f = stream = open(path, "rb", buffering=0)  # noqa: SIM115
    with f, open(target, "wb") as out:
        source = _Source(stream, compression)
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            try:
                n = source.readinto(view)
            except zlib.error as exc:
                return f"cannot read {compression} data after {out.tell()} bytes of records: {exc}"
            if not n:
                return None
            out.write(view[:n])


class _Readable(Protocol):
    """What the walk needs of a file: a local one unbuffered, or a store's object."""

    def read(self, n: int, /) -> bytes: ...
    def readinto(self, target: memoryview | bytearray, /) -> int | None: ...
    def seek(self, offset: int, /) -> int: ...


class _Source:
    """Fills buffers with the record stream, inflating if needed; checksums the raw file bytes.

    Compressed input is inflated at most ``len(target)`` bytes at a time (no zip bomb can blow up
    memory), and concatenated members (``cat a.gz b.gz``) are read one after another, as gzip does.
    """

    def __init__(self, f: _Readable, compression: str) -> None:
        self._f = f
        self.file_crc = 0
        self.file_bytes = 0
        self._raw = bytearray(CHUNK)
        self._raw_view = memoryview(self._raw)
        self._wbits = 31 if compression == "gzip" else 15
        self._inflate = None if compression == "none" else zlib.decompressobj(self._wbits)
        self._input = b""  # compressed bytes not yet fed to the inflater
        self._pending = b""  # inflated bytes not yet handed out
        self._done = False
        self._truncated = False

    def read_raw(self) -> memoryview:
        n = self._f.readinto(self._raw) or 0
        chunk = self._raw_view[:n]
        if n:
            self.file_crc = crc32c.crc32c(chunk, value=self.file_crc)
            self.file_bytes += n
        return chunk

    def readinto(self, target: memoryview) -> int:
        if self._inflate is None:
            n = self._f.readinto(target)
            if n:
                self.file_crc = crc32c.crc32c(target[:n], value=self.file_crc)
                self.file_bytes += n
            return n or 0
        want = len(target)
        while not self._pending and not self._done:
            self._inflate_some(want)
        if not self._pending and self._truncated:
            raise zlib.error("compressed stream ends early (truncated file)")
        n = min(want, len(self._pending))
        target[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _inflate_some(self, want: int) -> None:
        assert self._inflate is not None
        if self._inflate.eof:
            # After the end of a member, unused_data holds every byte fed past it (Python 3.11 may
            # leave a copy of the same bytes in unconsumed_tail too: reading both doubles them).
            leftover = self._inflate.unused_data + self._input
            self._input = leftover or bytes(self.read_raw())
            if not self._input:
                self._done = True  # a clean end right after a complete member
                return
            self._inflate = zlib.decompressobj(self._wbits)  # the next member
        if not self._input:
            self._input = self._inflate.unconsumed_tail or bytes(self.read_raw())
        if not self._input:
            self._pending = self._inflate.flush()
            self._done = True
            self._truncated = not self._inflate.eof
            return
        data, self._input = self._input, b""
        self._pending = self._inflate.decompress(data, want)
        if not self._inflate.eof:
            self._input = self._inflate.unconsumed_tail


def scan(
    path: str,
    compression: str = "auto",
    on_record: OnRecord | None = None,
    limit: int | None = None,
    checksum: bool = True,
    on_frame: OnFrame | None = None,
    on_damaged: OnDamaged | None = None,
) -> ScanResult:
    """Walk every record of ``path`` (or the first ``limit``), checking framing and CRCs.

    Never raises for bad data: the first problem is returned in the result. ``on_record`` sees
    each valid payload (records over 8 MB are gathered from pieces; over 256 MB they are reported,
    since parsing needs them whole). ``on_damaged`` sees the stream offset of each record whose
    data CRC is wrong, and the walk goes on past it (its length field was sound).
    With ``checksum`` the whole file is read for its CRC32C even when the walk stops early.
    """
    remote = location.is_url(path)
    try:  # the files are closed below, whatever happens
        if remote:
            f: IO[bytes] = location.open_read(path)
            stream: _Readable = _StoreFile(f, path)
        else:
            f = stream = open(path, "rb", buffering=0)  # noqa: SIM115
    except FileNotFoundError as exc:
        return ScanResult(path, "none", 0, 0, "", f"cannot open: {'no such object' if remote else exc.strerror}")
    except OSError as exc:
        return ScanResult(path, "none", 0, 0, "", f"cannot open: {exc.strerror or exc}")
    except ShardkitError as exc:  # a store's failure, already one line
        return ScanResult(path, "none", 0, 0, "", f"cannot open: {_without(path, exc)}")
    with f:
        try:
            head = stream.read(HEADER_SIZE)
            stream.seek(0)
        except (OSError, ShardkitError) as exc:
            return ScanResult(path, "none", 0, 0, "", f"cannot read: {_reason(path, exc)}")
        if not head:
            return ScanResult(path, "none", 0, 0, f"{0:08x}", "empty file (0 bytes): no records")
        kind = detect_compression(head) if compression == "auto" else compression
        source = _Source(stream, kind)
        try:
            records, error, offset = _walk(source, on_record, limit, kind, on_frame, on_damaged)
            while checksum and source.read_raw():
                pass  # the walk stopped early: finish the file checksum
        except (OSError, ShardkitError) as exc:
            return ScanResult(path, kind, 0, source.file_bytes, "", f"cannot read: {_reason(path, exc)}")
        if error and records == 0 and kind == "zlib" and compression == "auto" and error.startswith("cannot read zlib"):
            f.close()
            return scan(path, "none", on_record, limit, checksum, on_frame, on_damaged)  # only guessed zlib: a damaged plain file
        result = ScanResult(path, kind, records, source.file_bytes, f"{source.file_crc:08x}" if checksum else "")
        if error:
            return dataclasses.replace(result, error=error, error_record=records, error_offset=offset)
        return result


class _StoreFile:
    """An object being read from a store: its client's own failures (a dropped connection after
    the client's retries, expired credentials) become one ``ShardkitError`` line naming the URL."""

    def __init__(self, f: IO[bytes], url: str) -> None:
        self._f, self._url = f, url

    def read(self, n: int) -> bytes:
        with location.explained(self._url):
            return self._f.read(n)

    def readinto(self, target: memoryview | bytearray) -> int:
        with location.explained(self._url):
            return int(self._f.readinto(target))  # type: ignore[attr-defined]

    def seek(self, offset: int) -> int:
        with location.explained(self._url):
            return self._f.seek(offset)


def _reason(path: str, exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    return _without(path, exc)


def _without(path: str, exc: BaseException) -> str:
    """A store error's line without the URL in front: the caller's report names the file already."""
    return str(exc).removeprefix(f"{path}: ")


def _walk(
    source: _Source,
    on_record: OnRecord | None,
    limit: int | None,
    kind: str = "none",
    on_frame: OnFrame | None = None,
    on_damaged: OnDamaged | None = None,
) -> tuple[int, str | None, int]:
    """The record loop: returns (valid records, first error or None, stream offset of the error)."""
    try:
        return _walk_records(source, on_record, limit, on_frame, on_damaged)
    except _StreamError as exc:
        return exc.records, f"cannot read {kind} data: {exc.reason}", exc.offset


class _StreamError(Exception):
    def __init__(self, records: int, offset: int, reason: str) -> None:
        self.records, self.offset, self.reason = records, offset, reason


def _walk_records(
    source: _Source, on_record: OnRecord | None, limit: int | None, on_frame: OnFrame | None, on_damaged: OnDamaged | None
) -> tuple[int, str | None, int]:
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
            try:
                n = source.readinto(view[end:])
            except zlib.error as exc:
                raise _StreamError(records, offset, str(exc)) from None
            if n == 0:
                eof = True
            end += n
        return end - start >= need

    crc, unpack_header, unpack_u32 = crc32c.crc32c, _HEADER.unpack_from, _U32.unpack_from  # hot loop: local names
    while limit is None or records < limit:
        if end - start < HEADER_SIZE and not fill(HEADER_SIZE):
            if end - start == 0:
                return records, None, offset
            return records, f"truncated record header ({end - start} of 12 bytes)", offset
        length, length_crc = unpack_header(buf, start)
        c = crc(view[start : start + 8])
        if mask(c) != length_crc:
            return records, "length CRC mismatch (not a TFRecord file, or damaged)", offset
        need = HEADER_SIZE + length + FOOTER_SIZE
        if end - start >= need or (need <= len(buf) and fill(need)):
            payload_end = start + HEADER_SIZE + length
            payload = view[start + HEADER_SIZE : payload_end]
            c = crc(payload)
            if mask(c) != unpack_u32(buf, payload_end)[0]:
                if on_damaged is None:
                    return records, "data CRC mismatch", offset
                on_damaged(offset, "data CRC mismatch")
                start += need
                offset += need
                continue
            if on_record is not None:
                on_record(records, offset, payload)
            start += need
        elif need <= len(buf):
            remain = end - start - HEADER_SIZE
            if remain >= length:
                return records, f"truncated record footer ({remain - length} of 4 bytes)", offset
            return records, f"truncated record (length field says {length} bytes, {remain} remain)", offset
        else:
            # A record larger than the buffer: checksum it in pieces; collect it only for a
            # caller that parses records, and only up to a bound.
            too_big = on_record is not None and length > MAX_PARSED_RECORD
            collected = bytearray() if on_record is not None and not too_big else None
            start += HEADER_SIZE
            remaining, running = length, 0
            while remaining:
                if not fill(1):
                    return records, f"truncated record (length field says {length} bytes, {length - remaining} remain)", offset
                take = min(remaining, end - start)
                running = crc(view[start : start + take], value=running)
                if collected is not None:
                    collected += view[start : start + take]
                start += take
                remaining -= take
            if not fill(FOOTER_SIZE):
                return records, f"truncated record footer ({end - start} of 4 bytes)", offset
            if mask(running) != unpack_u32(buf, start)[0]:
                if on_damaged is None:
                    return records, "data CRC mismatch", offset
                on_damaged(offset, "data CRC mismatch")
                start += FOOTER_SIZE
                offset += need
                continue
            if too_big:
                return records, f"a {length}-byte record, over the {MAX_PARSED_RECORD >> 20} MB that can be parsed", offset
            if on_record is not None and collected is not None:
                on_record(records, offset, memoryview(collected))
            start += FOOTER_SIZE
        if on_frame is not None:
            on_frame(offset, need)
        offset += need
        records += 1
    return records, None, offset
