"""Record bytes by (shard, position): the one seam between ``ShardReader`` and the shard containers.

A split's shards are read by the first of its containers (``--format``) that reads them at
random: TFRecord through its ``.idx`` files, ArrayRecord through its own index. A split of both
whose TFRecord shards have no ``.idx`` (``--no-index``, or lost) is read from the ArrayRecord twins.
"""

from __future__ import annotations

from shardkit.errors import ShardkitError
from shardkit.formats.containers import registry
from shardkit.formats.containers.adapter import RecordReader, StoredShard
from shardkit.output.manifest import SplitEntry
from shardkit.storage import location


def open_shards(out: str, split: SplitEntry) -> RecordReader:
    """The records of a split's shards, by the first container that can read them at random."""
    refusals: list[ShardkitError] = []
    for format in split.formats:
        stored = []
        for shard in split.shards:
            file = shard.file(format)
            stored.append(
                StoredShard(location.join(out, file.name), shard.records, file.bytes, file.index and location.join(out, file.index))
            )
        try:
            return registry.named(format).open_records(out, stored)
        except ShardkitError as exc:
            refusals.append(exc)
    raise refusals[0]
