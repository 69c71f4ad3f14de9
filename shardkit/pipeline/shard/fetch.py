"""An entry's files as bytes: local ones through the file descriptor, those in buckets fetched ahead.

A worker that asked a store for one image at a time would spend each record waiting for one
HTTP round trip. ``Fetcher.ahead`` passes a shard's entries through unchanged while the files in
buckets of the next batch (up to ``PREFETCH_ENTRIES`` entries, about ``PREFETCH_BYTES``) are
fetched concurrently in a thread, so requests overlap each other and the CPU work on the current
batch. Memory is two batches of files. Local files are read when asked, as before: no thread.

Every path is first held to the build's read rule (``storage.boundary``): where its input's paths
must stay, and which URL schemes are read. A refused one is never opened nor fetched: it is an
``ImageProblem``, a bad entry like a missing file. The check is made here, where the file is read,
in the workers side by side: planning a million-image COCO file costs nothing more, and a file
costs a dict lookup (its folder's real path) and no system call: it is opened with ``O_NOFOLLOW``,
and only a link is then resolved and held to the rule.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from shardkit.formats.image_headers import ImageProblem
from shardkit.pipeline.inputs.entries import Entry
from shardkit.storage import location
from shardkit.storage.boundary import Boundary

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

PREFETCH_ENTRIES = 64  # entries whose files in buckets are fetched together, at most
PREFETCH_BYTES = 32 << 20  # about this many bytes a batch, once the first batch tells the files' size
FIRST_BATCH = 16  # entries of the first batch, before any file's size is known


class Fetcher:
    """Reads the files of a shard's entries (the values in ``columns``)."""

    def __init__(self, columns: Sequence[int], rule: Boundary | None = None) -> None:
        self.columns = list(columns)
        self.rule = rule or Boundary()
        self._fetched: dict[str, bytes | None] = {}

    def ahead(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        """``entries``, in order, with the files in buckets of each batch fetched before it is
        reached: the first batch at once, each next one in a thread while this one is used."""
        items = iter(entries)
        batch = list(itertools.islice(items, FIRST_BATCH))
        fetched = self._fetch(batch)
        pool: ThreadPoolExecutor | None = None
        try:
            while batch:
                following = list(itertools.islice(items, self._batch_size(batch, fetched)))
                urls = self._urls(following)
                future: Future[dict[str, bytes | None]] | None = None
                if urls:
                    if pool is None:
                        from concurrent.futures import ThreadPoolExecutor  # only where files are in a bucket

                        pool = ThreadPoolExecutor(1, thread_name_prefix="shardkit-fetch")
                    future = pool.submit(location.read_many, urls)
                self._fetched = fetched
                yield from batch
                fetched = future.result() if future is not None else {}
                batch = following
        finally:
            self._fetched = {}
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def read(self, path: str | bytes, key: str, source: str = "") -> bytes:
        """The whole file (or the bytes an input held in place of a path) the input ``source``
        names; a missing or unreadable one, or one the read rule refuses, is an ``ImageProblem``
        naming ``key`` and ``path``."""
        if isinstance(path, bytes):
            return path
        refused = self.rule.refusal(path, source, last_link=False)
        if refused is not None:
            raise ImageProblem(f"{key}: {refused}")
        data = self._fetched.get(path) if self._fetched else None
        if data is not None:
            return data
        try:
            if "://" in path and location.is_url(path):
                return location.read_bytes(path)
            confined = self.rule.confines(source)
            try:
                return _read_all(path, no_follow=confined)  # a link is followed only once the rule saw where it leads
            except OSError as exc:
                if not confined or exc.errno != errno.ELOOP:
                    raise
            refused = self.rule.refusal(path, source)
            if refused is not None:
                raise ImageProblem(f"{key}: {refused}")
            return _read_all(path)
        except FileNotFoundError:
            raise ImageProblem(f"{key}: {path}: file not found") from None
        except IsADirectoryError:
            raise ImageProblem(f"{key}: {path}: is a folder, not a file") from None
        except OSError as exc:
            raise ImageProblem(f"{key}: {path}: cannot read: {exc.strerror or exc}") from None

    def _urls(self, batch: list[Entry]) -> list[str]:
        return [
            v
            for e in batch
            for i in self.columns
            if isinstance(v := e.values[i], str) and "://" in v and location.is_url(v) and self.rule.refusal(v, e.source) is None
        ]

    def _fetch(self, batch: list[Entry]) -> dict[str, bytes | None]:
        urls = self._urls(batch)
        return location.read_many(urls) if urls else {}

    @staticmethod
    def _batch_size(batch: list[Entry], fetched: dict[str, bytes | None]) -> int:
        got = sum(len(data) for data in fetched.values() if data)
        if not got:
            return PREFETCH_ENTRIES
        return max(1, min(PREFETCH_ENTRIES, PREFETCH_BYTES * len(batch) // got))


def _read_all(path: str, no_follow: bool = False) -> bytes:
    """A whole file, through the file descriptor: a third of ``open().read()``'s cost for the few-KB
    files that small-record builds read by the million (no file object, no buffer, no fstat).
    ``no_follow``: a last name that is a link fails with ``ELOOP`` (``O_NOFOLLOW``). ``O_NONBLOCK``
    (no effect on a file): a FIFO named like an image reads as empty, where it would wait forever."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (getattr(os, "O_NOFOLLOW", 0) if no_follow else 0)
    fd = os.open(path, flags)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):  # blocks below malloc's mmap threshold: from the heap, shrunk in place
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
