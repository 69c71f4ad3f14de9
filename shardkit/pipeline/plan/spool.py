"""An external sort for plan lines, in bounded memory (TFDS' ``core/shuffle.py`` idea).

Lines start with a fixed-width hex key. They go to 256 buckets by the key's first byte; buckets
stay in memory until all of them together pass ``buffer_bytes``, then each is appended to its
own file. Reading back sorts one bucket at a time, so memory is one bucket (about 1/256 of the
lines), not the split. Unsorted, a spool is one bucket in insertion order, read back in blocks.
Spools filled side by side (one per piece of the inputs, in other processes) are read back as
one: bucket by bucket, each bucket gathered from every spool.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

BUCKETS = 256
BUFFER_BYTES = 32 * 1024 * 1024
BLOCK_BYTES = 8 * 1024 * 1024  # unsorted spools are read back in blocks of about this size


class Spool:
    def __init__(self, folder: str, sort: bool, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.folder = folder
        self.sort = sort
        self.buffer_bytes = buffer_bytes
        self._buffers = [bytearray() for _ in range(BUCKETS if sort else 1)]
        self._buffered = 0
        self.lines = 0

    def add(self, line: bytes, bucket: int) -> None:
        """Add one line (no newline in it). ``bucket``: its key's first byte (what its first two hex
        digits say, so that buckets in order are lines in order); ignored when not sorting."""
        buffer = self._buffers[bucket] if self.sort else self._buffers[0]
        buffer += line
        buffer += b"\n"
        self._buffered += len(line) + 1
        self.lines += 1
        if self._buffered > self.buffer_bytes:
            self.spill()

    def add_lines(self, data: bytes | memoryview, count: int, bucket: int) -> None:
        """Add ``count`` newline-terminated lines at once, all of bucket ``bucket`` (see ``add``)."""
        buffer = self._buffers[bucket] if self.sort else self._buffers[0]
        buffer += data
        self._buffered += len(data)
        self.lines += count
        if self._buffered > self.buffer_bytes:
            self.spill()

    def spill(self) -> None:
        """Append every buffered line to its bucket's file, leaving the buffers empty."""
        os.makedirs(self.folder, exist_ok=True)
        for number, buffer in enumerate(self._buffers):
            if buffer:
                with open(self._path(number), "ab") as f:
                    f.write(buffer)
                buffer.clear()
        self._buffered = 0

    def _path(self, number: int) -> str:
        return os.path.join(self.folder, f"bucket-{number:03d}")

    def _take(self, number: int) -> bytes:
        """Bucket ``number``'s lines, newline-terminated, once: the file and the buffer are let go."""
        data = bytes(self._buffers[number])
        self._buffers[number].clear()
        path = self._path(number)
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read() + data
            os.remove(path)
        return data

    def _blocks(self) -> Iterator[list[bytes]]:
        """An unsorted spool's lines in order, in blocks of whole lines."""
        path = self._path(0)
        if os.path.exists(path):
            with open(path, "rb") as f:
                rest = b""
                while block := f.read(BLOCK_BYTES):
                    lines = (rest + block).split(b"\n")
                    rest = lines.pop()
                    yield lines
            os.remove(path)
        tail = self._take(0)
        if tail:
            lines = tail.split(b"\n")
            lines.pop()
            yield lines


def merged(spools: Sequence[Spool]) -> Iterator[list[bytes]]:
    """The lines of ``spools`` (all sorted or all not) as one spool's: sorted bucket by bucket, or
    the spools' blocks one spool after the other."""
    if not spools:
        return
    if not spools[0].sort:
        for spool in spools:
            yield from spool._blocks()
        return
    for number in range(BUCKETS):
        data = b"".join(spool._take(number) for spool in spools)
        if not data:
            continue
        lines = data.split(b"\n")
        lines.pop()  # after the last newline
        del data
        lines.sort()
        yield lines
