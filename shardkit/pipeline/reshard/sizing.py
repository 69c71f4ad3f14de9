"""How many shards a split gets, and which of its records each holds: plain arithmetic, no files.

One of ``--shards``, ``--records-per-shard`` or ``--shard-size`` decides the count (none: shards
of about 128 MB, as a build sizes them); ``--multiple-of H`` rounds it up to a multiple of H,
never under H. The records are cut into that many runs whose lengths differ by at most one.
"""

from __future__ import annotations

import math

from shardkit.pipeline.plan.arithmetic import default_entries_per_shard

FRAMING = 16  # bytes a TFRecord frame adds to each payload: what --shard-size counts besides the records


def shard_count(
    records: int,
    payload_bytes: int,
    *,
    shards: int | None = None,
    records_per_shard: int | None = None,
    shard_size: int | None = None,
    multiple_of: int = 1,
) -> int:
    """The number of shards of a split of ``records`` records holding ``payload_bytes`` bytes."""
    if shards is not None:
        count = shards
    elif records_per_shard is not None:
        count = math.ceil(records / records_per_shard)
    elif shard_size is not None:
        count = math.ceil((payload_bytes + FRAMING * records) / shard_size)
    else:
        count = math.ceil(records / default_entries_per_shard(records, (payload_bytes + FRAMING * records) / max(records, 1)))
    count = max(count, 1)
    return max(multiple_of, math.ceil(count / multiple_of) * multiple_of)


def balanced(records: int, shards: int) -> list[tuple[int, int]]:
    """(first, end) of each shard's run of ``records`` records: the first ``records % shards`` hold one more."""
    size, extra = divmod(records, shards)
    bounds, start = [], 0
    for i in range(shards):
        end = start + size + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds
