"""Run shard tasks inline or on a multiprocessing pool; the same results either way.

The pool path is ``Pool.starmap_async`` with one task per shard, so a free worker takes the next
shard and no file ever has two writers. Workers send progress ticks over a queue; the parent
drains it, watches for dead workers, and never hangs on one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue as queue_module
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from shardkit.errors import WorkerError
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.executors import dead_worker, worker_settings
from shardkit.pipeline.executors.shard_jobs import Job, augments, run_task, write
from shardkit.pipeline.shard.shard_files import WrittenShard
from shardkit.storage import location

OnProgress = Callable[[int], None]
OnShard = Callable[[ShardResult], None]


class Executor(Protocol):
    def run(self, tasks: Sequence[Job], on_progress: OnProgress, on_shard: OnShard) -> list[ShardResult]: ...


class InlineExecutor:
    """Runs every task in this process: the identical worker code, easy to debug (``--workers 1``)."""

    def run(self, tasks: Sequence[Job], on_progress: OnProgress, on_shard: OnShard) -> list[ShardResult]:
        results = []
        with worker_settings.shard_work(_augments(tasks)):
            for task in tasks:
                result = run_task(task, on_progress)
                on_shard(result)
                results.append(result)
        return results


def _augments(tasks: Sequence[Job]) -> bool:
    """Only augmentation runs native thread pools; a pass-through build skips importing them."""
    return bool(tasks) and augments(tasks[0])


# Set in each pool worker by _init_worker: the queue progress ticks go to; the shared array in
# which each worker, in its own slot, says which task it runs (pid, task number), written before
# the task starts so that it is there when a crash in native code ends the process unannounced.
_progress_queue: Any = None
_running: Any = None
_slot = 0


def _init_worker(progress_queue: Any, augment: bool, running: Any, slots: Any) -> None:
    global _progress_queue, _running, _slot
    _progress_queue = progress_queue
    _running = running
    with slots.get_lock():
        _slot = slots.value % (len(running) // 2)
        slots.value += 1
    worker_settings.apply(augment)  # for the life of this pool process: nothing to undo


def _tick(n: int) -> None:
    _progress_queue.put(("tick", n))


# A build into a bucket uploads each shard while its worker encodes the next, and one onto a disk
# flushes it (fsync) while its worker encodes the next; False waits for each commit instead, only to
# measure what the overlap gains (scripts/bench_bucket.py --link-mbps).
OVERLAP_UPLOADS = True


def _overlaps_commits(task: Job) -> bool:
    """Whether a worker commits each shard (an upload, or a flush to stable storage) while it writes the next."""
    return OVERLAP_UPLOADS and (location.is_url(task.settings.out_dir) or task.settings.fsync)


def _run_in_pool(number: int, task: Job) -> ShardResult:
    _running[2 * _slot], _running[2 * _slot + 1] = os.getpid(), number
    if not _overlaps_commits(task):
        result = run_task(task, _tick)
        _progress_queue.put(("shard", result))
        return result
    # The commit of this shard (its upload, or its flush to disk) overlaps with writing the next.
    # At most one commit is behind the writing; the parent counts a shard finished when its
    # "shard" message comes.
    global _uploading
    written = write(task, _tick, sync=False)
    if _uploading is not None:
        _uploading.result()
    _uploading = _uploader().submit(_commit_and_report, written)
    return written.result


_uploading: Future[None] | None = None
_upload_thread: ThreadPoolExecutor | None = None


def _uploader() -> ThreadPoolExecutor:
    global _upload_thread
    if _upload_thread is None:
        _upload_thread = ThreadPoolExecutor(1, thread_name_prefix="shardkit-upload")
    return _upload_thread


def _commit_and_report(written: WrittenShard) -> None:
    try:
        written.commit()
    except BaseException as exc:  # reported to the parent, which stops the build with it
        written.discard()
        try:
            pickle.dumps(exc)
        except Exception:  # the queue would drop what it cannot pickle, and the parent wait for ever
            exc = WorkerError(f"committing {written.task.name} failed: {type(exc).__name__}: {exc}")
        _progress_queue.put(("failed", exc))
    else:
        _progress_queue.put(("shard", written.result))


class PoolExecutor:
    """A ``multiprocessing.Pool`` of ``workers`` processes (start method: the platform default)."""

    def __init__(self, workers: int, start_method: str | None = None, poll_seconds: float = 0.1) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.context = mp.get_context(start_method)
        self.poll_seconds = poll_seconds

    def run(self, tasks: Sequence[Job], on_progress: OnProgress, on_shard: OnShard) -> list[ShardResult]:
        if not tasks:
            return []
        progress_queue = self.context.Queue()
        with worker_settings.fork_safe(self.context.get_start_method()):  # for as long as the pool may fork
            return self._run(tasks, progress_queue, on_progress, on_shard)

    def _run(self, tasks: Sequence[Job], progress_queue: Any, on_progress: OnProgress, on_shard: OnShard) -> list[ShardResult]:
        processes = min(self.workers, len(tasks))
        running = self.context.Array("q", 4 * processes, lock=False)  # (pid, task) a slot: room for replacements
        slots = self.context.Value("i", 0)
        pool = quiet_pool(self.context, processes, _init_worker, (progress_queue, _augments(tasks), running, slots))
        try:
            pending = pool.starmap_async(_run_in_pool, list(enumerate(tasks)), chunksize=1)
            workers = _worker_processes(pool)
            reported = 0
            while not pending.ready():
                reported += self._drain(progress_queue, on_progress, on_shard, self.poll_seconds)
                dead = set(workers) - _worker_pids(pool)
                if dead and not pending.ready():
                    pid = min(dead)
                    held = [running[i + 1] for i in range(0, len(running), 2) if running[i] == pid]
                    raise WorkerError(dead_worker.message(pid, workers[pid], tasks[held[0]] if held else None))
            results: list[ShardResult] = pending.get()  # re-raises the first worker exception
            uploading = _overlaps_commits(tasks[0])  # commits may still be running: wait for each
            while reported < len(results):  # the last ticks and shard messages may still be in flight
                arrived = self._drain(progress_queue, on_progress, on_shard, 1.0)
                reported += arrived
                if not arrived and not uploading:
                    break
                if uploading and set(workers) - _worker_pids(pool):
                    raise WorkerError(
                        "a build worker process died while committing a shard. Finished shards are kept: rerun the same command to resume"
                    )
            return results
        finally:
            stop_pool(pool)
            progress_queue.close()
            progress_queue.join_thread()

    @staticmethod
    def _drain(progress_queue: Any, on_progress: OnProgress, on_shard: OnShard, wait: float) -> int:
        """Handle queued messages (waiting up to ``wait`` for the first); returns how many shards finished."""
        shards = 0
        try:
            message = progress_queue.get(timeout=wait) if wait else progress_queue.get_nowait()
            while True:
                kind, value = message
                if kind == "tick":
                    on_progress(value)
                elif kind == "failed":
                    raise value
                else:
                    on_shard(value)
                    shards += 1
                message = progress_queue.get_nowait()
        except queue_module.Empty:
            return shards


def _worker_processes(pool: Any) -> dict[int, Any]:
    """The pool's processes by pid: kept, to read a dead one's exit status once the pool has dropped it."""
    return {p.pid: p for p in getattr(pool, "_pool", None) or [] if p.pid is not None}


def _worker_pids(pool: Any) -> set[int]:
    # Pool silently replaces a worker that dies, and the task it held is never retried or failed:
    # watching the worker set (a private attribute, checked defensively) is how we notice.
    processes = getattr(pool, "_pool", None) or []
    return {p.pid for p in processes if p.pid is not None}


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
