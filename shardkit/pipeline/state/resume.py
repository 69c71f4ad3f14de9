"""Resuming a build: what an output folder already holds, and whether it belongs to this build.

The state in ``.shardkit/build.json`` (``output.build_state``) and one record per finished shard
(``output.shard_record``) are what a rerun trusts; anything else a build wrote is rebuilt or
removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from shardkit.errors import StateError
from shardkit.output import layout
from shardkit.output.build_state import STATE_VERSION, BuildParameters, BuildState, difference, read_state
from shardkit.output.shard_record import ShardResult, load_shard_records
from shardkit.storage import location
from shardkit.version import __version__


def prepare_state(
    out_dir: str,
    fingerprint: str,
    config: Mapping[str, Any],
    parameters: BuildParameters,
    inputs: dict[str, Any],
    overwrite: bool,
    multi_node: bool = False,
) -> BuildState:
    """Load the existing build state (resume), or refuse/clear a different one, or start fresh."""
    fresh = BuildState(STATE_VERSION, __version__, fingerprint, parameters, inputs, config)

    def same_build(state: BuildState) -> bool:
        return state.fingerprint == fingerprint and state.version == STATE_VERSION

    old = _read_state(out_dir)
    if old is not None and same_build(old):
        return old
    leftovers = owned_files(out_dir, old)
    if old is None and leftovers:
        old = _read_state(out_dir)  # another node of this build may have published its plan a moment ago
        if old is not None and same_build(old):
            return old
        leftovers = owned_files(out_dir, old)
    if old is None and leftovers:
        # Named as a build names its outputs, but no build says it wrote them: they may be anyone's.
        raise StateError(
            f"{out_dir}: holds {leftovers[0].rsplit('/', 1)[-1]}{' and more files' if len(leftovers) > 1 else ''} named as a "
            f"build names its outputs, but no build state ({layout.STATE_DIR}/{layout.BUILD_STATE}): nothing shows a build wrote "
            "them, so no build replaces them, --overwrite or not; move them, or use another output folder"
        )
    if old is not None and not overwrite:
        what = difference(old, fresh)
        # --overwrite is refused with --num-nodes: one node must not delete what the others build.
        remedy = "nodes of one build must share config, inputs and options; clear OUT" if multi_node else "use --overwrite"
        raise StateError(f"{out_dir}: already holds a different build ({what}); {remedy} to replace it, or use another output folder")
    for path in leftovers:
        location.remove(path)
    # Plans of other builds: a different build's, or one published by a run killed before its state.
    for path in layout.plan_folders(out_dir):
        if path.rstrip("/").rsplit("/", 1)[-1] != layout.plan_name(fingerprint):
            location.remove_tree(path)
    return fresh


def has_plan(out_dir: str, state: BuildState) -> bool:
    """Whether ``state`` holds a plan whose files are all in place (a published plan folder is whole)."""
    if not state.planned:
        return False
    present = location.sizes(location.join(layout.state_dir(out_dir), state.plan))
    return all(plan.file in present for plan in state.splits.values())


def _read_state(out_dir: str) -> BuildState | None:
    try:
        return read_state(out_dir)
    except (OSError, ValueError):
        return None


def owned_files(out_dir: str, state: BuildState | None) -> list[str]:
    """Files in OUT that a shardkit build writes (and --overwrite may delete); nothing else. With
    the build ``state`` OUT holds, at its top only the names that build writes: its shards and
    their ``.idx``, the metadata, its features' class lists. Plan folders are not among them:
    alone, one says no more than that planning finished."""
    names = None if state is None else _written_names(state)
    found = [location.join(out_dir, n) for n in location.listdir(out_dir) if layout.is_built_name(n) and (names is None or n in names)]
    records = layout.shard_records_dir(out_dir)
    found += [location.join(records, n) for n in location.listdir(records) if layout.is_shard_record_name(n)]
    folder = layout.state_dir(out_dir)
    found += [location.join(folder, n) for n in location.listdir(folder) if n == layout.BUILD_STATE]
    return sorted(set(found))


def _written_names(state: BuildState) -> set[str]:
    """The names at OUT's top a build with ``state`` writes."""
    names: set[str] = set()
    for container in state.parameters.containers():
        for split, plan in state.splits.items():
            shards = [container.shard_name(split, i, plan.num_shards) for i in range(plan.num_shards)]
            names.update(shards, (sidecar for shard in shards for sidecar in container.owned_sidecars(shard)))
    keys = (state.config.get("features") or {}).keys()
    return {*names, *layout.METADATA_NAMES, *map(layout.labels_name, keys)}


class Planned(Protocol):
    """A shard the plan holds (a build's task, a reshard's): its name, and the files it is in OUT."""

    @property
    def name(self) -> str: ...
    def file_names(self) -> list[str]: ...


def finished_shards(out_dir: str, tasks: Sequence[Planned], fingerprint: str) -> dict[str, ShardResult]:
    """Shards of ``tasks`` whose record matches this build and whose file has the recorded size;
    the files of the others (a shard without its record, a stale record) are removed."""
    present = location.sizes(out_dir)  # one listing of OUT, for the check and the clean-up: a bucket pages through it
    done, missing = _sorted_out(out_dir, [t.name for t in tasks], fingerprint, present)
    if not missing:
        return done
    recorded = set(location.listdir(layout.shard_records_dir(out_dir)))
    files = {task.name: task.file_names() for task in tasks}
    for name in missing:
        for stale in files[name]:
            if stale in present:
                location.remove(location.join(out_dir, stale))
        if layout.shard_record_name(name) in recorded:
            location.remove(layout.shard_record_path(out_dir, name))
    return done


def load_state(out_dir: str) -> BuildState:
    try:
        return read_state(out_dir)
    except (OSError, ValueError) as exc:
        raise StateError(f"{out_dir}: no readable shardkit build state ({layout.build_state_path(out_dir)}: {exc})") from None


def planned_names(state: BuildState) -> list[str]:
    """Every shard the build's plan has (its name in the primary container), from its state alone."""
    primary = state.parameters.containers()[0]
    return [primary.shard_name(split, i, plan.num_shards) for split, plan in state.splits.items() for i in range(plan.num_shards)]


def committed(out_dir: str, names: Sequence[str], fingerprint: str) -> tuple[dict[str, ShardResult], list[str]]:
    """(finished shards, names not finished yet) among ``names``; reads records, deletes nothing."""
    return _sorted_out(out_dir, names, fingerprint, location.sizes(out_dir))


def _sorted_out(out_dir: str, names: Sequence[str], fingerprint: str, present: dict[str, int]) -> tuple[dict[str, ShardResult], list[str]]:
    """``committed``, given OUT's listing (name -> bytes)."""
    records = load_shard_records(out_dir)
    done: dict[str, ShardResult] = {}
    missing = []
    for name in names:
        record = records.get(name)
        whole = record is not None and all(
            file in present if size is None else present.get(file) == size for file, size in record.files().items()
        )
        if record is not None and record.fingerprint == fingerprint and whole:
            done[name] = record
        else:
            missing.append(name)
    return done, missing
