"""What a reshard reads: its PATHs as input files, each with its split and container.

A PATH is a shardkit OUT (its manifest lists the shards; its config and schema carry over), a
TFDS prepared folder (``tfds_folder``), or TFRecord and ArrayRecord files, folders and globs that
anyone wrote, local or in a bucket. A foreign file's container and compression are told by its
first bytes (a GZIP TFRecord file needs no ``.gz`` name), its split by its name, as an index
file's is (``train-00003-of-00010.tfrecord`` -> ``train``; TFDS' ``mnist-validation.tfrecord-00000-of-00001``
-> ``validation``), or ``split`` names one split for all.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from shardkit.errors import ShardkitError, UsageError
from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.output.found import Output, expand, load_output
from shardkit.pipeline.inputs.formats.input_format import split_name
from shardkit.pipeline.reshard.tfds_folder import TfdsFolder, is_tfds_folder, read_tfds_folder
from shardkit.storage import location

_HEAD = 64  # enough bytes to tell every container's files apart
_TFDS_NAME = re.compile(r"^[^-]+-(?P<split>[^.]+)\.[a-z_]+-\d+-of-\d+$")  # {DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One file of records to reshard."""

    path: str
    split: str
    container: str  # the name of the container it is in
    compression: str  # "none", or TFRecord's "gzip"/"zlib": what its bytes are
    bytes: int
    modified: int | None = None  # st_mtime_ns of a local file: part of the fingerprint

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def staged(self) -> bool:
        """Whether it is copied to a local plain file before its records are found (a URL, or compressed)."""
        return location.is_url(self.path) or self.compression != "none"


@dataclasses.dataclass(frozen=True)
class Found:
    """Every input file, and where their schema comes from."""

    files: tuple[InputFile, ...]
    output: Output | None = None  # the shardkit OUT they are (its config and schema carry over)
    tfds: TfdsFolder | None = None  # the TFDS folder they are (its metadata carries over)
    roots: tuple[str, ...] = ()  # the folders given (outputs, TFDS folders, folders of shard files): OUT may lie inside none


def find(paths: Sequence[str], split: str | None = None) -> Found:
    """The input files ``paths`` name, in order (sorted within a folder or glob), each once."""
    files: list[InputFile] = []
    outputs: list[Output] = []
    tfds: list[TfdsFolder] = []
    roots: list[str] = []
    for given in map(str, paths):
        if not glob.has_magic(given.split("://", 1)[-1]) and location.isdir(given):
            roots.append(location.absolute(given))
            if location.exists(layout.manifest_path(given)):
                outputs.append(load_output(location.absolute(given)))
                continue
            if is_tfds_folder(given):
                tfds.append(read_tfds_folder(location.absolute(given)))
                continue
        try:
            targets = expand([given])
        except ShardkitError as exc:
            raise UsageError(f"{exc}: give TFRecord or ArrayRecord files, folders or globs, a shardkit output or a TFDS folder") from None
        outputs += targets.outputs
        roots += [output.path for output in targets.outputs]
        files += [_sniffed(location.absolute(path), split) for path in targets.files]
    kinds = [what for what, there in (("a shardkit output", outputs), ("a TFDS folder", tfds), ("other shard files", files)) if there]
    for output in outputs:
        files += _output_files(output, split)
    for folder in tfds:
        files += _tfds_files(folder, split)
    if not files:
        raise UsageError(f"{', '.join(map(str, paths)) or 'no PATH'}: no shard files to reshard")
    if len(outputs) + len(tfds) > 1 or (len(kinds) > 1 and (outputs or tfds)):
        raise UsageError(
            f"{' and '.join(dict.fromkeys(kinds))} given together: a shardkit output's or TFDS folder's schema describes its own "
            "records alone; reshard each on its own"
        )
    unique = list({_resolved(f.path): f for f in reversed(files)}.values())[::-1]  # a file named twice is read once
    return Found(tuple(unique), outputs[0] if outputs else None, tfds[0] if tfds else None, tuple(dict.fromkeys(roots)))


def split_of(path: str) -> str:
    """The split a foreign shard file is in, by its name."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    tfds_named = _TFDS_NAME.match(name)
    return tfds_named["split"] if tfds_named else split_name(name)


def _sniffed(path: str, split: str | None) -> InputFile:
    try:
        head = location.read_bytes(path, 0, _HEAD)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    found = registry.recognised(head)
    if found is None:
        raise UsageError(
            f"{path}: not a TFRecord or ArrayRecord file (it starts {head[:8].hex() or 'with nothing'}); "
            "give shard files, folders or globs, a shardkit output or a TFDS folder"
        )
    container, compression = found
    return InputFile(path, split or split_of(path), container.name, compression, location.size(path) or 0, _modified(path))


def _output_files(output: Output, split: str | None) -> list[InputFile]:
    compression = output.manifest.parameters.compression or "none"
    made = []
    for name, entry in output.manifest.splits.items():
        container = entry.formats[0]
        for shard in entry.shards:
            path = output.shard_path(shard)
            made.append(
                InputFile(
                    path, split or name, container, compression if container == registry.DEFAULT else "none", shard.bytes, _modified(path)
                )
            )
    return made


def _tfds_files(folder: TfdsFolder, split: str | None) -> list[InputFile]:
    return [
        InputFile(path, split or name, folder.container, "none", location.size(path) or 0, _modified(path))
        for name, paths in folder.splits.items()
        for path in paths
    ]


def _modified(path: str) -> int | None:
    if location.is_url(path):
        return None
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _resolved(path: str) -> str:
    return path if location.is_url(path) else os.path.realpath(path)
