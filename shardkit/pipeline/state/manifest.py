"""The manifest: ``OUT/manifest.json``, versioned, derived from the build state and shard records.

It can always be rewritten from what is on disk (``.shardkit/build.json`` plus one record per
shard), so a crash between the last shard and the manifest loses nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from shardkit.features.registry import kind_named
from shardkit.pipeline.plan.tasks import ShardResult
from shardkit.storage import layout, location
from shardkit.version import __version__

FORMAT = "shardkit.manifest"
VERSION = 1


def schema(config: Mapping[str, Any], shards: Iterable[ShardResult]) -> list[dict[str, Any]]:
    """Every feature key with dtype and shape, from the config and the lengths the workers saw."""
    lengths: dict[str, tuple[int, int]] = {}
    sizes: dict[str, list[Any]] = {}
    for shard in shards:
        for key, (lo, hi) in shard.lengths.items():
            old = lengths.get(key, (lo, hi))
            lengths[key] = (min(old[0], lo), max(old[1], hi))
        for key, (h0, h1, w0, w1, ch) in shard.sizes.items():
            old_size = sizes.get(key, [h0, h1, w0, w1, ()])
            sizes[key] = [
                min(old_size[0], h0),
                max(old_size[1], h1),
                min(old_size[2], w0),
                max(old_size[3], w1),
                tuple(sorted({*old_size[4], *ch})),
            ]
    out: list[dict[str, Any]] = []
    for key, spec in config["features"].items():
        out.extend(kind_named(spec["kind"]).schema(key, spec, lengths, sizes))
    return out


def make_manifest(state: Mapping[str, Any], shards: Iterable[ShardResult], run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest document; ``run`` holds settings of the last run that do not change records."""
    shards = sorted(shards, key=lambda s: (s.split, s.index))
    splits: dict[str, Any] = {}
    label_keys = _label_keys(shards)
    for split, plan in state["splits"].items():
        mine = [s for s in shards if s.split == split]
        splits[split] = {
            "records": sum(s.records for s in mine),
            "bytes": sum(s.bytes for s in mine),
            "entries": sum(s.entries for s in mine),
            "skipped": sum(len(s.skipped) for s in mine) + sum(1 for e in state["skipped"] if e["split"] == split),
            "num_shards": plan["num_shards"],
            "entries_per_shard": plan["entries_per_shard"],
            "shards": [
                {
                    "name": s.name,
                    "records": s.records,
                    "bytes": s.bytes,
                    "crc32c": s.crc32c,
                    "entries": s.entries,
                    "index": s.index_file,
                    "covers": [list(c) for c in s.covers],
                    "labels": {key: dict(sorted((s.labels[key] or {}).items())) for key in label_keys},
                }
                for s in mine
            ],
            "labels": label_totals(mine, label_keys),
        }
    config = state["config"]
    skipped = sum(v["skipped"] for v in splits.values())
    return {
        "format": FORMAT,
        "version": VERSION,
        "shardkit_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fingerprint": state["fingerprint"],
        "parameters": state["parameters"],
        "inputs": state["inputs"],
        "run": dict(run or {}),
        "config": config,
        "schema": schema(config, shards),
        "classes": {k: v["classes"] for k, v in config["features"].items() if kind_named(v["kind"]).has_classes},
        "splits": splits,
        "totals": {
            "records": sum(v["records"] for v in splits.values()),
            "bytes": sum(v["bytes"] for v in splits.values()),
            "shards": sum(len(v["shards"]) for v in splits.values()),
        },
        "errors": {"skipped": skipped, "file": layout.ERRORS if skipped else None},
    }


def _label_keys(shards: list[ShardResult]) -> list[str]:
    """Features counted as labels in every shard: one value per record, few distinct values."""
    keys = {key for shard in shards for key in shard.labels}
    return sorted(key for key in keys if all(shard.labels.get(key) is not None for shard in shards))


def label_totals(shards: Iterable[ShardResult], keys: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per label feature, how many records of ``shards`` carry each value (most frequent first)."""
    totals: dict[str, dict[str, int]] = {}
    for key in keys:
        counts: dict[str, int] = {}
        for shard in shards:
            for value, n in (shard.labels.get(key) or {}).items():
                counts[value] = counts.get(value, 0) + n
        totals[key] = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return totals


def error_lines(state: Mapping[str, Any], shards: Iterable[ShardResult]) -> list[dict[str, Any]]:
    """Every skipped entry, in plan order first, then shard order: what errors.jsonl holds."""
    lines = [dict(e) for e in state["skipped"]]
    for s in sorted(shards, key=lambda s: (s.split, s.index)):
        lines.extend({"split": s.split, "source": src, "line": line, "reason": reason} for src, line, reason in s.skipped)
    return lines


def load_shard_records(out: str) -> dict[str, ShardResult]:
    folder = location.join(layout.state_dir(out), "shards")
    records: dict[str, ShardResult] = {}
    paths = [location.join(folder, n) for n in location.listdir(folder) if n.endswith(".json") and not n.startswith(".")]
    for data in location.read_many(paths).values():  # concurrent GETs in a bucket
        try:
            result = ShardResult.from_dict(json.loads(data or b""))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # an unreadable record means the shard is rebuilt
        records[result.name] = result
    return records
