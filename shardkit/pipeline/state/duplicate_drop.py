"""``--duplicates drop``: before any shard is written, every input's picture is decoded and hashed
(or, without pictures, its record made) on a local pool, the groups found, and which inputs go
decided once: the training side loses every twin of an evaluation input (train to val and test,
val to test), and a split keeps the first input of each group within it. The decision is kept in
the plan's folder (``drops.json``), so a resumed build drops the same inputs; the workers leave
those inputs out, and ``OUT/duplicates.jsonl`` lists each group with what was dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from shardkit.duplicates.selection import drops, leak_line, leaks, split_ranks
from shardkit.formats.image_headers import ImageProblem
from shardkit.interrupts import pool_map
from shardkit.pipeline.plan.plan_file import read_entries
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.shard.fingerprints import DROPS, Fingerprints, compared, drops_path, group_entry, grouped, leak_counts
from shardkit.pipeline.shard.records import RecordMaker, _Loaded
from shardkit.storage import atomic, location


def prepare(tasks: Sequence[ShardTask], threshold: int, workers: int, durable: bool) -> str:
    """The plan's ``drops.json``, made once: its path."""
    path = drops_path(tasks[0])
    if location.exists(path):
        return path
    parts = pool_map(_rows, list(tasks), workers)
    groups, splits, pictures = grouped([(task.split, part) for task, part in zip(tasks, parts, strict=True)], threshold)
    ranks = split_ranks(splits)
    dropped = {
        d.member.source_id: {"split": d.member.split, "kept": d.kept.source_id, "kept_split": d.kept.split} for d in drops(groups, ranks)
    }
    counted = leaks(groups, ranks)
    noun = "image" if pictures else "record"
    decided = {
        "threshold": threshold,
        "compared": compared(pictures, threshold),
        "groups": [group_entry(g, dropped) for g in groups],
        "dropped": dropped,
        "leaks": leak_counts(counted),
        "leak_line": leak_line(counted, noun),
        "noun": noun,
    }
    atomic.write_atomic(path, json.dumps(decided).encode(), durable)
    return path


def _rows(task: ShardTask) -> dict[str, Any]:
    """Each input of ``task``'s shard: its identity, hash and digest (an input that cannot be read
    has none: the build says why when it reaches it)."""
    settings = task.settings
    maker = RecordMaker(settings.config, settings.seed, settings.read_rule(task.sources))
    rows = Fingerprints(settings.config)
    picture = rows.picture
    for entry in maker.prefetching(read_entries(settings.plan_dir, task.entries, task.sources, settings.config)):
        try:
            loaded = _Loaded(entry, maker.file_specs, maker.lead, maker.fetcher, None)
            if picture is None:
                rows.add(entry.identity, None, maker.original(loaded))
            else:
                rows.add(entry.identity, loaded.array(picture), loaded.files[picture.key])
        except ImageProblem:
            continue
    return rows.to_data()


def report(plan_dir: str, shards_dropped: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``drops.json`` as ``OUT/duplicates.jsonl``'s groups and the manifest's summary."""
    decided = json.loads(location.read_bytes(location.join(plan_dir, DROPS)))
    by_split: dict[str, int] = {}
    for info in decided["dropped"].values():
        by_split[info["split"]] = by_split.get(info["split"], 0) + 1
    summary = {
        "mode": "drop",
        "threshold": decided["threshold"],
        "compared": decided["compared"],
        "groups": len(decided["groups"]),
        "records": sum(len(g["members"]) for g in decided["groups"]),
        "across_splits": sum(1 for g in decided["groups"] if len(g["splits"]) > 1),
        "leaks": decided["leaks"],
        "dropped": dict(sorted(by_split.items())),
        "dropped_written": shards_dropped,
    }
    noun = decided.get("noun", "image")
    gone = ", ".join(f"{n} {split} {noun if n == 1 else noun + 's'}" for split, n in sorted(by_split.items())) or "nothing"
    summary["line"] = f"duplicates ({decided['compared']}): {decided['leak_line'] or 'no split has a twin in another'}; dropped {gone}"
    return decided["groups"], summary
