"""Reading what builds left, and what the user pointed at: output folders and plain shard files.

``load_output`` reads an output's manifest into a ``Manifest`` (structure-checked: a damaged one
is one error naming the file). ``expand`` takes files, folders and globs; a folder with a
manifest is a shardkit output, any other folder contributes the shard files in it (any container's
names: ``formats.containers.registry``). Each may be
a local path or a URL (``gs://bucket/out``, ``s3://bucket/out/*.tfrecord``): on a store a folder
is a prefix, and a folder or a glob costs one listing, not a request per object.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Sequence
from typing import Any

from shardkit.errors import ShardkitError
from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.output.manifest import Manifest, ManifestError, ShardEntry
from shardkit.storage import location


@dataclasses.dataclass(frozen=True)
class Output:
    """A shardkit output folder and its manifest."""

    path: str
    manifest: Manifest

    def shards(self) -> list[tuple[str, ShardEntry]]:
        """(split, shard entry) for every shard the manifest lists."""
        return self.manifest.shards()

    def shard_path(self, shard: ShardEntry) -> str:
        return location.join(self.path, shard.name)

    def shard_files(self) -> list[tuple[str, str]]:
        """(container, path) of every shard file: each shard in each of its split's formats."""
        return [
            (format, location.join(self.path, shard.file(format).name))
            for split, shard in self.shards()
            for format in self.manifest.splits[split].formats
        ]


@dataclasses.dataclass(frozen=True)
class Targets:
    """What paths named: shardkit output folders, and shard files (TFRecord, ArrayRecord) outside any."""

    outputs: list[Output]
    files: list[str]

    def shard_files(self) -> list[str]:
        """Every shard file: the plain ones, then each output's shards in manifest order, in each of their formats."""
        return self.files + [path for o in self.outputs for _, path in o.shard_files()]


def is_output(folder: str) -> bool:
    """Whether ``folder`` holds a manifest (it may still be unreadable or damaged)."""
    return location.exists(layout.manifest_path(folder))


def load_output(folder: str) -> Output:
    if location.is_url(folder):
        folder = location.absolute(folder)
        path = layout.manifest_path(folder)
        try:
            raw = json.loads(location.read_bytes(path))
        except FileNotFoundError:
            raise ShardkitError(f"{path}: cannot read the manifest: no such object{_missing_bucket(folder)}") from None
        except ValueError as exc:
            raise ShardkitError(f"{path}: cannot read the manifest: {exc}") from None
        return _checked(path, folder, raw)
    path = layout.manifest_path(folder)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as exc:
        raise ShardkitError(f"{path}: cannot read the manifest: {exc}") from None
    return _checked(path, folder, raw)


def _checked(path: str, folder: str, raw: Any) -> Output:
    try:
        return Output(folder, Manifest.from_dict(raw))
    except ManifestError as exc:
        raise ShardkitError(f"{path}: {exc}") from None


def expand(paths: Sequence[str]) -> Targets:
    outputs: list[Output] = []
    files: list[str] = []
    for given in paths:
        if location.is_url(given):
            _expand_url(given, outputs, files)
            continue
        matches = sorted(glob.glob(given)) if glob.has_magic(given) else [given]
        if not matches:
            raise ShardkitError(f"{given}: no file matches this pattern")
        for path in matches:
            if os.path.isdir(path):
                if os.path.exists(layout.manifest_path(path)):
                    outputs.append(load_output(path))
                    continue
                found = sorted(
                    os.path.join(path, n) for n in os.listdir(path) if registry.is_shard_file(n) and os.path.isfile(os.path.join(path, n))
                )
                if not found:
                    raise ShardkitError(f"{path}: no shard files in this folder (names containing {', '.join(registry.markers())})")
                files.extend(found)
            elif os.path.exists(path):
                files.append(path)
            else:
                raise ShardkitError(f"{path}: no such file or folder")
    return Targets(outputs, files)


def _expand_url(given: str, outputs: list[Output], files: list[str]) -> None:
    """``expand`` for one URL: an object, a prefix (an output when it holds manifest.json), or a glob."""
    if glob.has_magic(given.split("://", 1)[1]):
        matches = _glob_url(given)
        if not matches:
            raise ShardkitError(f"{given}: no object matches this pattern{_missing_bucket(given)}")
    else:
        url = location.absolute(given)
        if location.isdir(url):
            matches = [(url, True)]
        elif location.isfile(url):
            matches = [(url, False)]
        else:
            raise ShardkitError(f"{given}: no such object or prefix{_missing_bucket(given)}")
    for url, is_folder in matches:
        if not is_folder:
            files.append(url)
            continue
        names = location.listdir(url)  # one listing: the manifest, or the TFRecord objects
        if layout.MANIFEST in names:
            outputs.append(load_output(url))
            continue
        found = [location.join(url, n) for n in names if registry.is_shard_file(n)]
        if not found:
            raise ShardkitError(f"{url}: no shard objects under this prefix (names containing {', '.join(registry.markers())})")
        files.extend(found)


def _glob_url(pattern: str) -> list[tuple[str, bool]]:
    """(URL, whether it is a prefix) for every match, sorted: one listing says both, where asking
    each match would cost a request per object."""
    fs, key = location.filesystem(pattern)
    root = pattern.split("://")[0]
    with location.explained(pattern):
        try:
            found = fs.glob(key, detail=True)
        except FileNotFoundError:  # gcsfs, for a bucket that is not there
            return []
    skip_dotted = not pattern.rstrip("/").rsplit("/", 1)[-1].startswith(".")  # as a local glob: * does not match .name
    return sorted(
        (f"{root}://{p.rstrip('/')}", info.get("type") == "directory")
        for p, info in found.items()
        if not (skip_dotted and p.rstrip("/").rsplit("/", 1)[-1].startswith("."))
    )


def _missing_bucket(url: str) -> str:
    """Why nothing is there, when the reason is that the bucket itself is not (asked only after a miss)."""
    if location.bucket_exists(url):
        return ""
    return " (the bucket does not exist, or these credentials cannot see it)"
