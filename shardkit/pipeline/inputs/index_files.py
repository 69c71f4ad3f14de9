"""Index files -> entries: which inputs exist, which split they belong to, and their column values.

No image I/O happens here. Formats are told by extension: ``.txt`` (whitespace-separated columns,
``#`` comments and blank lines skipped), ``.csv`` / ``.tsv`` (a header row) and ``.jsonl``.
Index files, their folders and ImageFolder trees may be URLs (``s3://``, ``gs://``): they are
listed and streamed through ``storage.location``; local paths keep going straight to ``os``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import fnmatch
import functools
import io
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.storage import location

INDEX_SUFFIXES = (".txt", ".csv", ".tsv", ".jsonl")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_SPLIT_RE = re.compile(r"[_.\-]")
_GLOB_RE = re.compile(r"[*?[]")
FOLDER_COLUMNS = ("image", "label")  # the columns of an ImageFolder row


@dataclasses.dataclass(frozen=True)
class IndexFile:
    path: str  # a local path or a URL, as found: what messages and each row's source name
    split: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", os.fspath(self.path))  # a pathlib.Path is taken too

    @property
    def name(self) -> str:
        return _file_name(self.path)

    @property
    def format(self) -> str:
        return os.path.splitext(self.name)[1].lower().lstrip(".")


@dataclasses.dataclass(slots=True)  # not frozen: a frozen init costs 1 us a row, 10 s at 10M rows
class Row:
    """One data line of an index file: positional values, and names where the format has them."""

    source: str
    line: int
    values: tuple[Any, ...]
    names: tuple[str, ...] | None = None
    key: str = ""  # stable identity for seeding; defaults to "<file name>:<line>"
    text: str | None = None  # the line as read, where it alone gives the values back (.txt, .jsonl)

    @property
    def identity(self) -> str:
        return self.key or f"{_file_name(self.source)}:{self.line}"

    def get(self, column: int | str, txt_names: Sequence[str] | None = None) -> Any:
        if isinstance(column, int):
            if column >= len(self.values):
                raise EntryError(self.source, self.line, f"no column {column}: the line has {len(self.values)} columns")
            return self.values[column]
        names = self.names if self.names is not None else txt_names
        if names is None:
            raise EntryError(
                self.source,
                self.line,
                f"column {column!r} is named, but .txt columns have no names: "
                "use a 0-based position or a top-level 'columns:' list in the config",
            )
        if column not in names:
            raise EntryError(self.source, self.line, f"no column {column!r} (columns: {', '.join(names)})")
        position = list(names).index(column)
        if position >= len(self.values):
            raise EntryError(self.source, self.line, f"no value for column {column!r}")
        return self.values[position]


@functools.lru_cache(maxsize=1024)
def _file_name(source: str) -> str:
    return os.path.basename(source)


def split_of(name: str) -> str:
    """``train_3.txt`` -> ``train``; ``val.csv`` -> ``val``; ``test-0.jsonl`` -> ``test``."""
    return _SPLIT_RE.split(name, maxsplit=1)[0]


def discover(paths: Sequence[str | Path], ignore: Sequence[str] = (), split: str | None = None) -> list[IndexFile]:
    """Expand files, folders and glob patterns (local or URLs) into index files (sorted within each
    folder or pattern), minus ignored names."""
    found: list[IndexFile] = []
    seen: set[str] = set()
    for given in paths:
        for candidate in _candidates(os.fspath(given)):
            name = _file_name(candidate)
            if any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
                continue
            resolved = candidate if location.is_url(candidate) else str(Path(candidate).resolve())
            if resolved in seen:
                continue
            seen.add(resolved)
            name_split = split or split_of(name)
            if not name_split:
                raise ShardkitError(f"{candidate}: cannot tell the split from the file name; use --split NAME")
            found.append(IndexFile(path=candidate, split=name_split))
    if not found:
        raise ShardkitError("no index files left to build (check the paths and --ignore patterns)")
    return found


def _is_index(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in INDEX_SUFFIXES


def _candidates(given: str) -> list[str]:
    """The index files one argument names: itself, those in its folder, or its glob's matches."""
    if location.is_url(given):
        return _url_candidates(given)
    path = Path(location.local_path(given))
    if path.is_dir():
        candidates = [str(p) for p in sorted(path.iterdir()) if p.is_file() and _is_index(p.name)]
        if not candidates:
            raise ShardkitError(f"{path}: no index files ({', '.join(INDEX_SUFFIXES)}) in this folder")
        return candidates
    if path.is_file():
        if not _is_index(path.name):
            raise ShardkitError(f"{path}: unknown index format {path.suffix!r} (known: {', '.join(INDEX_SUFFIXES)})")
        return [str(path)]
    if _GLOB_RE.search(given):  # a pattern the shell did not expand (quoted, or from Python)
        return _matches(given, location.glob(str(path)))
    raise ShardkitError(f"{path}: no such file or folder")


def _url_candidates(url: str) -> list[str]:
    url = location.absolute(url)
    if _GLOB_RE.search(url.split("://", 1)[1]):
        return _matches(url, location.glob(url))
    if location.isfile(url):
        if not _is_index(url):
            raise ShardkitError(f"{url}: unknown index format {os.path.splitext(url)[1]!r} (known: {', '.join(INDEX_SUFFIXES)})")
        return [url]
    names = location.listdir(url)  # a store's folder: the objects whose names start with it and a /
    if names:
        candidates = [location.join(url, n) for n in names if _is_index(n)]
        if not candidates:
            raise ShardkitError(f"{url}: no index files ({', '.join(INDEX_SUFFIXES)}) in this folder")
        return candidates
    if not location.bucket_exists(url):
        raise ShardkitError(f"{url}: no such bucket, or no permission to see it")
    raise ShardkitError(f"{url}: no such file or folder")


def _matches(pattern: str, matches: list[str]) -> list[str]:
    candidates = [m for m in matches if _is_index(m) and (location.is_url(m) or os.path.isfile(m))]
    if not candidates:
        raise ShardkitError(f"{pattern}: no index files ({', '.join(INDEX_SUFFIXES)}) match this pattern")
    return candidates


@dataclasses.dataclass(frozen=True)
class Piece:
    """Lines ``start:stop`` (bytes, at line ends) of a ``.txt`` or ``.jsonl`` index file, which
    processes can plan side by side; a whole file otherwise."""

    index: IndexFile
    start: int = 0
    stop: int | None = None  # None: to the end
    first_line: int = 1  # the number of its first line
    txt_first: tuple[int, int] | None = None  # .txt: (columns, line) of the file's first data line, if before the piece


def cut_pieces(index: IndexFile, piece_bytes: int) -> list[Piece]:
    """The file as pieces of about ``piece_bytes``, each ending after a ``\n``; csv and tsv
    (quoted fields may hold line breaks) and small files stay whole."""
    size = location.size(index.path)
    if size is None:
        raise ShardkitError(f"{index.path}: cannot read index file: file not found")
    if index.format not in ("txt", "jsonl") or size <= piece_bytes:
        return [Piece(index)]
    pieces = []
    start, line = 0, 1
    with _explained(index.path), location.open_read(index.path) as f:
        for data in _cut(f, piece_bytes):  # one forward pass: a store's file is downloaded once, not sought back and forth
            pieces.append(Piece(index, start, start + len(data), line))
            line += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")  # the line breaks Python's text mode sees
            start += len(data)
    first = _txt_first_row(index) if index.format == "txt" else None
    return [dataclasses.replace(p, txt_first=first if first and first[1] < p.first_line else None) for p in pieces]


def _cut(f: IO[bytes], piece_bytes: int) -> Iterator[bytes]:
    """The file's bytes in pieces: each runs to just past the first ``\n`` at or after
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


def _txt_first_row(index: IndexFile) -> tuple[int, int] | None:
    for row in read_rows(index):
        if isinstance(row, Row):
            return len(row.values), row.line
    return None


def read_rows(index: IndexFile, piece: Piece | None = None) -> Iterator[Row | EntryError]:
    """Stream the data rows of one index file (or of one piece of it), with 1-based line numbers.

    A malformed line is yielded as an ``EntryError`` rather than raised, so the caller decides
    between stopping (``--on-error fail``) and recording it and going on (``skip``).
    """
    source = index.path
    start = piece.start if piece else 0
    try:
        if piece is None or (piece.start == 0 and piece.stop is None):
            # A BOM: spreadsheets write one. A store's file is streamed in blocks, like a local one.
            handle: Any = io.TextIOWrapper(location.open_read(source), newline="", encoding="utf-8-sig")
        else:
            data = location.read_bytes(source, piece.start, piece.stop)
            # Decoded as it is read, like a file (a StringIO would hold the piece as 4-byte characters).
            handle = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig" if piece.start == 0 else "utf-8", newline="")
            del data
    except OSError as exc:
        raise ShardkitError(f"{source}: cannot read index file: {_why(exc)}") from None
    number = piece.first_line if piece else 1
    width, first_line = piece.txt_first if piece and piece.txt_first else (None, 0)
    # A store failing mid-file (after its own retries) is one line naming the file.
    with handle, _explained(source):
        try:
            if index.format == "txt":
                yield from _txt_rows(source, handle, number, width, first_line)
            elif index.format in ("csv", "tsv"):
                yield from _csv_rows(source, handle, "\t" if index.format == "tsv" else ",")
            else:
                yield from _jsonl_rows(source, handle, number)
        except UnicodeDecodeError as exc:
            raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {start + exc.start})") from None


def _explained(path: str) -> contextlib.AbstractContextManager[None]:
    """A store's failure while a file is read -> one line naming it; a local file's errors stay as they are."""
    return location.explained(path) if location.is_url(path) else contextlib.nullcontext()


def _why(exc: OSError) -> str:
    return exc.strerror or ("file not found" if isinstance(exc, FileNotFoundError) else str(exc))


def _txt_rows(source: str, handle: Any, start: int = 1, width: int | None = None, first_line: int = 0) -> Iterator[Row | EntryError]:
    """``width``/``first_line``: the columns of the file's first data line and its number, when
    ``handle`` starts after it (a piece of the file)."""
    for number, line in enumerate(handle, start=start):
        text = line.strip()
        if not text or text[0] == "#":
            continue
        values = tuple(text.split())
        if width is None:
            width, first_line = len(values), number
        elif len(values) != width:
            yield EntryError(source, number, f"{len(values)} columns, but line {first_line} has {width}")
            continue
        yield Row(source, number, values, text=text)


def _csv_rows(source: str, handle: Any, delimiter: str) -> Iterator[Row | EntryError]:
    reader = csv.reader(handle, delimiter=delimiter)
    names: tuple[str, ...] | None = None
    for values in reader:
        number = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if names is None:
            names = tuple(v.strip() for v in values)
            continue
        if len(values) != len(names):
            yield EntryError(source, number, f"{len(values)} columns, but the header has {len(names)}")
            continue
        yield Row(source, number, tuple(v.strip() for v in values), names)
    if names is None:
        raise ShardkitError(f"{source}: empty file: a header row is needed")


def _jsonl_rows(source: str, handle: Any, start: int = 1) -> Iterator[Row | EntryError]:
    for number, line in enumerate(handle, start=start):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield EntryError(source, number, f"not valid JSON: {exc.msg} at column {exc.colno}")
            continue
        except ValueError as exc:  # e.g. an integer past Python's digit limit
            yield EntryError(source, number, f"not valid JSON: {exc}")
            continue
        if not isinstance(obj, dict):
            yield EntryError(source, number, f"expected a JSON object, got {type(obj).__name__}")
            continue
        yield Row(source, number, tuple(obj.values()), tuple(obj.keys()), text=line.strip())
