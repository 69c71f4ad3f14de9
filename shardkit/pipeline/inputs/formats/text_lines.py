"""What the text formats share: a file or a piece of it opened as UTF-8 text, local or in a
bucket, and a file cut into pieces at line ends.

A store's file is streamed in blocks like a local one; its failure mid-file (after the store's
own retries) is one line naming the file, and bytes that are not UTF-8 are one line with the
offset where they are.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import io
from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row, TableBatch, found_at, rows_of
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class TextFormat(InputFormat):
    """A format of UTF-8 text: ``read_rows`` opens the file or piece and hands it, as lines, to
    ``text_rows``, the format's own loop."""

    # Each line is a row alone, so a piece may begin after any line end (not so in csv: a
    # quoted field may hold line breaks).
    cuts_at_line_ends: ClassVar[bool] = False

    def cut(self, path: str, piece_bytes: int) -> list[Piece]:
        """Pieces of about ``piece_bytes``, each ending after a ``\\n``; small files stay whole."""
        size = location.size(path)
        if size is None:
            raise ShardkitError(f"{path}: cannot read index file: file not found")
        if not self.cuts_at_line_ends or size <= piece_bytes:
            return [Piece(path)]
        return cut_at_line_ends(path, piece_bytes)

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        source = piece.path
        try:
            if piece.whole:
                # A BOM: spreadsheets write one. A store's file is streamed in blocks, like a local one.
                handle: Any = io.TextIOWrapper(location.open_read(source), newline="", encoding="utf-8-sig")
            else:
                data = location.read_bytes(source, piece.start, piece.stop)
                # Decoded as it is read, like a file (a StringIO would hold the piece as 4-byte characters).
                handle = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig" if piece.start == 0 else "utf-8", newline="")
                del data
        except OSError as exc:
            raise ShardkitError(f"{source}: cannot read index file: {_why(exc)}") from None
        with handle, explained(source):
            try:
                yield from self.text_rows(piece, handle)
            except UnicodeDecodeError as exc:  # its start counts from the decoder's chunk, not the file
                raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {first_bad_byte(source, piece.start)})") from None

    def text_rows(self, piece: Piece, lines: IO[str]) -> Iterator[Row | EntryError]:
        """The rows of ``lines``, the text of ``piece`` (its first line numbered ``piece.first_line``)."""
        raise NotImplementedError

    # -- a text format read as a table (``reads_tables``): rows of text columns named by line ------
    # Planning stages the columns a config maps beside the plan (``plan.staged_rows``), where the
    # shards take their rows from; for an OUT in a bucket they are read again from the file here.

    def table_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> TableBatch:
        """The rows on lines ``numbers``, in that order: the file read again, only those rows kept."""
        import numpy as np
        import pyarrow as pa

        wanted = np.asarray(numbers, dtype=np.int64)
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        parts = []
        for batch in self.read_tables(Piece(source), columns):
            at, hit = found_at(batch.lines, ordered)
            if hit.any():
                parts.append({name: column.take(pa.array(at[hit])) for name, column in batch.columns.items()})
            if len(ordered) and len(batch.lines) and batch.lines[-1] >= ordered[-1]:
                break  # past the last row asked for (an unshuffled shard's rows are one run of lines)
        if sum(len(next(iter(p.values()))) for p in parts) != len(wanted):
            raise ShardkitError(f"{source}: the plan names rows the file no longer has at those lines: it changed since planning")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        names = list(parts[0]) if parts else list(columns or ())
        joined = {n: pa.concat_arrays([p[n] for p in parts]).take(pa.array(back)) if parts else pa.array([], pa.string()) for n in names}
        return TableBatch(source, 0, joined, wanted)

    def rows_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> list[Row]:
        return rows_of(self.table_at(source, numbers, columns), numbers, self.column_names(source), named=self.keeps_names)

    @contextlib.contextmanager
    def opened(self, path: str) -> Iterator[Any]:
        """The file ``path`` open for reading bytes; a failure to open it is one line."""
        try:
            handle = location.open_read(path)
        except OSError as exc:
            raise ShardkitError(f"{path}: cannot read index file: {_why(exc)}") from None
        with handle, explained(path):
            yield handle


def first_bad_byte(path: str, start: int) -> int:
    """Where the first byte from ``start`` on that is not UTF-8 is (the error path alone reads
    the file again for it, a block at a time)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = start  # of the block's first byte
    with location.open_read(path) as f:
        f.seek(start)
        while block := f.read(1 << 20):
            held = len(decoder.getstate()[0])  # the bytes of a character the last block cut
            try:
                decoder.decode(block, final=len(block) < 1 << 20)
            except UnicodeDecodeError as exc:
                return offset - held + exc.start
            offset += len(block)
    return offset


def explained(path: str) -> contextlib.AbstractContextManager[None]:
    """A store's failure while a file is read -> one line naming it; a local file's errors stay as they are."""
    return location.explained(path) if location.is_url(path) else contextlib.nullcontext()


def _why(exc: OSError) -> str:
    return exc.strerror or ("file not found" if isinstance(exc, FileNotFoundError) else str(exc))


def cut_at_line_ends(path: str, piece_bytes: int) -> list[Piece]:
    pieces = []
    start, line = 0, 1
    with explained(path), location.open_read(path) as f:
        for data in _cut(f, piece_bytes):  # one forward pass: a store's file is downloaded once, not sought back and forth
            pieces.append(Piece(path, start, start + len(data), line))
            line += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")  # the line breaks Python's text mode sees
            start += len(data)
    return pieces


def _cut(f: IO[bytes], piece_bytes: int) -> Iterator[bytes]:
    """The file's bytes in pieces: each runs to just past the first ``\\n`` at or after
    ``piece_bytes`` into it (the last one to the end)."""
    carry = b""
    while True:
        data = carry + f.read(max(0, piece_bytes + 1 - len(carry)))
        if not data:
            return
        end = data.find(b"\n", piece_bytes)
        while end < 0:
            block = f.read(1 << 16)
            if not block:
                end = len(data) - 1
                break
            found = block.find(b"\n")
            if found >= 0:
                end = len(data) + found
            data += block
        carry = data[end + 1 :]
        yield data[: end + 1]
