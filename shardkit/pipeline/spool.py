"""An external sort for plan lines, in bounded memory (TFDS' ``core/shuffle.py`` idea).

Lines start with a fixed-width hex key. They go to 256 buckets by the key's first byte; buckets
stay in memory until all of them together pass ``buffer_bytes``, then each is appended to its
own file. Reading back sorts one bucket at a time, so memory is one bucket (about 1/256 of the
lines), not the split. Unsorted, a spool is one bucket in insertion order: a bounded buffer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

BUCKETS = 256
BUFFER_BYTES = 32 * 1024 * 1024


class Spool:
    def __init__(self, folder: str, sort: bool, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.folder = folder
        self.sort = sort
        self.buffer_bytes = buffer_bytes
        self._buffers = [bytearray() for _ in range(BUCKETS if sort else 1)]
        self._buffered = 0
        self._spilled = False
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
            self._spill()

    def _spill(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        for number, buffer in enumerate(self._buffers):
            if buffer:
                with open(self._path(number), "ab") as f:
                    f.write(buffer)
                buffer.clear()
        self._buffered = 0
        self._spilled = True

    def _path(self, number: int) -> str:
        return os.path.join(self.folder, f"bucket-{number:03d}")

    def buckets(self) -> Iterator[list[bytes]]:
        """Every line once, bucket by bucket (each sorted when the spool sorts), newline-free."""
        for number, buffer in enumerate(self._buffers):
            data = bytes(buffer)
            buffer.clear()  # read once: memory goes back as the buckets are consumed
            if self._spilled and os.path.exists(self._path(number)):
                with open(self._path(number), "rb") as f:
                    data = f.read() + data
                os.remove(self._path(number))
            if not data:
                continue
            lines = data.split(b"\n")
            lines.pop()  # after the last newline
            del data
            if self.sort:
                lines.sort()
            yield lines
