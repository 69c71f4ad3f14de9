"""``shardkit inspect``: feature keys, dtypes, shapes and counts of any TFRecord, at once.

A shardkit folder is described from its manifest alone (no record is read). Other files are
sampled: the first ``limit`` records are parsed by hand and the schema inferred from them,
including whether records are ``tf.train.Example`` at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.features.base import FeatureKind
from shardkit.features.registry import of_entry
from shardkit.formats.containers import registry
from shardkit.formats.record_survey import infer
from shardkit.output.found import Output, expand
from shardkit.output.manifest import Labels, Manifest


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
