"""Running a build end to end: ``build()`` and ``finalize()`` (public as ``shardkit.build``/``finalize``).

Inputs are read and checked, the config resolved, the plan made (or the stored one reused), OUT
locked, finished shards kept, the rest run on an executor, and the manifest published last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shardkit.errors import StateError, WriteError
from shardkit.output import layout
from shardkit.output.build_state import BuildState, create_state_once, difference, write_state
from shardkit.output.manifest import Manifest
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.build_result import BuildResult
from shardkit.pipeline.config import Config
from shardkit.pipeline.executors.local_executors import Executor, InlineExecutor, PoolExecutor, default_workers
from shardkit.pipeline.inputs.splits import SplitInput, fingerprint_of
from shardkit.pipeline.options import BuildOptions, check_call
from shardkit.pipeline.plan.planner import make_plan
from shardkit.pipeline.plan.tasks import BuildSettings, ShardTask, tasks_from_plan
from shardkit.pipeline.prepare import prepare
from shardkit.pipeline.state import duplicate_drop, manifest, preflight, resume, stopped
from shardkit.pipeline.state.bucket_lock import BucketLock, live_holders, stale_seconds
from shardkit.pipeline.state.lock import OutputLock
from shardkit.storage import atomic, location


def build(
    indexes: Sequence[str | Path] = (),
    out: str | Path = "",
    *,
    config: Config | str | Path | None = None,
    from_folder: str | Path | None = None,
    split: str | None = None,
    image_root: str | Path | None = None,
    ignore: Sequence[str] = (),
    records_per_shard: int | None = None,
    workers: int | None = None,
    seed: int = 0,
    format: str | Sequence[str] = "tfrecord",
    compression: str | None = None,
    on_error: str = "fail",
    overwrite: bool = False,
    fsync: bool = True,
    progress: bool | None = None,
    executor: Executor | None = None,
    num_nodes: int = 1,
    node_index: int = 0,
    index: bool = True,
    shuffle: bool = True,
    source_id: bool = True,
    allow_outside_root: bool = False,
    allow_schemes: Sequence[str] = (),
    duplicates: str | None = None,
    duplicate_threshold: int = 8,
) -> BuildResult:
    """Build shards from index files (or an ImageFolder tree) into ``out``.

    ``format`` names the shard container: ``"tfrecord"``, ``"arrayrecord"`` (random access for
    Grain; needs ``shardkit[arrayrecord]``), or several, ``"tfrecord,arrayrecord"``: one plan, each
    record encoded once and written to both, the first the primary. ``compression`` and ``index``
    are TFRecord's settings.

    Re-running the same call resumes: finished shards are kept, the rest are built. A different
    config or input raises ``StateError`` (an ``OutputError``) unless ``overwrite``. ``progress=None``
    shows a bar only when stderr is a terminal. ``fsync=False`` skips flushing shards to stable
    storage (a kill still leaves finished shards whole; a power cut may not): for scratch disks only.

    ``num_nodes``/``node_index`` build one node's share of the global plan into a shared OUT;
    the node that finds every shard committed writes the manifest (``manifest`` is None on the
    others), or ``finalize(out)`` does it afterwards. ``index`` writes ``NAME.idx`` beside each
    uncompressed shard (byte offset and length per record, as DALI and the ``tfrecord`` package use).

    ``shuffle`` orders each split's entries, and the records within each shard, by hashes of
    ``seed`` and each entry's identity (False keeps the inputs' order). ``source_id`` adds a
    string feature naming each record's input (``index-file:line``, or the path under the folder).
    ``image_root`` resolves the inputs' relative image paths instead of each input's own folder.

    Paths named inside annotation files and tables must resolve inside their dataset's root
    (``image_root`` where given), links followed: ``allow_outside_root`` lets them go anywhere.
    URLs are read for ``gs://`` and ``s3://`` alone, plus the schemes in ``allow_schemes``
    (``["http"]``). A refused path is a bad entry (``on_error``).

    ``duplicates="report"`` lists duplicate inputs and train/test leaks; ``"drop"`` leaves them out (docs/duplicates.md).

    The keywords are ``BuildOptions``' fields (a bad value is a ``UsageError``); ``build_with``
    takes them as one value.
    """
    options = BuildOptions(
        config=config, from_folder=from_folder, split=split, image_root=image_root, ignore=ignore,
        records_per_shard=records_per_shard, workers=workers, seed=seed, format=format, compression=compression, on_error=on_error,
        overwrite=overwrite, fsync=fsync, progress=progress, executor=executor, num_nodes=num_nodes, node_index=node_index,
        index=index, shuffle=shuffle, source_id=source_id, allow_outside_root=allow_outside_root, allow_schemes=allow_schemes,
        duplicates=duplicates, duplicate_threshold=duplicate_threshold,
    )  # fmt: skip
    return build_with(indexes, out, options)


def build_with(indexes: Sequence[str | Path], out: str | Path, options: BuildOptions) -> BuildResult:
    """``build``, its options made already (as the CLI makes them from its parameters)."""
    started = time.perf_counter()
    num_nodes, node_index = options.num_nodes, options.node_index
    reached = stopped.Progress(node=(node_index, num_nodes))
    with stopped.reporting(reached):
        check_call(indexes, out, options)
        workers = options.workers if options.workers is not None else default_workers()
        out_dir = location.absolute(str(out))
        preflight.check_out_folder(out_dir)
        reached.out_dir = out_dir

        check = getattr(options.executor, "check", None)  # a cluster executor: is it there at all?
        if callable(check):
            check()
        prepared = prepare(
            indexes, config=options.config, from_folder=options.from_folder, split=options.split, ignore=options.ignore,
            source_id=options.source_id, image_root=options.image_root, allow_outside_root=options.allow_outside_root,
        )  # fmt: skip
        splits, cfg, inputs = prepared.splits, prepared.config, prepared.inputs
        sources = [source for split in splits.values() for source in split.sources]
        preflight.check_out_spares_inputs(out_dir, indexes, sources, options.from_folder, [options.config, options.image_root])
        parameters = options.parameters()
        # The class lists are not in it: the inputs decide them, and resuming must not re-read every row.
        fingerprint = fingerprint_of(cfg.to_dict(), parameters.fingerprinted(), inputs)
        reached.fingerprint = fingerprint

        if not location.is_url(out_dir):
            with atomic.naming(out_dir):
                os.makedirs(out_dir, exist_ok=True)
        with contextlib.ExitStack() as held:
            bucket_lock = _lock(held, out_dir, num_nodes, node_index)
            # Runs before the lock is released, however the build ends: the executor's workers are gone by then.
            held.callback(stopped.remove_temps, out_dir, reached, num_nodes)
            if num_nodes == 1:
                shutil.rmtree(layout.scratch_dir(out_dir), ignore_errors=True)  # a killed build's half plan: ours alone
            state = resume.prepare_state(
                out_dir, fingerprint, cfg.to_dict(), parameters, inputs, options.overwrite, multi_node=num_nodes > 1
            )
            if not resume.has_plan(out_dir, state):
                state = _plan(out_dir, state, splits, cfg, options, workers)
            if num_nodes > 1 and state.nodes not in (None, num_nodes):
                raise StateError(
                    f"{out_dir}: this build's plan is shared by {state.nodes} nodes, not {num_nodes}: shares would overlap. "
                    f"Rerun with --num-nodes {state.nodes} and this node's original --node-index (array reruns of some tasks "
                    "change SLURM_ARRAY_TASK_COUNT, so pass them explicitly)"
                )
            cfg = cfg.with_classes(state.classes)
            settings = BuildSettings(
                out_dir, cfg, options.seed, parameters.containers(), options.on_error, fingerprint, options.fsync, options.shuffle,
                state.plan, options.allow_outside_root, tuple(options.allow_schemes), options.duplicates,
            )  # fmt: skip
            tasks = tasks_from_plan(state.splits, settings)
            if options.duplicates == "drop" and tasks:  # decided once, before any shard: a resume drops the same
                duplicate_drop.prepare(tasks, options.duplicate_threshold, workers, options.fsync)
            mine = tasks[node_index::num_nodes]  # a node's deterministic share of the one global plan
            reached.names = [t.name for t in mine]
            done = resume.finished_shards(out_dir, mine, fingerprint)
            pending = [t for t in mine if t.name not in done]
            splits_left = {t.split for t in pending}
            preflight.warn_if_short_of_space(out_dir, pending, {n: state.splits[n].bytes_per_entry for n in splits_left})
            executor = options.executor or (InlineExecutor() if workers == 1 else PoolExecutor(workers))
            fresh = _execute(executor, pending, mine, done, cfg, options.progress)
            missing: list[str] = []
            if bucket_lock is not None and bucket_lock.lost:
                raise StateError(
                    f"{out_dir}: another build took this build's lock over while it ran ({bucket_lock.lost}; its heartbeat was late "
                    f"by more than {stale_seconds():.0f} s); the shards it committed are kept, no manifest was written: rerun to finish"
                )
            if num_nodes == 1 and bucket_lock is None:
                finished = {r.name: r for r in [*done.values(), *fresh]}
            else:  # what is committed now, not what this run remembers: in a bucket, another build may have taken over
                finished, missing = resume.committed(out_dir, [t.name for t in tasks], fingerprint)
                if num_nodes == 1 and missing:
                    raise StateError(
                        f"{out_dir}: {len(missing)} shards this build committed are gone ({missing[0]}, ...); rerun to rebuild them"
                    )
            run = {
                "workers": workers,
                "on_error": options.on_error,
                "fsync": options.fsync,
                "ignore": list(options.ignore),
                "nodes": num_nodes,
            }
            if options.duplicates is not None:  # recorded where asked for, as below
                run.update(duplicates=options.duplicates, duplicate_threshold=options.duplicate_threshold)
            if options.allow_outside_root or options.allow_schemes:  # recorded where given: older manifests stay as they were
                run.update(allow_outside_root=options.allow_outside_root, allow_schemes=list(options.allow_schemes))
            made = None if missing else _publish_outputs(out_dir, state, list(finished.values()), run, options.fsync)
        return BuildResult(
            out_dir=out_dir,
            manifest=made,
            shards_built=len(fresh),
            shards_reused=len(done),
            records=made.totals.records if made else sum(r.records for r in finished.values()),
            records_built=sum(r.records for r in fresh),
            skipped=made.skipped if made else 0,
            seconds=time.perf_counter() - started,
            shards_missing=len(missing),
        )


def finalize(out: str | Path, fsync: bool = True) -> BuildResult:
    """Write the manifest of a build whose shards are all committed (e.g. after a multi-node build)."""
    started = time.perf_counter()
    out_dir = location.absolute(str(out))
    resume.load_state(out_dir)  # a folder with no build gets a clear error and no .shardkit/lock
    # In a bucket the nodes hold only their own locks; finalize reads committed records and writes the manifest.
    lock = contextlib.nullcontext() if location.is_url(out_dir) else OutputLock(layout.lock_path(out_dir), shared=True)
    with lock:
        state = resume.load_state(out_dir)
        names = resume.planned_names(state)
        finished, missing = resume.committed(out_dir, names, state.fingerprint)
        if missing:
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise StateError(
                f"{out_dir}: {len(missing)} of {len(names)} shards are not finished ({shown}); rerun the nodes that build them"
            )
        made = _publish_outputs(out_dir, state, list(finished.values()), {"finalized": True}, fsync)
    return BuildResult(out_dir, made, 0, len(finished), made.totals.records, 0, made.skipped, time.perf_counter() - started)


def _plan(out_dir: str, state: BuildState, splits: dict[str, SplitInput], cfg: Config, options: BuildOptions, processes: int) -> BuildState:
    """Plan into a scratch folder, publish it as ``.shardkit/plan-<fingerprint>``, then the state.

    Nodes of one build plan alike: the first folder renamed into place and the first state
    published are the plan, and a later node checks that its own fingerprint matches.
    """
    parameters = state.parameters
    layout.make_work_dir(out_dir)  # for a bucket: this user's staging folder
    scratch = layout.scratch_plan_dir(out_dir, uuid.uuid4().hex[:8])
    with atomic.naming(scratch):
        os.makedirs(scratch)
    try:
        with atomic.naming(layout.state_dir(out_dir)), progress_bar("planning", " entries", options.progress) as bar:
            plan = make_plan(
                splits,
                cfg,
                scratch,
                seed=parameters.seed,
                shuffle=parameters.shuffle,
                records_per_shard=parameters.records_per_shard,
                on_error=options.on_error,
                durable=options.fsync,
                processes=processes,
                progress=bar.update,
                stage_rows=not location.is_url(out_dir),
            )
        name = layout.plan_name(state.fingerprint)
        publish_plan(scratch, location.join(layout.state_dir(out_dir), name), options.fsync)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if options.num_nodes == 1:  # other nodes may be about to plan in it (a killed node's leftovers stay until the manifest)
            with contextlib.suppress(OSError):
                os.rmdir(layout.scratch_dir(out_dir))
    state = dataclasses.replace(
        state,
        plan=name,
        splits=plan.splits,
        skipped=tuple(plan.skipped),
        classes={s.key: tuple(s.classes or ()) for s in plan.config.features if s.kind.has_classes},
        config=plan.config.to_dict(),
        nodes=options.num_nodes if options.num_nodes > 1 else state.nodes,
    )
    return _publish_state(out_dir, state, options.num_nodes, options.fsync)


def _lock(held: contextlib.ExitStack, out_dir: str, num_nodes: int, node_index: int) -> BucketLock | None:
    """One build per OUT: ``flock`` on a disk (shared by the nodes of one build, each also holding
    its own node lock); in a bucket, lock objects (a build's, or each node's) with heartbeats."""
    state_dir = layout.state_dir(out_dir)
    if not location.is_url(out_dir):
        held.enter_context(OutputLock(layout.lock_path(out_dir), shared=num_nodes > 1))
        if num_nodes > 1:
            held.enter_context(OutputLock(layout.lock_path(out_dir, node_index)))
        return None
    lock = held.enter_context(BucketLock(layout.lock_path(out_dir, None if num_nodes == 1 else node_index), out_dir))
    # The two kinds never mix: a single build refuses while nodes of a multi-node build hold theirs, and the reverse.
    other_kind = [n for n in location.listdir(state_dir) if (layout.is_node_lock(n) if num_nodes == 1 else n == layout.lock_name())]
    holders = live_holders([location.join(state_dir, n) for n in other_kind])
    if holders:
        kind = "a single-machine build" if num_nodes > 1 else "a multi-node build's node"
        raise StateError(f"{out_dir}: {kind} is writing here ({holders[0]}); wait for it to finish, or choose another output folder")
    return lock


def publish_plan(scratch: str, folder: str, fsync: bool) -> None:
    """The planned files as ``.shardkit/plan-<fingerprint>``: the folder renamed into place, or each
    file uploaded unless one is there (a plan is the same bytes whoever makes it: the first stands)."""
    if location.is_url(folder):
        for name in sorted(os.listdir(scratch)):
            with atomic.naming(location.join(folder, name)):
                location.upload(os.path.join(scratch, name), location.join(folder, name), create=True)
        return
    if fsync:
        atomic.fsync_dir(scratch)  # its files are flushed: now their names in it
    try:
        os.rename(scratch, folder)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise WriteError.from_os_error(folder, exc) from None
        # another node, or a run killed before it wrote the state, published this same plan first
    if fsync:
        atomic.fsync_dir(os.path.dirname(folder))


def _publish_state(out_dir: str, state: BuildState, num_nodes: int, fsync: bool) -> BuildState:
    if num_nodes == 1:
        write_state(out_dir, state, fsync)
        return state
    if create_state_once(out_dir, state):
        return state
    published = resume.load_state(out_dir)  # another node was first: its plan is the plan
    if published.fingerprint != state.fingerprint:
        raise StateError(
            f"{out_dir}: another node started this build with {difference(published, state)}; nodes must share config and inputs"
        )
    return published


def _publish_outputs(out_dir: str, state: BuildState, shards: list[ShardResult], run: dict[str, Any], fsync: bool) -> Manifest:
    """errors.jsonl, the TFDS metadata and manifest.json from the state and every shard's record; then the nodes' scratch space goes."""
    made = manifest.publish(out_dir, state, shards, run, fsync)
    # Every shard is committed, so the plan was published before any node could build one: no node
    # plans now, and what nodes killed while planning left in the scratch space can go, as can the
    # table rows staged for the shards.
    shutil.rmtree(layout.scratch_dir(out_dir), ignore_errors=True)
    if not location.is_url(out_dir) and state.plan:
        for split in state.splits.values():
            shutil.rmtree(os.path.join(layout.state_dir(out_dir), state.plan, layout.staged_rows(split.file)), ignore_errors=True)
    return made


def progress_bar(what: str, unit: str, progress: bool | None, total: int | None = None, initial: int = 0) -> Any:
    """The one progress bar of a build step: on a terminal, or when asked for (``progress=True``)."""
    from tqdm import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    scale = total is None or unit == "B"  # bytes read as 192M/348M, 64.5MB/s
    return tqdm(desc=what, total=total, initial=initial, unit=unit, unit_scale=scale, disable=not show, dynamic_ncols=True, smoothing=0.1)


def _execute(
    executor: Executor,
    pending: Sequence[ShardTask],
    tasks: Sequence[ShardTask],
    done: dict[str, ShardResult],
    cfg: Config,
    progress: bool | None,
) -> list[ShardResult]:
    total = sum(t.entries.entries for t in tasks) * cfg.records_per_entry
    initial = sum(r.records for r in done.values())
    with progress_bar("building", "rec", progress, total, initial) as bar:
        shards_done = len(done)

        def on_progress(n: int) -> None:
            bar.update(n)

        def on_shard(result: ShardResult) -> None:
            nonlocal shards_done
            shards_done += 1
            bar.set_postfix_str(f"shards {shards_done}/{len(tasks)}", refresh=False)

        bar.set_postfix_str(f"shards {shards_done}/{len(tasks)}", refresh=False)
        results = executor.run(pending, on_progress, on_shard)
    return results
