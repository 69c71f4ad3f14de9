"""The build state, ``OUT/.shardkit/build.json``: which build OUT belongs to, and its plan.

A build is identified by its fingerprint (config + record-affecting parameters + index file
contents). The state is published once the plan is: its files' folder, per split the shard
count and each shard's byte range of the plan file, the entries skipped while checking, and the
class lists collected. A rerun with the same fingerprint and ``STATE_VERSION`` resumes from it; a
state of another version keeps only what tells two builds apart (``difference``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from shardkit.errors import cut
from shardkit.formats.containers import registry
from shardkit.formats.containers.adapter import ShardContainer
from shardkit.output import layout
from shardkit.storage import atomic

STATE_VERSION = 2  # 2: the plan lives in files (.shardkit/plan-*), tasks carry byte ranges


@dataclasses.dataclass(frozen=True)
class BuildParameters:
    """The parameters that change records: part of the fingerprint, the state and the manifest."""

    seed: int
    compression: str | None  # None or "gzip"
    records_per_shard: int | None  # None: chosen from the entries' sizes
    split: str | None  # the one split built, or None for all
    index: bool = True  # NAME.idx beside uncompressed shards
    shuffle: bool = True
    formats: tuple[str, ...] = (registry.DEFAULT,)  # the shard containers written, the first the primary
    drop_duplicates: int | None = None  # --duplicates drop: its threshold (None: nothing dropped)

    def to_dict(self) -> dict[str, Any]:
        raw = {**dataclasses.asdict(self), "formats": list(self.formats)}
        if self.drop_duplicates is None:  # written where it drops: other manifests stay as they were
            del raw["drop_duplicates"]
        return raw

    def fingerprinted(self) -> dict[str, Any]:
        """What the fingerprint hashes: a TFRecord build's parameters as they were before builds
        had formats, so an OUT an earlier shardkit built still resumes."""
        raw = self.to_dict()
        if self.formats == (registry.DEFAULT,):
            del raw["formats"]
        return raw

    def containers(self) -> tuple[ShardContainer, ...]:
        """The adapters of the containers this build writes, with its TFRecord settings."""
        return registry.configured(self.formats, self.compression, self.index)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BuildParameters:
        """Builds before ``index`` and ``shuffle`` existed wrote neither: they get the defaults."""
        return cls(
            seed=raw.get("seed", 0),
            compression=raw.get("compression"),
            records_per_shard=raw.get("records_per_shard"),
            split=raw.get("split"),
            index=raw.get("index", True),
            shuffle=raw.get("shuffle", True),
            formats=tuple(raw.get("formats") or (registry.DEFAULT,)),
            drop_duplicates=raw.get("drop_duplicates"),
        )


@dataclasses.dataclass(frozen=True)
class SkippedEntry:
    """An entry left out with ``--on-error skip``: one line of ``errors.jsonl``."""

    split: str
    source: str  # the index file, or the folder (a reshard's: the shard file)
    line: int
    reason: str
    offset: int | None = None  # a reshard's damaged record: its byte offset (an ArrayRecord file's: its number)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", cut(self.reason))  # a 20 MB file name is no 20 MB line

    def to_dict(self) -> dict[str, Any]:
        raw = dataclasses.asdict(self)
        if self.offset is None:
            del raw["offset"]  # as builds have always written it
        else:
            del raw["line"]  # a shard file has no lines
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SkippedEntry:
        return cls(raw["split"], raw["source"], raw.get("line", 0), raw["reason"], raw.get("offset"))


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """One split's plan: its plan file under the plan folder, and each shard's byte range of it."""

    entries: int
    entries_per_shard: int
    num_shards: int
    bytes_per_entry: float  # estimated from a sample, for the free-space check
    file: str
    sources: tuple[dict[str, Any], ...]  # the inputs the plan lines refer to (pipeline.inputs.sources' PlanSource)
    shards: tuple[tuple[int, int, int], ...]  # (first byte, end byte, entries) of each shard

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "entries_per_shard": self.entries_per_shard,
            "num_shards": self.num_shards,
            "bytes_per_entry": self.bytes_per_entry,
            "file": self.file,
            "sources": [dict(s) for s in self.sources],
            "shards": [list(s) for s in self.shards],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SplitPlan:
        shards = tuple((int(a), int(b), int(n)) for a, b, n in raw["shards"])
        return cls(
            raw["entries"], raw["entries_per_shard"], raw["num_shards"], raw.get("bytes_per_entry", 0.0),
            raw["file"], tuple(dict(s) for s in raw["sources"]), shards,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class BuildState:
    version: int
    shardkit_version: str
    fingerprint: str
    parameters: BuildParameters
    inputs: Mapping[str, Any]  # what was read, for the fingerprint: index files with their hashes, or the folder
    config: Mapping[str, Any]  # the resolved config (pipeline.config's Config.to_dict), class lists filled once planned
    plan: str = ""  # the plan's folder under .shardkit; "" until planned
    splits: Mapping[str, SplitPlan] = dataclasses.field(default_factory=dict)
    skipped: tuple[SkippedEntry, ...] = ()
    classes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    nodes: int | None = None  # how many nodes share the plan, for a multi-node build

    @property
    def planned(self) -> bool:
        return bool(self.plan)

    def to_dict(self) -> dict[str, Any]:
        """The document in ``build.json``, in the order builds have always written it."""
        doc: dict[str, Any] = {
            "version": self.version,
            "shardkit_version": self.shardkit_version,
            "fingerprint": self.fingerprint,
            "parameters": self.parameters.to_dict(),
            "inputs": self.inputs,
            "config": self.config,
        }
        if self.planned:
            doc["plan"] = self.plan
            doc["splits"] = {name: plan.to_dict() for name, plan in self.splits.items()}
            doc["skipped"] = [e.to_dict() for e in self.skipped]
            doc["classes"] = {key: list(names) for key, names in self.classes.items()}
        if self.nodes is not None:
            doc["nodes"] = self.nodes
        return doc

    @classmethod
    def from_dict(cls, raw: Any) -> BuildState:
        """Any malformed state is a ``ValueError``: a rerun treats it as no state."""
        if not isinstance(raw, dict):
            raise ValueError("the build state is not a JSON object")
        try:
            state = cls(
                raw.get("version", 0), raw.get("shardkit_version", ""), raw.get("fingerprint", ""),
                BuildParameters.from_dict(raw.get("parameters", {})), raw.get("inputs", {}), raw.get("config", {}),
            )  # fmt: skip
            if state.version != STATE_VERSION or "plan" not in raw:
                return state  # another version's plan is never resumed: its shape is not read
            return dataclasses.replace(
                state,
                plan=raw["plan"],
                splits={name: SplitPlan.from_dict(plan) for name, plan in raw["splits"].items()},
                skipped=tuple(SkippedEntry.from_dict(e) for e in raw["skipped"]),
                classes={key: tuple(names) for key, names in raw["classes"].items()},
                nodes=raw.get("nodes"),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"a damaged build state ({type(exc).__name__}: {exc})") from None


def difference(old: BuildState, new: BuildState) -> str:
    """What tells ``old``'s build from ``new``'s, for the refusal to mix them in one OUT."""
    if old.parameters.formats != new.parameters.formats:  # the one a reader of OUT depends on first: say it
        return f"{','.join(old.parameters.formats)} shards, not {','.join(new.parameters.formats)} (--format)"
    changed = [
        what
        for what, a, b in (
            ("config", old.config, new.config),
            ("inputs", old.inputs, new.inputs),
            ("parameters", old.parameters, new.parameters),
        )
        if a != b
    ]
    return "different " + " and ".join(changed) if changed else "a different shardkit state version"


def read_state(out: str) -> BuildState:
    """OUT's build state; ``OSError`` when there is none, ``ValueError`` when it is unreadable."""
    return BuildState.from_dict(atomic.read_json(layout.build_state_path(out)))


def write_state(out: str, state: BuildState, durable: bool = True) -> None:
    atomic.write_json(layout.build_state_path(out), state.to_dict(), durable)


def create_state_once(out: str, state: BuildState) -> bool:
    """Publish ``state`` unless another node was first; True if this call won."""
    return atomic.create_json_once(layout.build_state_path(out), state.to_dict())


def current_fingerprint(out: str) -> str | None:
    """The fingerprint of the build OUT belongs to now (None: no readable build state). A worker
    asks before each commit, so only the fingerprint is read, not the plan."""
    try:
        raw = atomic.read_json(layout.build_state_path(out))
    except (OSError, ValueError):  # a store that cannot be reached is reported, not taken for "no build"
        return None
    fingerprint = raw.get("fingerprint") if isinstance(raw, dict) else None
    return fingerprint if isinstance(fingerprint, str) else None
