"""The manifest, ``OUT/manifest.json``: what a finished build holds, as frozen values.

``to_dict`` is the document a build writes, key for key and in the same order (users diff these
files). ``from_dict`` reads any manifest of this format: what older builds did not write gets a
default (``inputs``, ``run``, a split's ``entries_per_shard``, ``labels`` and ``formats`` (TFRecord,
before version 2), a shard's ``index``, ``covers``, ``labels`` and ``twins``), and the structure every
reader relies on is checked, so a hand-edited or truncated manifest is one ``ManifestError`` saying
what is wrong.

The schema entries and the config stay JSON mappings: what each feature kind writes in them is
the features' business, not this contract's. ``totals`` and ``errors`` are not stored: they are
sums over the splits, as the build has always written them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.output.build_state import BuildParameters
from shardkit.output.shard_record import ShardFile

FORMAT = "shardkit.manifest"
VERSION = 2  # 2: each split names its shard containers (formats), each shard its twins in the others

Labels = Mapping[str, Mapping[str, int]]  # label feature key -> value -> records


class ManifestError(ValueError):
    """Not a shardkit manifest, or a damaged one: the message says which, and what is wrong."""


@dataclasses.dataclass(frozen=True)
class ShardEntry:
    name: str  # a file name in OUT
    records: int
    bytes: int
    crc32c: str  # of the whole file, hex
    entries: int  # entries of the inputs it holds (records / copies per entry)
    index: str | None  # the .idx file beside it, when written
    covers: tuple[tuple[str, int, int], ...]  # (index file, first line, last line) runs, when the inputs' order is kept
    labels: Labels  # per label feature, the records carrying each value
    format: str = registry.DEFAULT  # the container ``name`` is in: its split's first format
    twins: tuple[ShardFile, ...] = ()  # the same records in the split's other formats, in order

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "records": self.records,
            "bytes": self.bytes,
            "crc32c": self.crc32c,
            "entries": self.entries,
            "index": self.index,
            "covers": [list(c) for c in self.covers],
            "labels": {key: dict(counts) for key, counts in self.labels.items()},
            "twins": [twin.to_dict() for twin in self.twins],
        }

    def file(self, format: str) -> ShardFile:
        """This shard's file in container ``format`` (one of its split's formats)."""
        if format == self.format:
            return ShardFile(self.format, self.name, self.bytes, self.crc32c, self.index)
        for twin in self.twins:
            if twin.format == format:
                return twin
        raise KeyError(f"shard {self.name} has no {format} file")


@dataclasses.dataclass(frozen=True)
class SplitEntry:
    records: int
    bytes: int
    entries: int
    skipped: int  # entries left out with --on-error skip
    num_shards: int
    entries_per_shard: int | None  # None in manifests from before it was recorded
    shards: tuple[ShardEntry, ...]
    labels: Labels | None  # None: the build did not count labels (manifests from before label counts)
    formats: tuple[str, ...] = (registry.DEFAULT,)  # the containers its shards are in, the primary first
    writer_options: Mapping[str, str] = dataclasses.field(default_factory=dict)  # container -> its writer's options (ArrayRecord's)

    def to_dict(self) -> dict[str, Any]:
        return {
            "formats": list(self.formats),
            "writer_options": dict(self.writer_options),
            "records": self.records,
            "bytes": self.bytes,
            "entries": self.entries,
            "skipped": self.skipped,
            "num_shards": self.num_shards,
            "entries_per_shard": self.entries_per_shard,
            "shards": [s.to_dict() for s in self.shards],
            "labels": None if self.labels is None else {key: dict(counts) for key, counts in self.labels.items()},
        }


@dataclasses.dataclass(frozen=True)
class Totals:
    records: int
    bytes: int
    shards: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    version: int
    shardkit_version: str | None
    created: str | None  # UTC, ISO 8601
    fingerprint: str
    parameters: BuildParameters
    inputs: Mapping[str, Any]
    run: Mapping[str, Any]  # settings of the last run that do not change records (workers, on_error, ...)
    config: Mapping[str, Any]  # the resolved config, class lists filled
    schema: tuple[Mapping[str, Any], ...]  # one entry per feature key: key, dtype, kind, shape, ...
    classes: Mapping[str, tuple[str, ...]]  # class_name feature -> its class names, by id
    splits: Mapping[str, SplitEntry]
    duplicates: Mapping[str, Any] | None = None  # with --duplicates: the groups found (pipeline.state.duplicate_report)

    @property
    def totals(self) -> Totals:
        return Totals(
            sum(s.records for s in self.splits.values()),
            sum(s.bytes for s in self.splits.values()),
            sum(len(s.shards) for s in self.splits.values()),
        )

    @property
    def skipped(self) -> int:
        """Entries left out with --on-error skip, listed in ``errors.jsonl``."""
        return sum(s.skipped for s in self.splits.values())

    def shards(self) -> list[tuple[str, ShardEntry]]:
        """(split, shard entry) for every shard, split by split in manifest order."""
        return [(name, shard) for name, split in self.splits.items() for shard in split.shards]

    def to_dict(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "format": FORMAT,
            "version": self.version,
            "shardkit_version": self.shardkit_version,
            "created": self.created,
            "fingerprint": self.fingerprint,
            "parameters": self.parameters.to_dict(),
            "inputs": self.inputs,
            "run": self.run,
            "config": self.config,
            "schema": list(self.schema),
            "classes": {key: list(names) for key, names in self.classes.items()},
            "splits": {name: split.to_dict() for name, split in self.splits.items()},
            "totals": {"records": totals.records, "bytes": totals.bytes, "shards": totals.shards},
            "errors": {"skipped": self.skipped, "file": layout.ERRORS if self.skipped else None},
            **({"duplicates": dict(self.duplicates)} if self.duplicates is not None else {}),
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Manifest:
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or "splits" not in raw:
            raise ManifestError("not a shardkit manifest")
        version = raw.get("version", VERSION)
        if isinstance(version, bool) or not isinstance(version, int):
            raise _damaged(f"version {version!r} is not a number")
        if version > VERSION:  # a later format may mean something else by the same keys: never guess
            raise ManifestError(f"manifest version {version} is newer than this shardkit reads ({VERSION}): upgrade shardkit to read it")
        if not isinstance(raw["splits"], dict):
            raise _damaged("splits is not a mapping")
        schema = raw.get("schema", [])
        if not isinstance(schema, list) or not all(isinstance(f, dict) and "key" in f and "dtype" in f for f in schema):
            raise _damaged("schema is not a list of features with key and dtype")
        for key in ("parameters", "inputs", "run", "config", "classes"):
            if not isinstance(raw.get(key, {}), dict):
                raise _damaged(f"{key} is not a mapping")
        return cls(
            version=version,
            shardkit_version=raw.get("shardkit_version"),
            created=raw.get("created"),
            fingerprint=raw.get("fingerprint", ""),
            parameters=BuildParameters.from_dict(raw.get("parameters", {})),
            inputs=raw.get("inputs", {}),
            run=raw.get("run", {}),
            config=raw.get("config", {}),
            schema=tuple(schema),
            classes={key: tuple(names) for key, names in raw.get("classes", {}).items()},
            splits={name: _split(name, info) for name, info in raw["splits"].items()},
            duplicates=raw["duplicates"] if isinstance(raw.get("duplicates"), dict) else None,
        )


def _damaged(problem: str) -> ManifestError:
    return ManifestError(f"damaged manifest: {problem}")


def _split(name: str, info: Any) -> SplitEntry:
    if not isinstance(info, dict) or not isinstance(info.get("shards"), list):
        raise _damaged(f"split {name!r} has no shard list")
    for key in ("records", "bytes"):
        if not isinstance(info.get(key), int):
            raise _damaged(f"split {name!r} has no {key} count")
    formats = info.get("formats") or [registry.DEFAULT]
    if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
        raise _damaged(f"split {name!r}: formats is not a list of container names")
    shards = tuple(_shard(name, shard, formats) for shard in info["shards"])
    labels = info.get("labels")
    return SplitEntry(
        records=info["records"],
        bytes=info["bytes"],
        entries=info.get("entries", 0),
        skipped=info.get("skipped", 0),
        num_shards=info.get("num_shards", len(shards)),
        entries_per_shard=info.get("entries_per_shard"),
        shards=shards,
        labels=None if labels is None else _labels(name, labels),
        formats=tuple(formats),
        writer_options=dict(info.get("writer_options") or {}),
    )


def _shard(split: str, shard: Any, formats: list[str]) -> ShardEntry:
    if not isinstance(shard, dict) or not all(
        isinstance(shard.get(k), t) for k, t in (("name", str), ("records", int), ("bytes", int), ("crc32c", str))
    ):
        raise _damaged(f"a shard of split {split!r} lacks name, records, bytes or crc32c")
    if "/" in shard["name"] or shard["name"].startswith("."):
        raise _damaged(f"shard name {shard['name']!r} is not a file name")
    covers = shard.get("covers") or []
    if not isinstance(covers, list) or not all(isinstance(c, list) and len(c) == 3 for c in covers):
        raise _damaged(f"shard {shard['name']!r}: covers is not a list of (index file, first line, last line)")
    return ShardEntry(
        name=shard["name"],
        records=shard["records"],
        bytes=shard["bytes"],
        crc32c=shard["crc32c"],
        entries=shard.get("entries", 0),
        index=shard.get("index"),
        covers=tuple((str(c[0]), int(c[1]), int(c[2])) for c in covers),
        labels=_labels(split, shard.get("labels") or {}),
        format=formats[0],
        twins=_twins(split, shard["name"], shard.get("twins") or [], formats[1:]),
    )


def _twins(split: str, shard: str, twins: Any, formats: list[str]) -> tuple[ShardFile, ...]:
    """A shard's files in its split's other formats: one each, a file name each."""
    try:
        found = tuple(ShardFile(**twin) for twin in twins)
    except TypeError:
        raise _damaged(f"shard {shard!r}: twins is not a list of files with format, name, bytes and crc32c") from None
    if [t.format for t in found] != formats or any("/" in t.name or t.name.startswith(".") for t in found):
        raise _damaged(f"shard {shard!r} of split {split!r}: its twins are not one file in each of {formats}")
    return found


def _labels(split: str, labels: Any) -> Labels:
    """Label counts; a key counted as None (older builds, where a feature was not a label) as none."""
    if not isinstance(labels, dict) or not all(isinstance(counts, dict | None) for counts in labels.values()):
        raise _damaged(f"the label counts of split {split!r} are not a mapping")
    return {key: dict(counts or {}) for key, counts in labels.items()}
