"""What a build reads: rows grouped by split, the config (given or inferred), and the fingerprint.

Index files and folders are streamed lazily (no image is opened); the inputs are described by
their resolved paths and content hashes, which, with the config and the record-affecting
parameters, make the fingerprint a resume is checked against.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.config import Config, infer_config, load_config, parse_config
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.pipeline.inputs.index_files import IndexFile, discover
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.storage import location


@dataclasses.dataclass
class SplitInput:
    """One split's inputs: its sources, and its rows streamed from them (read once)."""

    sources: list[PlanSource]
    rows: Iterable[Row | EntryError]
    files: list[IndexFile] = dataclasses.field(default_factory=list)  # its index files, which planning may read in pieces


def rows_by_split(
    indexes: Sequence[str | Path],
    from_folder: str | Path | None,
    split: str | None,
    ignore: Sequence[str],
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
) -> tuple[dict[str, SplitInput], dict[str, Any]]:
    """Rows grouped by split, lazily, plus a description of the inputs for the fingerprint.
    ``allow_outside_root``: what a format reads while reading rows may leave the dataset's root."""
    root = None if image_root is None else _resolved(location.local_path(os.fspath(image_root)))
    if from_folder is not None:
        folder = location.local_path(os.fspath(from_folder))  # file://ROOT too
        layout = registry.folder_format(folder)
        parts = [(name, _allowed(piece, allow_outside_root)) for name, piece in layout.folder_splits(folder)]
        folders: dict[str, list[Piece]] = {}
        for name, piece in parts:
            folders.setdefault(split or name, []).append(piece)
        by_split = {
            name: SplitInput(
                _sources([PlanSource.of(p.path, layout, root) for p in pieces]),
                itertools.chain.from_iterable(layout.read_rows(p) for p in pieces),
            )
            for name, pieces in folders.items()
        }
        described = {"folder": _resolved(folder), "listing_sha256": _listing(layout, [p for _, p in parts])}
        return by_split, described if root is None else {**described, "image_root": root}
    files = [
        f if f.piece is None else dataclasses.replace(f, piece=_allowed(f.piece, allow_outside_root))
        for f in discover(indexes, ignore, split)
    ]
    grouped: dict[str, list[IndexFile]] = {}
    for f in files:
        grouped.setdefault(f.split, []).append(f)
    for name, group in grouped.items():
        _distinct_ids(name, group)
    rows = {
        name: SplitInput(
            _sources([PlanSource.of(f.path, f.format, root) for f in group]),
            itertools.chain.from_iterable(f.rows() for f in group),
            list(group),
        )
        for name, group in grouped.items()
    }
    inputs: dict[str, Any] = {"index_files": [_described(f) for f in files]}
    return rows, inputs if root is None else {**inputs, "image_root": root}


def _distinct_ids(split: str, files: list[IndexFile]) -> None:
    """A split's inputs whose records carry ids of their own (COCO files) share none: two Roboflow
    exports' ``train`` files both count their images from 0, and ``image/source_id`` is what COCO
    evaluation matches detections by. One pass over each file's images, where a split has several."""
    if len({f.path for f in files}) < 2:
        return
    seen: dict[Any, str] = {}
    for f in files:
        ids = f.format.record_ids(f.path)
        for record_id in ids if ids is not None else ():
            other = seen.setdefault(str(record_id), f.path)  # as image/source_id writes it: 1 and "1" are one
            if other != f.path:
                raise ShardkitError(
                    f"{f.path}: image id {record_id!r} is also one of {other}'s, in split {split!r}: "
                    "the records' image/source_id would repeat; build the two to separate outputs, or give their images distinct ids"
                )


def _allowed(piece: Piece, allow_outside_root: bool) -> Piece:
    return dataclasses.replace(piece, confined=False) if allow_outside_root else piece


def _described(index: IndexFile) -> dict[str, Any]:
    """An index file in the fingerprint: its resolved path (relative image paths resolve against
    it) and its content; one split of an input naming its splits, by the rows it gives."""
    if index.piece is None:
        return {"path": _resolved(index.path), "split": index.split, "sha256": _sha256(index.path)}
    return {"path": _resolved(index.path), "split": index.split, "listing_sha256": _listing(index.format, [index.piece])}


def _listing(layout: InputFormat, pieces: Sequence[Piece]) -> str:
    """A first walk over rows no one file's hash covers, for the fingerprint: nothing is kept.
    A bad row counts too, so that mending it changes the build."""
    listing = hashlib.sha256()
    for piece in pieces:
        for row in layout.read_rows(piece):
            text = layout.described(row) if isinstance(row, Row) else f"error {row}"
            listing.update(text.encode("utf-8", "surrogateescape") + b"\n")
    return listing.hexdigest()


def _sources(sources: list[PlanSource]) -> list[PlanSource]:
    """A split's sources, each once: the splits of one ``data.yaml`` put in one split by
    ``--split`` are one source, as their rows name it."""
    return list(dict.fromkeys(sources))


def _resolved(path: str) -> str:
    """The input's name in the fingerprint: symbolic links followed locally (as ever), a URL as it is."""
    return location.absolute(path) if location.is_url(path) else str(Path(path).resolve())


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with location.open_read(path) as f, location.explained(path):
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_config(config: Config | str | Path | None, splits: dict[str, SplitInput]) -> Config:
    """The config given, or the inputs' format's own default, or one inferred from the first row;
    with the label map the inputs fix (COCO categories, YOLO names), if any."""
    resolved = _given_config(config, splits)
    pairs = label_map(splits)
    return resolved if pairs is None else resolved.with_label_map(pairs)


def label_map(splits: dict[str, SplitInput]) -> tuple[tuple[int, str], ...] | None:
    """The (id, name) pairs every input's own label map gives, merged; None if no input has one."""
    merged: dict[int, tuple[str, str]] = {}
    found = False
    for split_input in splits.values():
        for source in split_input.sources:
            pairs = source.format.label_map(source.path)
            if pairs is None:
                continue
            found = True
            for i, name in pairs:
                if i in merged and merged[i][0] != name:
                    raise ShardkitError(f"{source.path}: class id {i} is {name!r} here but {merged[i][0]!r} in {merged[i][1]}")
                merged.setdefault(i, (name, source.path))
    return tuple((i, merged[i][0]) for i in sorted(merged)) if found else None


def _given_config(config: Config | str | Path | None, splits: dict[str, SplitInput]) -> Config:
    if isinstance(config, Config):
        return config
    if config is not None:
        return load_config(config)
    _refuse_unread_annotations(splits)
    for split_input in splits.values():
        default = split_input.sources[0].format.default_config(split_input.sources[0].path) if split_input.sources else None
        if default is not None:
            return parse_config(default)
    for split_input in splits.values():
        # Peek at the first good row without consuming the lazy iterator for good.
        items = iter(split_input.rows)
        peeked: list[Row | EntryError] = []
        for item in items:
            peeked.append(item)
            if isinstance(item, Row):
                split_input.rows = _prepend(peeked, items)
                return infer_config(item.values, item.names)
        split_input.rows = peeked
    raise ShardkitError("the inputs hold no entries")


def _refuse_unread_annotations(splits: dict[str, SplitInput]) -> None:
    """With no config, an input whose rows alone would leave annotations beside them unread (YOLO
    labels beside a plain list's images) stops with one line saying what reads them; a config
    given says what to build, and is not second-guessed."""
    for split_input in splits.values():
        folders = {source.path: source.folder for source in split_input.sources}
        for index in split_input.files:
            if index.piece is None and (why := index.format.unread_annotations(index.path, folders[index.path])) is not None:
                raise ShardkitError(why)


def _prepend(first: list[Row | EntryError], rest: Iterator[Row | EntryError]) -> Iterator[Row | EntryError]:
    yield from first
    yield from rest


def fingerprint_of(config: Mapping[str, Any], parameters: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """What tells one build (or reshard) from another: its resolved config, the parameters that change records, what it read."""
    blob = json.dumps({"config": config, "parameters": parameters, "inputs": inputs}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]
