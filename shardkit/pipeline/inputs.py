"""What a build reads: rows grouped by split, the config (given or inferred), and the fingerprint.

Index files and folders are streamed lazily (no image is opened); the inputs are described by
their resolved paths and content hashes, which, with the config and the record-affecting
parameters, make the fingerprint a resume is checked against.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.config import Config, infer_config, load_config
from shardkit.pipeline.index_files import IndexFile, Row, discover, folder_rows, read_rows


def rows_by_split(
    indexes: Sequence[str | Path], from_folder: str | Path | None, split: str | None, ignore: Sequence[str]
) -> tuple[dict[str, Iterable[Row | EntryError]], dict[str, Any]]:
    """Rows grouped by split, lazily, plus a description of the inputs for the fingerprint."""
    if from_folder is not None:
        root = Path(from_folder)
        by_split: dict[str, list[Row | EntryError]] = {}
        for name, row in folder_rows(root):
            by_split.setdefault(split or name, []).append(row)
        listing = hashlib.sha256("\n".join(str(r.identity) for rows in by_split.values() for r in rows if isinstance(r, Row)).encode())
        return dict(by_split), {"folder": str(root.resolve()), "listing_sha256": listing.hexdigest()}
    files = discover(indexes, ignore, split)
    grouped: dict[str, list[IndexFile]] = {}
    for f in files:
        grouped.setdefault(f.split, []).append(f)
    rows: dict[str, Iterable[Row | EntryError]] = {name: _chain_rows(group) for name, group in grouped.items()}
    # The resolved path matters as much as the content: relative image paths resolve against it.
    inputs = {"index_files": [{"path": str(f.path.resolve()), "split": f.split, "sha256": _sha256(f.path)} for f in files]}
    return rows, inputs


def _chain_rows(files: Sequence[IndexFile]) -> Iterator[Row | EntryError]:
    for f in files:
        yield from read_rows(f)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_config(config: Config | str | Path | None, rows: dict[str, Iterable[Row | EntryError]]) -> Config:
    if isinstance(config, Config):
        return config
    if config is not None:
        return load_config(config)
    for name, split_rows in rows.items():
        # Peek at the first good row without consuming the lazy iterator for good.
        items = iter(split_rows)
        peeked: list[Row | EntryError] = []
        for item in items:
            peeked.append(item)
            if isinstance(item, Row):
                rows[name] = _prepend(peeked, items)
                return infer_config(item.values, item.names)
        rows[name] = peeked
    raise ShardkitError("the inputs hold no entries")


def _prepend(first: list[Row | EntryError], rest: Iterator[Row | EntryError]) -> Iterator[Row | EntryError]:
    yield from first
    yield from rest


def fingerprint_of(cfg: Config, parameters: dict[str, Any], inputs: dict[str, Any]) -> str:
    blob = json.dumps({"config": cfg.to_dict(), "parameters": parameters, "inputs": inputs}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]
