"""Running a reshard end to end: ``reshard()`` (public as ``shardkit.reshard``).

The same structure as a build: inputs found and checked, OUT locked, the plan made (or the stored
one reused), finished shards kept, the rest run as shard tasks on the build's executors, each
committed as a build's shard is, and the manifest published last. A rerun of a killed reshard
keeps what was committed and writes the rest, byte for byte as an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from shardkit.errors import UsageError
from shardkit.output import layout
from shardkit.output.build_state import BuildState, write_state
from shardkit.output.manifest import Manifest
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.builder import progress_bar, publish_plan
from shardkit.pipeline.executors.local_executors import Executor, InlineExecutor, PoolExecutor, default_workers
from shardkit.pipeline.inputs.splits import fingerprint_of
from shardkit.pipeline.reshard import metadata
from shardkit.pipeline.reshard.options import ReshardOptions
from shardkit.pipeline.reshard.planner import make_plan
from shardkit.pipeline.reshard.sources import Found, find
from shardkit.pipeline.reshard.task import ReshardSettings, ReshardTask, reshard_tasks
from shardkit.pipeline.state import preflight, resume, stopped
from shardkit.pipeline.state.lock import OutputLock
from shardkit.storage import atomic, location, protected


@dataclasses.dataclass(frozen=True)
class ReshardResult:
    out_dir: str
    manifest: Manifest
    shards_written: int
    shards_reused: int
    records: int  # in the whole output
    records_written: int  # by this run
    skipped: int  # damaged records left out (on_error="skip")
    seconds: float

    @property
    def records_per_second(self) -> float:
        return self.records_written / self.seconds if self.seconds else 0.0


def reshard(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    split: str | None = None,
    shards: int | None = None,
    records_per_shard: int | None = None,
    shard_size: int | str | None = None,
    multiple_of: int = 1,
    seed: int = 0,
    shuffle: bool = True,
    format: str | Sequence[str] = "tfrecord",
    compression: str | None = None,
    index: bool = True,
    workers: int | None = None,
    on_error: str = "fail",
    overwrite: bool = False,
    fsync: bool = True,
    progress: bool | None = None,
    executor: Executor | None = None,
) -> ReshardResult:
    """Write the records of ``paths`` again into ``out``: balanced shards, globally shuffled.

    ``paths`` are a shardkit output, a TFDS prepared folder, or TFRecord and ArrayRecord files,
    folders and globs anyone wrote (local or ``gs://``/``s3://``); their splits come from their
    names, or ``split`` names one for all. One of ``shards``, ``records_per_shard`` or
    ``shard_size`` (``"256MB"``) sizes each split's shards (none: about 128 MB each), and
    ``multiple_of`` rounds the count up to a multiple of it. ``shuffle`` puts each split's records
    in a uniform permutation drawn from ``seed``, across all inputs; the counts of two shards of a
    split differ by at most one. ``format``/``compression``/``index`` are the build's.

    Every record is written once, its bytes unchanged. A damaged record stops the reshard before
    anything is written (``on_error="skip"`` leaves it out and lists it in ``errors.jsonl``).
    Re-running the same call resumes; a different one into the same ``out`` raises ``StateError``
    unless ``overwrite``. The inputs are never changed, and ``out`` may not be or lie inside one.
    """
    options = ReshardOptions(
        split=split, shards=shards, records_per_shard=records_per_shard, shard_size=shard_size, multiple_of=multiple_of,
        seed=seed, shuffle=shuffle, format=format, compression=compression, index=index, workers=workers,
        on_error=on_error, overwrite=overwrite, fsync=fsync, progress=progress, executor=executor,
    )  # fmt: skip
    return reshard_with(paths, out, options)


def reshard_with(paths: Sequence[str | Path], out: str | Path, options: ReshardOptions) -> ReshardResult:
    """``reshard``, its options made already (as the CLI makes them)."""
    started = time.perf_counter()
    reached = stopped.Progress()
    with stopped.reporting(reached):
        if not str(out):
            raise UsageError("an output folder is required (-o OUT)")
        if not paths:
            raise UsageError("give the shards to reshard: files, folders or globs, a shardkit output or a TFDS folder")
        out_dir = location.absolute(str(out))
        if location.is_url(out_dir):
            raise UsageError(f"{out_dir}: reshard writes to a local folder; reshard there, then copy the folder to the bucket")
        preflight.check_out_folder(out_dir)
        reached.out_dir = out_dir
        found = find([str(p) for p in paths], options.split)
        _check_out_spares_inputs(out_dir, found)
        workers = options.workers if options.workers is not None else default_workers()
        parameters = options.parameters()
        inputs = {"reshard": [f.to_dict() for f in found.files], "sizing": options.sizing(), "on_error": options.on_error}
        if found.tfds is not None:  # the files its TFDS metadata copies into OUT: the state's to remove with --overwrite
            inputs[layout.TFDS_EXTRAS_INPUT] = list(found.tfds.extra_files)
        config = metadata.carried_config(found)
        fingerprint = fingerprint_of(config, parameters.fingerprinted(), inputs)
        reached.fingerprint = fingerprint
        with atomic.naming(out_dir):
            os.makedirs(out_dir, exist_ok=True)
        with contextlib.ExitStack() as held:
            held.enter_context(OutputLock(layout.lock_path(out_dir)))
            held.callback(stopped.remove_temps, out_dir, reached, 1)
            shutil.rmtree(layout.scratch_dir(out_dir), ignore_errors=True)  # a killed run's half plan
            state = resume.prepare_state(out_dir, fingerprint, config, parameters, inputs, options.overwrite)
            if not _has_plan(out_dir, state):
                state = _plan(out_dir, state, found, options, workers)
            settings = ReshardSettings(out_dir, parameters.containers(), fingerprint, state.plan, options.fsync, metadata.label_keys(found))
            tasks = reshard_tasks(state.splits, settings)
            reached.names = [t.name for t in tasks]
            done = resume.finished_shards(out_dir, tasks, fingerprint)
            pending = [t for t in tasks if t.name not in done]
            executor = options.executor or (InlineExecutor() if workers == 1 else PoolExecutor(workers))
            fresh = _execute(executor, pending, tasks, done, options.progress)
            finished = [*done.values(), *fresh]
            run = {"workers": workers, "on_error": options.on_error, "fsync": options.fsync}
            made = metadata.publish(out_dir, state, finished, run, options.fsync, found)
            _remove_staged(out_dir, state)
        return ReshardResult(
            out_dir=out_dir,
            manifest=made,
            shards_written=len(fresh),
            shards_reused=len(done),
            records=made.totals.records,
            records_written=sum(r.records for r in fresh),
            skipped=len(state.skipped),
            seconds=time.perf_counter() - started,
        )


def _check_out_spares_inputs(out_dir: str, found: Found) -> None:
    """OUT is not an input, nor inside a folder given as one, nor the folder an input file is in
    (a folder beside the inputs, or under their folder, is fine: no PATH given reads it)."""
    files = [f.path for f in found.files]
    target = protected.real(out_dir)
    for folder in found.roots:
        if protected.inside(target, protected.real(folder)):
            raise UsageError(
                f"{out_dir}: is or lies inside {folder}, an input of reshard, which it never writes into; give -o a folder outside it"
            )
    inputs = protected.Inputs(files)
    listed = [(location.dirname(path), path) for path in files]
    protected.refuse_writing_into(out_dir, inputs, layout.is_written, command="reshard", listed=listed)


def _has_plan(out_dir: str, state: BuildState) -> bool:
    """Whether ``state``'s plan is whole: its tables, and the local copies of the inputs that were staged."""
    if not resume.has_plan(out_dir, state):
        return False
    folder = location.join(layout.state_dir(out_dir), state.plan)
    present = location.sizes(folder)
    return all(s["staged"] in present for plan in state.splits.values() for s in plan.sources if s.get("staged"))


def _remove_staged(out_dir: str, state: BuildState) -> None:
    """The local copies of inputs the plan staged: as large as those inputs, and of no use once every shard is written.
    (A rerun that finds a shard gone plans again.)"""
    folder = location.join(layout.state_dir(out_dir), state.plan)
    for plan in state.splits.values():
        for source in plan.sources:
            if source.get("staged"):
                atomic.remove_quietly(location.join(folder, source["staged"]))


def _plan(out_dir: str, state: BuildState, found: Found, options: ReshardOptions, workers: int) -> BuildState:
    """Index the inputs and plan into a scratch folder, publish it as ``.shardkit/plan-<fingerprint>``, then the state."""
    scratch = layout.scratch_plan_dir(out_dir, uuid.uuid4().hex[:8])
    with atomic.naming(scratch):
        os.makedirs(scratch)
    try:
        total = sum(f.bytes for f in found.files)
        with atomic.naming(layout.state_dir(out_dir)), progress_bar("indexing", "B", options.progress, total) as bar:
            splits, skipped = make_plan(found.files, options, scratch, workers, bar.update)
        name = layout.plan_name(state.fingerprint)
        publish_plan(scratch, location.join(layout.state_dir(out_dir), name), options.fsync)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(layout.scratch_dir(out_dir))
    state = dataclasses.replace(state, plan=name, splits=splits, skipped=tuple(skipped))
    write_state(out_dir, state, options.fsync)
    return state


def _execute(
    executor: Executor, pending: Sequence[ReshardTask], tasks: Sequence[ReshardTask], done: dict[str, ShardResult], progress: bool | None
) -> list[ShardResult]:
    total = sum(t.records for t in tasks)
    with progress_bar("resharding", "rec", progress, total, sum(r.records for r in done.values())) as bar:
        shards_done = len(done)

        def on_shard(result: ShardResult) -> None:
            nonlocal shards_done
            shards_done += 1
            bar.set_postfix_str(f"shards {shards_done}/{len(tasks)}", refresh=False)

        bar.set_postfix_str(f"shards {shards_done}/{len(tasks)}", refresh=False)
        return executor.run(pending, bar.update, on_shard)
