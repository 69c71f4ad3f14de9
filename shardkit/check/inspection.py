"""``shardkit inspect``: feature keys, dtypes, shapes and counts of any TFRecord, at once.

A shardkit folder is described from its manifest alone (no record is read). Other files are
sampled: the first ``limit`` records are parsed by hand and the schema inferred from them,
including whether records are ``tf.train.Example`` at all.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.features.base import FeatureKind
from shardkit.features.registry import of_entry
from shardkit.formats.containers import registry
from shardkit.formats.example_proto import BYTES, DecodeError, decode_example, decode_sequence_example, fields
from shardkit.output.found import Output, expand
from shardkit.output.manifest import Labels, Manifest
from shardkit.units import plural

EXAMPLE_CHARS = 40


@dataclasses.dataclass
class _KeyStats:
    dtype: str
    present: int = 0
    min_length: int | None = None
    max_length: int | None = None
    looks: set[str] = dataclasses.field(default_factory=set)
    example: str = ""
    dtypes: set[str] = dataclasses.field(default_factory=set)

    def add(self, dtype: str, values: Sequence[Any]) -> None:
        self.present += 1
        self.dtypes.add(dtype)
        n = len(values)
        self.min_length = n if self.min_length is None else min(self.min_length, n)
        self.max_length = n if self.max_length is None else max(self.max_length, n)
        if dtype == BYTES:
            for value in values[:4]:
                self.looks.add(sniff(value))
        if not self.example and n:
            self.example = _show(values)

    def to_dict(self, records: int) -> dict[str, Any]:
        dtype = self.dtype if len(self.dtypes) <= 1 else "mixed(" + ",".join(sorted(self.dtypes)) + ")"
        fixed = self.min_length == self.max_length
        return {
            "dtype": dtype,
            "shape": ([] if self.min_length == 1 else [self.min_length]) if fixed else None,
            "ragged": not fixed,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "present": self.present,
            "optional": self.present < records,
            "looks_like": sorted(self.looks - {""}),
            "example": self.example,
        }


def sniff(value: bytes) -> str:
    if value[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if value[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if not value:
        return ""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    return "text" if text.isprintable() or all(c.isprintable() or c in "\t\r\n" for c in text) else "binary"


def _show(values: Sequence[Any]) -> str:
    first = values[0]
    if isinstance(first, bytes):
        shown = repr(first[:EXAMPLE_CHARS]) + (f"... ({plural(len(first), 'byte')})" if len(first) > EXAMPLE_CHARS else "")
    else:
        shown = repr(first)
    more = f" +{len(values) - 1} more" if len(values) > 1 else ""
    return shown + more


def _classify(data: bytes) -> tuple[str, Any]:
    """('example', features) | ('sequence_example', (context, lists)) | ('other', reason)."""
    try:
        top = fields(data, 0, len(data))
    except DecodeError as exc:
        return "other", f"not a protocol buffer ({exc})"
    numbers = {field for field, _, _ in top}
    if not numbers <= {1, 2} or any(wire != 2 for _, wire, _ in top):
        return "other", "a protocol buffer, but not a tf.train.Example"
    if 2 in numbers:
        try:
            return "sequence_example", decode_sequence_example(data)
        except DecodeError as exc:
            return "other", f"not a SequenceExample ({exc})"
    try:
        return "example", decode_example(data)
    except DecodeError as exc:
        return "other", f"not a tf.train.Example ({exc})"


def infer(paths: Sequence[str], limit: int | None = 100, compression: str = "auto") -> dict[str, Any]:
    """Sample records from plain shard files (TFRecord, ArrayRecord) and describe what they hold."""
    kinds: dict[str, int] = {}
    keys: dict[str, _KeyStats] = {}
    lists: dict[str, _KeyStats] = {}
    other_reasons: list[str] = []
    files: list[dict[str, Any]] = []
    seen = 0

    def on_record(index: int, offset: int, payload: memoryview) -> None:
        nonlocal seen
        seen += 1
        kind, value = _classify(bytes(payload))
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "example":
            for key, (dtype, values) in value.items():
                keys.setdefault(key, _KeyStats(dtype)).add(dtype, values)
        elif kind == "sequence_example":
            context, steps = value
            for key, (dtype, values) in context.items():
                keys.setdefault(key, _KeyStats(dtype)).add(dtype, values)
            for key, items in steps.items():
                dtype = items[0][0] if items else "bytes"
                lists.setdefault(key, _KeyStats(dtype)).add(dtype, [v for _, vs in items for v in vs][:1] * len(items))
        elif len(other_reasons) < 3:
            starts = bytes(payload[:8]).hex()
            other_reasons.append(f"record {index} at byte {offset}: {value} ({plural(len(payload), 'byte')}, starts {starts})")

    for path in paths:
        remaining = None if limit is None else limit - seen
        if remaining is not None and remaining <= 0:
            break
        result = registry.of_file(path, compression).walk(path, on_record, limit=remaining, checksum=False)
        problem = result.describe_error() or None
        files.append({"path": path, "compression": result.compression, "scanned": result.records, "problem": problem})
    return {
        "files": files,
        "records_scanned": seen,
        "limited_to": limit,
        "kinds": kinds,
        "features": {k: v.to_dict(kinds.get("example", 0) + kinds.get("sequence_example", 0)) for k, v in sorted(keys.items())},
        "feature_lists": {
            k: v.to_dict(kinds.get("sequence_example", 0)) | {"steps": [v.min_length, v.max_length]} for k, v in sorted(lists.items())
        },
        "not_examples": other_reasons,
    }


def describe_output(output: Output) -> dict[str, Any]:
    """Everything ``inspect`` shows for a shardkit folder, from the manifest alone."""
    m = output.manifest
    totals = m.totals
    return {
        "path": output.path,
        "shardkit_version": m.shardkit_version,
        "manifest_version": m.version,
        "formats": list(m.parameters.formats),
        "compression": m.parameters.compression,
        "splits": {
            name: {"shards": len(info.shards), "records": info.records, "bytes": info.bytes, "skipped": info.skipped}
            for name, info in m.splits.items()
        },
        "totals": {"records": totals.records, "bytes": totals.bytes, "shards": totals.shards},
        "schema": list(m.schema),
        "classes": {key: list(names) for key, names in m.classes.items()},
        "summaries": summaries(m),
        "label_balance": [
            balance
            for name, info in m.splits.items()
            for balance in label_balance(name, balanced(m, info.labels), [(s.name, balanced(m, s.labels)) for s in info.shards])
        ],
    }


def balanced(manifest: Manifest, labels: Mapping[str, Mapping[str, int]] | None) -> dict[str, Mapping[str, int]]:
    """The label counts whose balance across shards means something: those of a feature (a class
    label, objects by class), not what was left out (the objects dropped, by class)."""
    features = manifest.config.get("features") or {}
    return {key: counts for key, counts in (labels or {}).items() if not features or key in features}


def summaries(manifest: Manifest) -> list[dict[str, Any]]:
    """What each feature's kind says of it beyond the schema table (objects per record and per
    class), each with its ``kind`` and ``key``."""
    features: dict[str, tuple[FeatureKind, list[Mapping[str, Any]]]] = {}
    for entry in manifest.schema:
        kind = of_entry(entry)
        features.setdefault(kind.feature_key(entry), (kind, []))[1].append(entry)
    splits = {name: (info.records, info.labels or {}) for name, info in manifest.splits.items()}
    out = []
    for key, (kind, entries) in features.items():
        found = kind.summary(key, entries, splits, manifest.classes.get(key, ()))
        if found is not None:
            out.append({"kind": kind.name, **found})
    return out


def label_balance(split: str, labels: Labels, shards: Sequence[tuple[str, Labels]]) -> list[dict[str, Any]]:
    """Per label feature of a split (``labels``: its counts; ``shards``: each shard's name and
    counts): how far the most lopsided shard's label mix is from the split's (total variation
    distance, 0 = the same mix, 1 = nothing in common), next to what shards of that size drawn at
    random from the split would show on average."""
    out = []
    for key, totals in labels.items():
        records = sum(totals.values())
        if not records:
            continue
        split_mix = {value: n / records for value, n in totals.items()}
        worst: tuple[float, str, int] = (-1.0, "", 0)
        for name, shard_labels in shards:
            counts = shard_labels.get(key, {})
            n = sum(counts.values())
            if n:
                distance = 0.5 * sum(abs(counts.get(value, 0) / n - p) for value, p in split_mix.items())
                worst = max(worst, (distance, name, n))
        if worst[2]:
            by_chance = 0.5 * sum(math.sqrt(2 * p * (1 - p) / (math.pi * worst[2])) for p in split_mix.values())
            out.append(
                {
                    "split": split,
                    "key": key,
                    "values": len(totals),
                    "largest_deviation": round(worst[0], 3),
                    "shard": worst[1],
                    "by_chance": round(min(by_chance, 1.0), 3),
                }
            )
    return out


def inspect(paths: Sequence[str], *, records: int | None = 100, compression: str = "auto") -> dict[str, Any]:
    """What ``shardkit inspect PATHS`` shows: shardkit folders from their manifests (at once), any
    other shard files from a sample of ``records`` records (None: every record), their schema inferred.

    Returns ``{"outputs": [...], "files": {...} or None}``; ``check.report`` renders it as text.
    """
    targets = expand(paths)
    outputs = [describe_output(o) for o in targets.outputs]
    return {"outputs": outputs, "files": infer(targets.files, records, compression) if targets.files else None}


def count(paths: Sequence[str], compression: str = "auto") -> list[dict[str, Any]]:
    """Exact record counts of every file PATHS name (a shardkit folder's shards included), by
    walking the framing (CRC-checked, no parsing)."""
    out = []
    for path in expand(paths).shard_files():
        result = registry.of_file(path, compression).walk(path, checksum=False)
        out.append({"path": path, "records": result.records, "bytes": result.file_bytes, "problem": result.describe_error() or None})
    return out
