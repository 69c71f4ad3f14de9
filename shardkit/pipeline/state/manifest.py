"""Making the manifest (``output.manifest``) from the build state and every shard's record, and
publishing it with ``errors.jsonl`` and the TFDS metadata.

It can always be rewritten from what is on disk (``.shardkit/build.json`` plus one record per
shard), so a crash between the last shard and the manifest loses nothing.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from shardkit.features.registry import kind_named
from shardkit.output import layout
from shardkit.output.build_state import BuildState, SkippedEntry
from shardkit.output.manifest import VERSION, Manifest, ShardEntry, SplitEntry
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.state import duplicate_report, tfds_metadata
from shardkit.storage import atomic, location
from shardkit.version import __version__


def schema_of(config: Mapping[str, Any], shards: Iterable[ShardResult]) -> list[dict[str, Any]]:
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


def make_manifest(
    state: BuildState,
    shards: Iterable[ShardResult],
    run: Mapping[str, Any] | None = None,
    schema: Sequence[Mapping[str, Any]] | None = None,
) -> Manifest:
    """The manifest; ``run`` holds settings of the last run that do not change records; ``schema``
    is given where the config does not make it (a reshard's, carried over or inferred)."""
    shards = sorted(shards, key=lambda s: (s.split, s.index))
    splits: dict[str, SplitEntry] = {}
    label_keys = _label_keys(shards)
    options = {c.name: o for c in state.parameters.containers() if (o := c.writer_options()) is not None}
    for split, plan in state.splits.items():
        mine = [s for s in shards if s.split == split]
        splits[split] = SplitEntry(
            records=sum(s.records for s in mine),
            bytes=sum(s.bytes for s in mine),
            entries=sum(s.entries for s in mine),
            skipped=sum(len(s.skipped) for s in mine) + sum(1 for e in state.skipped if e.split == split),
            num_shards=plan.num_shards,
            entries_per_shard=plan.entries_per_shard,
            shards=tuple(
                ShardEntry(
                    name=s.name,
                    records=s.records,
                    bytes=s.bytes,
                    crc32c=s.crc32c,
                    entries=s.entries,
                    index=s.index_file,
                    covers=s.covers,
                    labels={key: dict(sorted((s.labels[key] or {}).items())) for key in label_keys},
                    format=s.format,
                    twins=s.twins,
                )
                for s in mine
            ),
            labels=label_totals(mine, label_keys),
            formats=state.parameters.formats,
            writer_options=options,
        )
    config = state.config
    return Manifest(
        version=VERSION,
        shardkit_version=__version__,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        fingerprint=state.fingerprint,
        parameters=state.parameters,
        inputs=state.inputs,
        run=dict(run or {}),
        config=config,
        schema=tuple(schema if schema is not None else schema_of(config, shards)),
        classes={k: tuple(v["classes"]) for k, v in config["features"].items() if kind_named(v["kind"]).has_classes},
        splits=splits,
    )


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


def error_lines(state: BuildState, shards: Iterable[ShardResult]) -> list[SkippedEntry]:
    """Every skipped entry, in plan order first, then shard order: what errors.jsonl holds."""
    lines = list(state.skipped)
    for s in sorted(shards, key=lambda s: (s.split, s.index)):
        lines.extend(SkippedEntry(s.split, src, line, reason) for src, line, reason in s.skipped)
    return lines


TfdsWriter = Callable[[str, Manifest, bool], list[str]]


def write_statistics(out_dir: str, shards: Sequence[ShardResult], durable: bool) -> bool:
    """``OUT/statistics.pb`` from each shard's statistics, merged per split; none where a shard
    has none (a shard record from before statistics; a reshard, which reads no values)."""
    path = location.join(out_dir, layout.STATISTICS)
    if not shards or any(s.statistics is None for s in shards):
        location.remove(path)
        return False
    from shardkit.statistics.proto import dataset_list
    from shardkit.statistics.shard_statistics import merged

    by_split: dict[str, list[dict[str, Any]]] = {}
    for shard in sorted(shards, key=lambda s: (s.split, s.index)):
        by_split.setdefault(shard.split, []).append(shard.statistics)  # type: ignore[arg-type]
    proto = dataset_list({split: merged(parts) for split, parts in by_split.items()})
    atomic.write_atomic(path, proto.SerializeToString(), durable)
    return True


def publish(
    out_dir: str,
    state: BuildState,
    shards: list[ShardResult],
    run: Mapping[str, Any],
    durable: bool,
    schema: Sequence[Mapping[str, Any]] | None = None,
    tfds: TfdsWriter = tfds_metadata.write,
) -> Manifest:
    """errors.jsonl, the TFDS metadata (``tfds`` writes it), then manifest.json, from the state and
    every shard's record (and ``schema``, where the config does not make it)."""
    manifest = make_manifest(state, shards, run, schema)
    errors = error_lines(state, shards)
    errors_path = location.join(out_dir, layout.ERRORS)
    if errors:
        atomic.write_atomic(errors_path, "".join(json.dumps(e.to_dict()) + "\n" for e in errors).encode(), durable)
    else:
        location.remove(errors_path)
    write_statistics(out_dir, shards, durable)
    asked = run.get("duplicates") or ("drop" if state.parameters.drop_duplicates is not None else None)
    if asked is None and any(s.duplicates for s in shards):  # finalize after nodes that searched: report as they did
        asked = "report"
    found = duplicate_report.search(
        out_dir, location.join(layout.state_dir(out_dir), state.plan), shards, {**run, "duplicates": asked}, durable
    )
    if found is not None:
        manifest = dataclasses.replace(manifest, duplicates=found)
    tfds(out_dir, manifest, durable)
    features = manifest.config["features"].values()
    label_map = next((t for v in features if (t := kind_named(v["kind"]).label_map_file(v)) is not None), None)
    label_map_path = location.join(out_dir, layout.LABEL_MAP)
    if label_map is not None:
        atomic.write_atomic(label_map_path, label_map.encode("utf-8"), durable)
    else:
        location.remove(label_map_path)
    atomic.write_json(layout.manifest_path(out_dir), manifest.to_dict(), durable)  # last: its presence says the rest is there
    return manifest
