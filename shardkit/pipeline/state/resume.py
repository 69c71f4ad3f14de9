"""Resuming a build: what an output folder already holds, and whether it belongs to this build.

A build is identified by its fingerprint (config + record-affecting parameters + index file
contents). The state in ``.shardkit/build.json`` and one record per finished shard are what a
rerun trusts; anything else a build wrote is rebuilt or removed.
"""

from __future__ import annotations

import fnmatch
import glob
from collections.abc import Sequence
from typing import Any

from shardkit.errors import StateError
from shardkit.formats.idx_sidecar import INDEX_SUFFIX
from shardkit.pipeline.config import Config
from shardkit.pipeline.plan.tasks import ShardResult, ShardTask
from shardkit.pipeline.state import manifest
from shardkit.storage import atomic, layout, location
from shardkit.storage.layout import shard_name
from shardkit.version import __version__

STATE_VERSION = 2  # 2: the plan lives in files (.shardkit/plan-*), tasks carry byte ranges


def prepare_state(
    out_dir: str,
    fingerprint: str,
    cfg: Config,
    parameters: dict[str, Any],
    inputs: dict[str, Any],
    overwrite: bool,
    multi_node: bool = False,
) -> dict[str, Any]:
    """Load the existing build state (resume), or refuse/clear a different one, or start fresh."""
    state_path = location.join(layout.state_dir(out_dir), "build.json")
    fresh = {
        "version": STATE_VERSION,
        "shardkit_version": __version__,
        "fingerprint": fingerprint,
        "parameters": parameters,
        "inputs": inputs,
        "config": cfg.to_dict(),
    }

    def same_build(state: dict[str, Any]) -> bool:
        return state.get("fingerprint") == fingerprint and state.get("version") == STATE_VERSION

    old = _read_state(state_path)
    if old is not None and same_build(old):
        return old
    leftovers = owned_files(out_dir)
    if old is None and leftovers:
        old = _read_state(state_path)  # another node of this build may have published its plan a moment ago
        if old is not None and same_build(old):
            return old
    if (old is not None or leftovers) and not overwrite:
        what = difference(old, fresh) if old is not None else "it holds shards or a manifest from an unknown build"
        # --overwrite is refused with --num-nodes: one node must not delete what the others build.
        remedy = "nodes of one build must share config, inputs and options; clear OUT" if multi_node else "use --overwrite"
        raise StateError(f"{out_dir}: already holds a different build ({what}); {remedy} to replace it, or use another output folder")
    for path in leftovers:
        location.remove(path)
    # Plans of other builds: a different build's, or one published by a run killed before its state.
    for path in location.glob(location.join(glob.escape(layout.state_dir(out_dir)), "plan-*")):
        if path.rstrip("/").rsplit("/", 1)[-1] != plan_name(fingerprint):
            location.remove_tree(path)
    return fresh


def plan_name(fingerprint: str) -> str:
    """The folder under ``.shardkit`` that holds the plan of the build with ``fingerprint``."""
    return f"plan-{fingerprint[:16]}"


def has_plan(out_dir: str, state: dict[str, Any]) -> bool:
    """Whether ``state`` holds a plan whose files are all in place (a published plan folder is whole)."""
    if "splits" not in state or "plan" not in state:
        return False
    present = location.sizes(location.join(layout.state_dir(out_dir), state["plan"]))
    return all(plan["file"] in present for plan in state["splits"].values())


def _read_state(path: str) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = atomic.read_json(path)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    changed = [key for key in ("config", "inputs", "parameters") if old.get(key) != new.get(key)]
    return "different " + " and ".join(changed) if changed else "a different shardkit state version"


def owned_files(out_dir: str) -> list[str]:
    """Files in OUT that a shardkit build writes (and --overwrite may delete); nothing else. Plan
    folders are not among them: alone, one says no more than that planning finished."""
    patterns = [
        "*-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].tfrecord*",  # .idx too
        layout.MANIFEST,
        layout.ERRORS,
        "dataset_info.json",
        "features.json",
        "*.labels.txt",
    ]
    names = location.listdir(out_dir)
    # Hidden names (temp files) are not a build's, as glob(*) skips them too.
    found = [location.join(out_dir, n) for n in names if n[0] != "." and any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    state = layout.state_dir(out_dir)
    shards = location.join(state, "shards")
    found += [location.join(shards, n) for n in location.listdir(shards) if n.endswith(".json") and n[0] != "."]
    found += [location.join(state, n) for n in location.listdir(state) if n == "build.json"]
    return sorted(set(found))


def finished_shards(out_dir: str, tasks: Sequence[ShardTask], fingerprint: str) -> dict[str, ShardResult]:
    """Shards of ``tasks`` whose record matches this build and whose file has the recorded size;
    the files of the others (a shard without its record, a stale record) are removed."""
    present = location.sizes(out_dir)  # one listing of OUT, for the check and the clean-up: a bucket pages through it
    done, missing = _sorted_out(out_dir, [t.name for t in tasks], fingerprint, present)
    if not missing:
        return done
    recorded = set(location.listdir(location.join(layout.state_dir(out_dir), "shards")))
    for name in missing:
        for stale in (name, name + INDEX_SUFFIX):
            if stale in present:
                location.remove(location.join(out_dir, stale))
        if f"{name}.json" in recorded:
            location.remove(layout.shard_record_path(out_dir, name))
    return done


def load_state(out_dir: str) -> dict[str, Any]:
    path = location.join(layout.state_dir(out_dir), "build.json")
    try:
        state: dict[str, Any] = atomic.read_json(path)
    except (OSError, ValueError) as exc:
        raise StateError(f"{out_dir}: no readable shardkit build state ({path}: {exc})") from None
    return state


def planned_names(state: dict[str, Any]) -> list[str]:
    """Every shard the build's plan has, from its state alone."""
    compression = state["parameters"]["compression"]
    return [
        shard_name(split, i, plan["num_shards"], compression) for split, plan in state["splits"].items() for i in range(plan["num_shards"])
    ]


def committed(out_dir: str, names: Sequence[str], fingerprint: str) -> tuple[dict[str, ShardResult], list[str]]:
    """(finished shards, names not finished yet) among ``names``; reads records, deletes nothing."""
    return _sorted_out(out_dir, names, fingerprint, location.sizes(out_dir))


def _sorted_out(out_dir: str, names: Sequence[str], fingerprint: str, present: dict[str, int]) -> tuple[dict[str, ShardResult], list[str]]:
    """``committed``, given OUT's listing (name -> bytes)."""
    records = manifest.load_shard_records(out_dir)
    done: dict[str, ShardResult] = {}
    missing = []
    for name in names:
        record = records.get(name)
        index_ok = record is None or record.index_file is None or record.index_file in present
        if record is not None and record.fingerprint == fingerprint and present.get(name) == record.bytes and index_ok:
            done[name] = record
        else:
            missing.append(name)
    return done, missing
