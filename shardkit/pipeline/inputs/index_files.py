"""Index files: which exist (files, folders, glob patterns, local or URLs) and which split each
belongs to, told by its name (``train_3.txt`` -> ``train``), or by the input itself where it
names its splits (a Pascal VOC folder, a YOLO ``data.yaml``: one ``IndexFile`` per split).

No row is read here: each file's format (from ``inputs.registry``) reads it. Index files, their
folders and globs may be URLs (``s3://``, ``gs://``): they are listed through ``storage.location``;
local paths keep going straight to ``os``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row, file_name, split_name
from shardkit.storage import location

_GLOB_RE = re.compile(r"[*?[]")


@dataclasses.dataclass(frozen=True)
class IndexFile:
    path: str  # a local path or a URL, as found: what messages and each row's source name
    split: str
    # One split of an input that names its splits (``InputFormat.folder_splits``, ``file_splits``):
    # the format that named them and the piece read as this split's source, never cut.
    layout: InputFormat | None = None
    piece: Piece | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", os.fspath(self.path))  # a pathlib.Path is taken too

    @property
    def name(self) -> str:
        return file_name(self.path)

    @functools.cached_property
    def format(self) -> InputFormat:
        if self.layout is not None:
            return self.layout
        found = registry.file_format(self.path)
        if found is None:
            raise ShardkitError(_unknown(self.path, os.path.splitext(self.path)[1]))
        return found

    def pieces(self, piece_bytes: int) -> list[Piece]:
        """The file as pieces of about ``piece_bytes`` for processes to plan side by side, where its format cuts."""
        return [self.piece] if self.piece is not None else self.format.cut(self.path, piece_bytes)

    def rows(self, piece: Piece | None = None) -> Iterator[Row | EntryError]:
        """The data rows of the file, or of one of its ``pieces``, as its format reads them."""
        return self.format.read_rows(piece or self.piece or Piece(self.path))


def split_of(path: str) -> str:
    """The split of an index file, told by its name as its format reads it: ``train_3.txt`` ->
    ``train``; ``instances_val2017.json`` -> ``val``."""
    found = registry.file_format(path)
    return found.split_name(path) if found is not None else split_name(file_name(path))


def discover(paths: Sequence[str | Path], ignore: Sequence[str] = (), split: str | None = None) -> list[IndexFile]:
    """Expand files, folders and glob patterns (local or URLs) into index files (sorted within each
    folder or pattern), minus ignored names."""
    found: list[IndexFile] = []
    seen: set[tuple[str, str]] = set()
    for given in paths:
        for index in _inputs(os.fspath(given)):
            if any(fnmatch.fnmatch(index.name, pattern) for pattern in ignore):
                continue
            resolved = index.path if location.is_url(index.path) else str(Path(index.path).resolve())
            if (resolved, index.split) in seen:
                continue
            seen.add((resolved, index.split))
            name_split = split or index.split or split_of(index.path)
            if not name_split:
                raise ShardkitError(f"{index.path}: cannot tell the split from the file name; use --split NAME")
            found.append(dataclasses.replace(index, split=name_split))
    if not found:
        raise ShardkitError("no index files left to build (check the paths and --ignore patterns)")
    if split is None:
        _one_folder_a_split(found)
    return found


def _one_folder_a_split(files: list[IndexFile]) -> None:
    """Inputs in different folders that their names put in one split are refused, not merged:
    Roboflow's ``train/`` and ``valid/`` each hold an ``_annotations.coco.json``, two datasets
    each a ``train.txt``, whose entries' identities (file name and line) and ids would repeat.
    ``train_0.txt`` and ``train_1.txt`` side by side are one split's, as ever. Splits a dataset's
    layout names (``VOC2007`` and ``VOC2012`` given together, the OD API's "merged" set) are
    merged as given: each dataset says which of its images are ``train``, and their identities
    are paths inside each dataset."""
    first: dict[str, str] = {}
    for index in files:
        if index.layout is not None:
            continue
        folder = location.dirname(index.path if location.is_url(index.path) else str(Path(index.path).resolve()))
        other = first.setdefault(index.split, index.path)
        if other != index.path and location.dirname(other if location.is_url(other) else str(Path(other).resolve())) != folder:
            raise ShardkitError(
                f"{index.path}: its name puts it in split {index.split!r}, as {other} from another folder: "
                "build each to an output of its own (--split NAME would put every input, other splits too, in that one split)"
            )


def _inputs(given: str) -> list[IndexFile]:
    """What one argument names, each as one split's input: a local folder with a layout of its
    own (Pascal VOC, a YOLO dataset) as its splits; else its index files, those that name their
    splits (YOLO's ``data.yaml``) as one per split, the others with the split left to their name."""
    folder = location.local_path(given)
    layout = registry.layout_format(folder) if not location.is_url(given) and os.path.isdir(folder) else None
    if layout is not None:
        # A split that is a whole file the format reads alone (a COCO export's) is an index file
        # as any other: its hash, not a walk over its rows, is what the fingerprint keeps of it.
        return [
            IndexFile(piece.path, name) if piece == Piece(piece.path) and registry.file_format(piece.path) is layout
            else IndexFile(piece.path, name, layout, piece)
            for name, piece in layout.folder_splits(folder)
        ]  # fmt: skip
    found = []
    for candidate in _candidates(given):
        own = registry.file_format(candidate)
        named = own.file_splits(candidate) if own is not None else None
        if named is None:
            found.append(IndexFile(candidate, ""))
        else:
            found += [IndexFile(piece.path, name, own, piece) for name, piece in named]
    return found


def _is_index(path: str) -> bool:
    return registry.file_format(path) is not None


def _known() -> str:
    return ", ".join(registry.suffixes())


def _unknown(path: str, suffix: str) -> str:
    return f"{path}: unknown index format {suffix!r} (known: {_known()})"


def _candidates(given: str) -> list[str]:
    """The index files one argument names: itself, those in its folder, or its glob's matches."""
    if location.is_url(given):
        return _url_candidates(given)
    path = Path(location.local_path(given))
    if path.is_dir():
        candidates = [str(p) for p in sorted(path.iterdir()) if p.is_file() and _is_index(str(p))]
        if not candidates:
            raise ShardkitError(f"{path}: no index files ({_known()}) in this folder")
        return candidates
    if path.is_file():
        if not _is_index(str(path)):
            raise ShardkitError(_unknown(str(path), path.suffix))
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
            raise ShardkitError(_unknown(url, os.path.splitext(url)[1]))
        return [url]
    names = location.listdir(url)  # a store's folder: the objects whose names start with it and a /
    if names:
        candidates = [c for c in (location.join(url, n) for n in names) if _is_index(c)]
        if not candidates:
            raise ShardkitError(f"{url}: no index files ({_known()}) in this folder")
        return candidates
    if not location.bucket_exists(url):
        raise ShardkitError(f"{url}: no such bucket, or no permission to see it")
    raise ShardkitError(f"{url}: no such file or folder")


def _matches(pattern: str, matches: list[str]) -> list[str]:
    candidates = [m for m in matches if (location.is_url(m) or os.path.isfile(m)) and _is_index(m)]
    if not candidates:
        raise ShardkitError(f"{pattern}: no index files ({_known()}) match this pattern")
    return candidates
