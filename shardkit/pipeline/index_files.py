"""Index files -> entries: which inputs exist, which split they belong to, and their column values.

No image I/O happens here. Formats are told by extension: ``.txt`` (whitespace-separated columns,
``#`` comments and blank lines skipped), ``.csv`` / ``.tsv`` (a header row) and ``.jsonl``.
"""

from __future__ import annotations

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
from typing import Any, BinaryIO

from shardkit.errors import EntryError, ShardkitError

INDEX_SUFFIXES = (".txt", ".csv", ".tsv", ".jsonl")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_SPLIT_RE = re.compile(r"[_.\-]")
FOLDER_COLUMNS = ("image", "label")  # the columns of an ImageFolder row


@dataclasses.dataclass(frozen=True)
class IndexFile:
    path: Path
    split: str

    @property
    def format(self) -> str:
        return self.path.suffix.lower().lstrip(".")


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
    """Expand files and folders into index files (sorted within each folder), minus ignored names."""
    found: list[IndexFile] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            candidates = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in INDEX_SUFFIXES)
            if not candidates:
                raise ShardkitError(f"{path}: no index files ({', '.join(INDEX_SUFFIXES)}) in this folder")
        elif path.is_file():
            if path.suffix.lower() not in INDEX_SUFFIXES:
                raise ShardkitError(f"{path}: unknown index format {path.suffix!r} (known: {', '.join(INDEX_SUFFIXES)})")
            candidates = [path]
        else:
            raise ShardkitError(f"{path}: no such file or folder")
        for candidate in candidates:
            if any(fnmatch.fnmatch(candidate.name, pattern) for pattern in ignore):
                continue
            resolved = candidate.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            name_split = split or split_of(candidate.name)
            if not name_split:
                raise ShardkitError(f"{candidate}: cannot tell the split from the file name; use --split NAME")
            found.append(IndexFile(path=candidate, split=name_split))
    if not found:
        raise ShardkitError("no index files left to build (check the paths and --ignore patterns)")
    return found


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
    size = index.path.stat().st_size
    if index.format not in ("txt", "jsonl") or size <= piece_bytes:
        return [Piece(index)]
    pieces = []
    start, line = 0, 1
    with index.path.open("rb") as f:
        while start < size:
            stop = _line_end_after(f, start + piece_bytes, size)
            f.seek(start)
            data = f.read(stop - start)
            pieces.append(Piece(index, start, stop, line))
            line += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")  # the line breaks Python's text mode sees
            start = stop
    first = _txt_first_row(index) if index.format == "txt" else None
    return [dataclasses.replace(p, txt_first=first if first and first[1] < p.first_line else None) for p in pieces]


def _line_end_after(f: BinaryIO, position: int, size: int) -> int:
    """The offset just past the first ``\n`` at or after ``position`` (the file's size if none)."""
    f.seek(position)
    while position < size:
        block = f.read(1 << 16)
        if not block:
            break
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return size


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
    source = str(index.path)
    start = piece.start if piece else 0
    try:
        if piece is None or (piece.start == 0 and piece.stop is None):
            handle: Any = index.path.open(newline="", encoding="utf-8-sig")  # spreadsheets write a BOM
        else:
            with index.path.open("rb") as f:
                f.seek(piece.start)
                data = f.read(piece.stop - piece.start if piece.stop is not None else -1)
            # Decoded as it is read, like a file (a StringIO would hold the piece as 4-byte characters).
            handle = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig" if piece.start == 0 else "utf-8", newline="")
            del data
    except OSError as exc:
        raise ShardkitError(f"{source}: cannot read index file: {exc.strerror}") from None
    number = piece.first_line if piece else 1
    width, first_line = piece.txt_first if piece and piece.txt_first else (None, 0)
    with handle:
        try:
            if index.format == "txt":
                yield from _txt_rows(source, handle, number, width, first_line)
            elif index.format in ("csv", "tsv"):
                yield from _csv_rows(source, handle, "\t" if index.format == "tsv" else ",")
            else:
                yield from _jsonl_rows(source, handle, number)
        except UnicodeDecodeError as exc:
            raise ShardkitError(f"{source}: not UTF-8 text ({exc.reason} near byte {start + exc.start})") from None


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


def folder_splits(root: Path) -> list[tuple[str, Path]]:
    """ImageFolder layout -> (split, folder of its class folders).

    ``ROOT/<split>/<class>/<img>`` when every folder under ROOT holds only folders, else
    ``ROOT/<class>/<img>`` as split ``train``.
    """
    if not root.is_dir():
        raise ShardkitError(f"{root}: no such folder")
    top = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not top:
        raise ShardkitError(f"{root}: no class folders (expected ROOT/<class>/<image> or ROOT/<split>/<class>/<image>)")
    nested = all(not any(f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES for f in d.iterdir()) for d in top)
    return [(d.name, d) for d in top] if nested else [("train", root)]


def folder_split_rows(root: Path, split_root: Path) -> Iterator[Row]:
    """One split's images as Row(image path, class name), streamed; line numbers count images."""
    number = 0
    for class_dir in sorted(p for p in split_root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for image in sorted(class_dir.iterdir()):
            if image.is_file() and image.suffix.lower() in IMAGE_SUFFIXES:
                number += 1
                key = image.relative_to(root).as_posix()
                # Absolute: entries resolve a relative value against the row's source folder, which
                # would join a relative ROOT twice (photos/train/photos/train/cat/x.jpg).
                yield Row(str(split_root), number, (str(image.absolute()), class_dir.name), FOLDER_COLUMNS, key)


def folder_rows(root: Path) -> Iterator[tuple[str, Row]]:
    """Every image of an ImageFolder tree as (split, Row), split by split."""
    for split, split_root in folder_splits(root):
        for row in folder_split_rows(root, split_root):
            yield split, row
