"""``shardkit stats``: the statistics of a build's records, from ``OUT/statistics.pb``, or of
shard files written by anyone, computed in one pass (``statistics.foreign``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from shardkit.errors import ShardkitError, UsageError
from shardkit.output import layout
from shardkit.output.found import Output, expand
from shardkit.statistics.summary import lines, summarize
from shardkit.storage import atomic, location


@dataclasses.dataclass(frozen=True)
class DatasetStatistics:
    """Per split and feature, what the records hold. ``proto`` is the ``DatasetFeatureStatisticsList``
    (``tfdv.visualize_statistics(stats.proto)``), ``splits`` the same as plain data
    (``shardkit stats --json``), ``labels`` a build's class counts per split (from its manifest)."""

    proto: Any
    splits: dict[str, Any]
    labels: dict[str, dict[str, dict[str, int]]]
    source: str  # where they come from: OUT/statistics.pb, or the files they were computed from

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "splits": self.splits, "labels": self.labels}

    def lines(self) -> list[str]:
        return lines(self.splits, self.labels)

    def normalize(self, split: str = "train", feature: str | None = None, scale: float = 1.0) -> tuple[list[float], list[float]]:
        """The per-channel (mean, std) of ``feature``'s pixels (default: the one image feature) in
        ``split``, divided by 255 for ``scale=1.0`` (albumentations' ``Normalize(max_pixel_value=1)``,
        ``keras.layers.Normalization`` on 0-1 pixels) or as they are for ``scale=255``."""
        if split not in self.splits:
            raise UsageError(f"no split {split!r} in these statistics: {', '.join(self.splits) or 'none'}")
        images = {k: f for k, f in self.splits[split]["features"].items() if f.get("pixels")}
        if feature is None and len(images) != 1:
            raise UsageError(f"name the image feature: {', '.join(images) or 'none has measured pixels'}")
        key = feature if feature is not None else next(iter(images))
        if key not in images:
            raise UsageError(f"{key!r} has no measured pixels in {split!r}: {', '.join(images) or 'none has'}")
        (pixels,) = images[key]["pixels"].values() if len(images[key]["pixels"]) == 1 else (images[key]["pixels"]["RGB"],)
        factor = scale / 255.0
        return [m * factor for m in pixels["mean"]], [s * factor for s in pixels["std"]]


def stats(paths: Sequence[str], workers: int | None = None, output: str | None = None, pixels: bool = False) -> DatasetStatistics:
    """Statistics of one shardkit OUT (read from its ``statistics.pb``) or of shard files (computed
    on ``workers`` processes); ``output``: also write the proto there. ``pixels``: decode every
    picture to measure its pixels (an OUT's are then counted again from its shards)."""
    targets = expand(paths)
    if output is not None:
        _check_output(output, targets.files, [o.path for o in targets.outputs])
    if len(targets.outputs) == 1 and not targets.files:
        found = _of_output(targets.outputs[0], workers, pixels)
    elif targets.outputs:
        raise UsageError("give one shardkit output folder, or shard files: not both, nor several outputs")
    else:
        from shardkit.statistics.foreign import file_statistics

        found = _made(file_statistics(targets.files, workers, pixels), {}, f"{len(targets.files)} files")
    if output is not None:
        atomic.write_atomic(output, found.proto.SerializeToString(), durable=False)
    return found


def _check_output(output: str, files: Sequence[str], outputs: Sequence[str]) -> None:
    """Refuse an ``--output`` that is one of the files read, or inside an output folder read (whose
    files are the build's: its manifest, shards, statistics.pb)."""
    target = os.path.realpath(output)
    if target in {os.path.realpath(f) for f in files}:
        raise UsageError(f"--output {output} is one of the files to read: name a new file")
    for folder in outputs:
        if not location.is_url(folder) and os.path.commonpath([target, os.path.realpath(folder)]) == os.path.realpath(folder):
            raise UsageError(f"--output {output} is inside {folder}, whose files are the build's: name a file outside it")


def _of_output(out: Output, workers: int | None, pixels: bool) -> DatasetStatistics:
    labels = {name: {k: dict(v) for k, v in (split.labels or {}).items()} for name, split in out.manifest.splits.items()}
    path = location.join(out.path, layout.STATISTICS)
    try:
        data = None if pixels else location.read_bytes(path)
    except FileNotFoundError:
        data = None
    if data is None:
        # Pixels asked for, or an output whose records were not counted as they were written (a
        # reshard; a build from before statistics): count them now, split by split, from its shards.
        from shardkit.statistics.foreign import split_statistics

        shards = {split: [out.shard_path(shard) for name, shard in out.shards() if name == split] for split in out.manifest.splits}
        return _made(split_statistics(shards, workers, pixels), labels, f"{out.path} (computed from its shards)")
    from tensorflow_metadata.proto.v0 import statistics_pb2

    proto = statistics_pb2.DatasetFeatureStatisticsList()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, whose module moves between versions
        raise ShardkitError(f"{path}: not a DatasetFeatureStatisticsList ({exc}); delete it and run `shardkit finalize`") from None
    return _made(proto, labels, path)


def _made(proto: Any, labels: dict[str, dict[str, dict[str, int]]], source: str) -> DatasetStatistics:
    return DatasetStatistics(proto, summarize(proto), labels, source)
