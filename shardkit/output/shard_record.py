"""The per-shard record, ``OUT/.shardkit/shards/NAME.json``: what one finished shard holds.

A worker returns it and commits it last, after the shard (and its ``.idx``) are in place: its
presence with this build's fingerprint and the shard's size is what makes the shard finished. The
manifest is made from these records and the build state alone.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.storage import location
from shardkit.storage.atomic import fsync_dir, write_json


@dataclasses.dataclass(frozen=True)
class ShardFile:
    """A shard's records in another container (``--format tfrecord,arrayrecord``): the same
    records, in the same order, in a file of its own, with its own size and checksum."""

    format: str
    name: str
    bytes: int
    crc32c: str
    index: str | None = None  # its sidecar, when its container keeps one (a TFRecord twin's .idx)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ShardResult:
    """What one finished shard holds: the per-shard record, also saved beside the build state."""

    name: str
    split: str
    index: int
    num_shards: int
    records: int
    bytes: int
    crc32c: str
    entries: int
    covers: tuple[tuple[str, int, int], ...]  # (index file, first line, last line) runs
    skipped: tuple[tuple[str, int, str], ...]  # (index file, line, reason)
    lengths: dict[str, tuple[int, int]]  # feature key -> (min, max) list length seen
    sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]]  # image key -> (min h, max h, min w, max w, channels)
    fingerprint: str
    seconds: float
    index_file: str | None = None  # NAME.idx beside the shard, when written
    labels: dict[str, dict[str, int] | None] = dataclasses.field(default_factory=dict)  # label key -> value -> records
    format: str = registry.DEFAULT  # the container of ``name`` (records from before containers had names: TFRecord)
    twins: tuple[ShardFile, ...] = ()  # the same records in the build's other containers
    # Its records' statistics (``statistics.ShardStatistics.to_data``); None: written before shards kept them.
    statistics: dict[str, Any] | None = None
    # With --duplicates, a row per input written (``pipeline.shard.fingerprints``): identity, hash, digest.
    duplicates: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def files(self) -> dict[str, int | None]:
        """Every file in OUT this shard is, and its size where its record knows it (a sidecar's is None)."""
        found: dict[str, int | None] = {self.name: self.bytes, **{twin.name: twin.bytes for twin in self.twins}}
        for sidecar in (self.index_file, *(twin.index for twin in self.twins)):
            if sidecar is not None:
                found[sidecar] = None
        return found

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ShardResult:
        fields = dict(raw)
        fields["covers"] = tuple(tuple(c) for c in fields["covers"])
        fields["skipped"] = tuple(tuple(s) for s in fields["skipped"])
        fields["lengths"] = {k: tuple(v) for k, v in fields["lengths"].items()}
        fields["sizes"] = {k: (v[0], v[1], v[2], v[3], tuple(v[4])) for k, v in fields["sizes"].items()}
        fields.setdefault("labels", {})
        fields["twins"] = tuple(ShardFile(**twin) for twin in fields.get("twins") or ())
        return cls(**fields)


def write_shard_record(out: str, record: ShardResult, durable: bool = True) -> None:
    """The shard's commit point: written after the shard itself is renamed into place."""
    write_json(layout.shard_record_path(out, record.name), record.to_dict(), durable)
    if durable:
        fsync_dir(out)  # the shard's rename, before anyone trusts its record


def load_shard_records(out: str) -> dict[str, ShardResult]:
    """Every readable record in OUT, by shard name; an unreadable one means its shard is rebuilt."""
    folder = layout.shard_records_dir(out)
    records: dict[str, ShardResult] = {}
    paths = [location.join(folder, n) for n in location.listdir(folder) if layout.is_shard_record_name(n)]
    for data in location.read_many(paths).values():  # concurrent GETs in a bucket
        try:
            result = ShardResult.from_dict(json.loads(data or b""))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        records[result.name] = result
    return records
