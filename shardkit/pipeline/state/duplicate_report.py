"""``--duplicates``: the search over every shard's rows once all are written, ``OUT/duplicates.jsonl``
(one group a line) and what the manifest and the build's summary say of it.

Rows come in build order (split by split, shard by shard, as each shard wrote its inputs); a group's
members are named by source id and split. Leaks are counted from the evaluation side: a val image
with a twin in train counts once under ``val`` against ``train`` (``duplicates.selection``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.duplicates.selection import leak_line, leaks, split_ranks
from shardkit.output import layout
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.shard.fingerprints import compared, group_entry, grouped, leak_counts
from shardkit.pipeline.state import duplicate_drop
from shardkit.storage import atomic, location
from shardkit.units import plural


def search(out_dir: str, plan_dir: str, shards: Sequence[ShardResult], run: Mapping[str, Any], durable: bool) -> dict[str, Any] | None:
    """The groups among ``shards``' rows, written to ``OUT/duplicates.jsonl``; the manifest's summary
    of them (None, and no file, for a build without ``--duplicates``). With ``drop`` the groups are
    those decided before the build (``duplicate_drop``), in the plan's folder ``plan_dir``."""
    path = location.join(out_dir, layout.DUPLICATES)
    mode = run.get("duplicates")
    if mode is None:
        location.remove(path)
        return None
    if mode == "drop":
        groups_found, summary = duplicate_drop.report(plan_dir, sum(int((s.duplicates or {}).get("dropped", 0)) for s in shards))
        atomic.write_atomic(path, "".join(json.dumps(g) + "\n" for g in groups_found).encode(), durable)
        summary.update(file=layout.DUPLICATES, line=f"{summary['line']}: {layout.DUPLICATES}")
        return summary
    threshold = int(run.get("duplicate_threshold", 8))
    ordered = sorted(shards, key=lambda s: (s.split, s.index))
    unsearched = [s.name for s in ordered if s.duplicates is None]
    groups, splits, pictures = grouped([(s.split, s.duplicates) for s in ordered if s.duplicates is not None], threshold)
    atomic.write_atomic(path, "".join(json.dumps(group_entry(g)) + "\n" for g in groups).encode(), durable)
    counted = leaks(groups, split_ranks(splits))
    line = leak_line(counted, "image" if pictures else "record")
    said_compared = compared(pictures, threshold)
    summary = {
        "mode": mode,
        "threshold": threshold,
        "compared": said_compared,
        "groups": len(groups),
        "records": sum(len(g.members) for g in groups),
        "across_splits": sum(1 for g in groups if len(g.splits) > 1),
        "leaks": leak_counts(counted),
        "file": layout.DUPLICATES,
        "unsearched_shards": len(unsearched),
    }
    within = summary["groups"] - summary["across_splits"]
    said = [line or "no split has a twin in another", f"{plural(within, 'group')} of duplicates within a split"]
    if unsearched:
        said.append(f"{plural(len(unsearched), 'shard')} written without --duplicates not searched ({unsearched[0]}, ...)")
    summary["line"] = f"duplicates ({said_compared}): " + "; ".join(said) + f": {layout.DUPLICATES}"
    return summary
