"""What a reshard's manifest and TFDS metadata say of its records, from what its inputs said.

A shardkit OUT's config, schema and class names carry over whole (the records are its records);
a TFDS folder's ``dataset_info.json`` and ``features.json`` carry over with the new shard lengths;
foreign files' schema is inferred from a sample of the written records, as ``inspect`` infers it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.features.registry import of_entry
from shardkit.formats.example_proto import BYTES, FLOAT, INT64
from shardkit.formats.record_survey import infer
from shardkit.output.build_state import BuildState
from shardkit.output.manifest import Manifest
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.reshard.sources import Found
from shardkit.pipeline.reshard.tfds_folder import write_tfds_metadata
from shardkit.pipeline.state import manifest, tfds_metadata
from shardkit.storage import location

SAMPLE = 100  # records a foreign schema is inferred from


def carried_config(found: Found) -> dict[str, Any]:
    """The config the output records: its input OUT's, or none (features described by the schema alone)."""
    return dict(found.output.manifest.config) if found.output is not None else {"features": {}}


def label_keys(found: Found) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """The label features the input OUT counted (a single value a record), each with its class names."""
    if found.output is None:
        return ()
    made = found.output.manifest
    keys = sorted({key for split in made.splits.values() for key in split.labels or {}})
    return tuple((key, made.classes.get(key)) for key in keys)


def publish(out_dir: str, state: BuildState, shards: list[ShardResult], run: Mapping[str, Any], durable: bool, found: Found) -> Manifest:
    """errors.jsonl, the TFDS metadata and manifest.json of a finished reshard."""
    if found.output is not None:
        return manifest.publish(out_dir, state, shards, run, durable, schema=found.output.manifest.schema)
    by_split: dict[str, list[str]] = {}
    for shard in sorted(shards, key=lambda s: (s.split, s.index)):
        if shard.records:
            by_split.setdefault(shard.split, []).append(location.join(out_dir, shard.name))
    schema = inferred_schema(list(by_split.values()))
    if found.tfds is not None:
        source = found.tfds

        def tfds(out: str, made: Manifest, durable: bool) -> list[str]:
            lengths = {name: [(s.records, s.bytes) for s in split.shards] for name, split in made.splits.items()}
            return write_tfds_metadata(out, source, lengths, made.parameters.formats, durable)

        return manifest.publish(out_dir, state, shards, run, durable, schema=schema, tfds=tfds)
    features = tfds_features(schema)

    def described(out: str, made: Manifest, durable: bool) -> list[str]:
        return tfds_metadata.write(out, made, durable, features)

    return manifest.publish(out_dir, state, shards, run, durable, schema=schema, tfds=described)


def inferred_schema(splits: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """Schema entries (key, dtype, shape) of the features a sample of each split's records hold
    (``splits``: each split's shard paths); a key some sampled record lacks is ``optional``."""
    sampled = [infer(paths, SAMPLE) for paths in splits if paths]
    keys = sorted({key for found in sampled for key in found["features"]})
    schema = []
    for key in keys:
        seen = [found["features"].get(key) for found in sampled]
        described = next(d for d in seen if d is not None)
        dtypes = {d["dtype"] for d in seen if d is not None}
        shapes = {repr(d["shape"]) for d in seen if d is not None}
        entry = {
            "key": key,
            "dtype": described["dtype"] if len(dtypes) == 1 else "mixed",
            "shape": described["shape"] if len(shapes) == 1 else None,
        }
        if any(d is None or d["optional"] for d in seen):
            entry["optional"] = True
        schema.append(entry | {"inferred": True})
    return schema


def tfds_features(schema: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Foreign records' features as TFDS ``Tensor``s (of their wire type; a list of any length where
    lengths vary): those in every record sampled, of one type; TFDS fails on a key a record lacks."""
    return {
        entry["key"]: of_entry(entry, entry["dtype"]).tfds_feature(entry, {})
        for entry in schema
        if entry["dtype"] in (BYTES, FLOAT, INT64) and not entry.get("optional")
    }
