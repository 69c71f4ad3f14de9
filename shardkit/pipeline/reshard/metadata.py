"""What a reshard's manifest and TFDS metadata say of its records, from what its inputs said.

A shardkit OUT's config, schema and class names carry over whole (the records are its records);
a TFDS folder's ``dataset_info.json`` and ``features.json`` carry over with the new shard lengths;
foreign files' schema is inferred from a sample of the written records, as ``inspect`` infers it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.formats.record_survey import infer
from shardkit.output import layout
from shardkit.output.build_state import BuildState
from shardkit.output.manifest import Manifest
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.reshard.sources import Found
from shardkit.pipeline.reshard.tfds_folder import write_tfds_metadata
from shardkit.pipeline.state import manifest
from shardkit.storage import location

SAMPLE = 100  # records a foreign schema is inferred from


def carried_config(found: Found) -> dict[str, Any]:
    """The config the output records: its input OUT's, or none (features described by the schema alone)."""
    return dict(found.output.manifest.config) if found.output is not None else {"features": {}}


def publish(out_dir: str, state: BuildState, shards: list[ShardResult], run: Mapping[str, Any], durable: bool, found: Found) -> Manifest:
    """errors.jsonl, the TFDS metadata and manifest.json of a finished reshard."""
    if found.output is not None:
        return manifest.publish(out_dir, state, shards, run, durable, schema=found.output.manifest.schema)
    schema = inferred_schema([location.join(out_dir, s.name) for s in sorted(shards, key=lambda s: (s.split, s.index)) if s.records])
    if found.tfds is not None:
        source = found.tfds

        def tfds(out: str, made: Manifest, durable: bool) -> list[str]:
            lengths = {name: [(s.records, s.bytes) for s in split.shards] for name, split in made.splits.items()}
            return write_tfds_metadata(out, source, lengths, made.parameters.formats, durable)

        return manifest.publish(out_dir, state, shards, run, durable, schema=schema, tfds=tfds)
    return manifest.publish(out_dir, state, shards, run, durable, schema=schema, tfds=_no_tfds_metadata)


def inferred_schema(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Schema entries (key, dtype, shape) of the features a sample of the records at ``paths`` hold."""
    found = infer(paths, SAMPLE)
    return [
        {"key": key, "dtype": described["dtype"], "shape": described["shape"], "inferred": True}
        for key, described in found["features"].items()
    ]


def _no_tfds_metadata(out_dir: str, made: Manifest, durable: bool) -> list[str]:
    """Foreign records name no feature spec TFDS could decode them with: no TFDS metadata, and none left from before."""
    for name in (layout.DATASET_INFO, layout.FEATURES):
        location.remove(location.join(out_dir, name))
    return []
