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
    by_split: dict[str, list[dict[str, Any]]] = {split: [] for split in files}
    for (split, _), part in zip(jobs, parts, strict=True):
        by_split[split].append(part)
    return dataset_list({split: merged(found) for split, found in by_split.items()})


def _file_part(job: tuple[str, bool]) -> dict[str, Any]:
    """The statistics of one file's records, as plain data; a damaged file is one error naming it."""
    path, pixels = job
    container = registry.of_file(path)
    counted = _Counter(pixels)
    result = container.walk(path, counted.record)
    if counted.problem is not None:
        raise ShardkitError(f"{path}: record {counted.problem[0]}: not a tf.train.Example ({counted.problem[1]})")
    if not result.ok:
        raise ShardkitError(f"{path}: {result.describe_error()}; the records before it were read (shardkit verify says the same)")
    return counted.stats.to_data()


class _Counter:
    """Decodes each record of a walk and counts it, telling bytes features apart on first sight."""

    def __init__(self, pixels: bool) -> None:
        self.pixels = pixels
        self.stats = ShardStatistics()
        self.decoder = ExampleDecoder({})
        self.problem: tuple[int, str] | None = None

    def record(self, index: int, offset: int, payload: memoryview) -> None:
        if self.problem is not None:
            return
        try:
            features, _ = self.decoder.decode(bytes(payload))
        except DecodeError as exc:
            self.problem = (index, str(exc))
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
