"""Statistics of shard files written by anyone (TFRecord, ArrayRecord), in one pass: each file's
records decoded and counted in a worker, the parts merged per split.

A bytes feature is told by its first value: a picture (its signature: JPEG, PNG, GIF, BMP, WebP),
text (valid UTF-8) or opaque bytes. Pictures' formats and sizes in bytes are counted; their pixels
only with ``pixels`` (each picture decoded: the cost of a decode per picture).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.errors import ShardkitError
from shardkit.formats import image_codec, image_headers
from shardkit.formats.containers import registry
from shardkit.formats.example_decoder import ExampleDecoder
from shardkit.formats.example_proto import BYTES, DecodeError
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.statistics.proto import dataset_list
from shardkit.statistics.shard_statistics import ShardStatistics, merged

ALL = "all"  # the one dataset of files given without a split
_SIGNATURES = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF8", "gif"), (b"BM", "bmp"))


def picture_format(value: bytes) -> str | None:
    """The picture format ``value`` starts as, or None."""
    for signature, name in _SIGNATURES:
        if value.startswith(signature):
            return name
    if value[:4] == b"RIFF" and value[8:12] == b"WEBP":
        return "webp"
    return None


def file_statistics(paths: Sequence[str], workers: int | None = None, pixels: bool = False) -> Any:
    """One dataset, ``all``, of every record in ``paths``: a ``DatasetFeatureStatisticsList``."""
    return split_statistics({ALL: list(paths)}, workers, pixels)


def split_statistics(files: Mapping[str, Sequence[str]], workers: int | None = None, pixels: bool = False) -> Any:
    """Per split, the statistics of its files' records: a ``DatasetFeatureStatisticsList``."""
    jobs = [(split, (path, pixels)) for split, paths in files.items() for path in paths]
    if workers is None:
        workers = len(os.sched_getaffinity(0))
    if workers > 1 and len(jobs) > 1:
        pool = quiet_pool(mp.get_context(), min(workers, len(jobs)))
        try:
            parts = pool.map(_file_part, [job for _, job in jobs], chunksize=1)
        finally:
            stop_pool(pool)
    else:
        parts = [_file_part(job) for _, job in jobs]
    by_split: dict[str, list[tuple[str, dict[str, Any]]]] = {split: [] for split in files}
    for (split, (path, _)), part in zip(jobs, parts, strict=True):
        by_split[split].append((path, part))
    return dataset_list({split: _merged(found) for split, found in by_split.items()})


def _merged(parts: Sequence[tuple[str, dict[str, Any]]]) -> ShardStatistics:
    """Files' parts merged, a feature of two wire types refused (as TFDV refuses it) naming both
    files; a bytes feature one file took for text or a picture and another for opaque bytes is
    counted as bytes in all (each file tells by its own first value)."""
    first: dict[str, tuple[str, str]] = {}  # key -> (wire, the file it was first seen in)
    roles: dict[str, set[str]] = {}
    for path, part in parts:
        for key, wire in part["wires"].items():
            seen = first.setdefault(key, (wire, path))
            if seen[0] != wire:
                raise ShardkitError(
                    f"{path}: feature {key!r} is {wire} here and {seen[0]} in {seen[1]}; a feature keeps one type across "
                    "a dataset's records (TFDV and tf.io.parse_example refuse it too): give these files to stats separately"
                )
        for key, feature in part["stats"]["features"].items():
            roles.setdefault(key, set()).add(feature["role"])
    mixed = {key for key, found in roles.items() if len(found) > 1}
    return merged({**part["stats"], "features": _as_blobs(part["stats"]["features"], mixed)} for _, part in parts)


def _as_blobs(features: Mapping[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: {"role": "blob", "lists": f["lists"], "sizes": f["sizes"]} if k in keys else f for k, f in features.items()}


def _file_part(job: tuple[str, bool]) -> dict[str, Any]:
    """The statistics of one file's records and each feature's wire type, as plain data; a damaged
    file is one error naming it and the record. ``job``: the path, and whether to decode pictures."""
    path, pixels = job
    container = registry.of_file(path)
    counted = _Counter(container.name == "tfrecord", pixels)
    result = container.walk(path, counted.record)
    if counted.problem is not None:
        raise ShardkitError(f"{path}: {counted.problem}")
    if not result.ok:
        raise ShardkitError(f"{path}: {result.describe_error()}; the records before it were read (shardkit verify says the same)")
    return {"stats": counted.stats.to_data(), "wires": counted.wires}


class _Counter:
    """Decodes each record of a walk and counts it, telling bytes features apart on first sight."""

    def __init__(self, offsets: bool, pixels: bool) -> None:
        self.offsets = offsets  # whether the walk's offsets are bytes (a TFRecord's; ArrayRecord's are the index again)
        self.pixels = pixels
        self.stats = ShardStatistics()
        self.decoder = ExampleDecoder({})
        self.wires: dict[str, str] = {}  # each feature's wire type, as its first record has it
        self.problem: str | None = None

    def record(self, index: int, offset: int, payload: memoryview) -> None:
        if self.problem is not None:
            return
        try:
            features, _ = self.decoder.decode(bytes(payload))
        except DecodeError as exc:
            self.problem = f"{self._where(index, offset)}: not a tf.train.Example ({exc})"
            return
        for key, (wire, _) in features.items():
            first = self.wires.setdefault(key, wire)
            if first != wire:
                self.problem = (
                    f"{self._where(index, offset)}: feature {key!r} is {wire} here and {first} in the records before it; "
                    "a feature keeps one type across a dataset's records (TFDV and tf.io.parse_example refuse it too)"
                )
                return
        roles = self.stats.roles
        for key, (wire, values) in features.items():
            if wire != BYTES:
                continue
            if key not in roles and values:
                roles[key] = _role(values[0])
            if roles.get(key) == "picture":
                for value in values:
                    self.stats.picture(key, picture_format(value) or "unknown", _pixels(value) if self.pixels else None)
        self.stats.add(features)

    def _where(self, index: int, offset: int) -> str:
        return f"record {index} at byte {offset}" if self.offsets else f"record {index}"


def _pixels(value: bytes) -> np.ndarray | None:
    """A picture's pixels as a build would hold them (palettes as RGB); None where it does not decode."""
    try:
        info = image_headers.probe(value)
        return image_codec.decode(value, image_codec.stored_mode(info, False, "image", None, "png"), info=info)
    except (image_headers.ImageProblem, ValueError, OSError):
        return None


def _role(value: bytes) -> str:
    if picture_format(value) is not None:
        return "picture"
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return "blob"
    return "text"
