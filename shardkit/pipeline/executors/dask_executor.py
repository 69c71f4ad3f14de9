"""Run shard tasks on a Dask cluster (``pip install 'shardkit[dask]'``): one Dask task per shard.

Any deployment works (``dask scheduler`` + ``dask worker`` by hand, dask-jobqueue, Kubernetes).
The parent keeps the progress bar (per record, through Dask's event topics), collects the
per-shard results and writes the manifest. Dask cannot stop a running task, so a failed build
cancels the rest, tells every worker that this run's tasks are to stop (a running one ends at its
next record, one not begun yet ends as it begins), and returns only once no worker holds any of
its tasks: nothing of it writes into OUT after that.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from shardkit.errors import WorkerError
from shardkit.output.shard_record import ShardResult
from shardkit.pipeline.executors import worker_settings
from shardkit.pipeline.executors.local_executors import OnProgress, OnShard
from shardkit.pipeline.executors.shard_jobs import Job, augments, run_task, weight
from shardkit.version import __version__

# Keys of the shardkit tasks executing in this Dask worker process (its threads), so that a
# failed build can wait for them: Dask cannot stop a task that already runs.
_dask_running: set[str] = set()
# Runs (one per build call: its progress topic) whose build failed: their tasks stop at the next
# record, or as they begin. A few bytes per failed build, for the life of the worker process.
_dask_stopped: set[str] = set()
_dask_running_lock = threading.Lock()


def _run_on_dask(task: Job, key: str, topic: str, profile: bool) -> ShardResult:
    from distributed import get_worker

    worker = get_worker()

    def tick(n: int) -> None:  # Dask's event log carries it to the client that subscribed
        worker.log_event(topic, [key, n])

    def stop() -> None:  # a set lookup, between records
        if topic in _dask_stopped:
            raise WorkerError(f"{task.name}: stopped, the build it belongs to failed")

    with _dask_running_lock:
        stop()  # begun after its build failed: nothing written
        _dask_running.add(key)
    try:
        with _dask_shard_work(worker, augments(task), profile):
            return run_task(task, tick, tick_every=1.0, stop=stop)
    finally:
        with _dask_running_lock:
            _dask_running.discard(key)


def _dask_shard_work(worker: Any, augment: bool, profile: bool) -> contextlib.AbstractContextManager[None]:
    # A Dask worker is a long-lived process that runs other work between and beside our tasks
    # (in threads): settings last while shardkit tasks run, then go back to what they were.
    return worker_settings.shard_work(augment, () if profile else (lambda: _pause_profiler(worker),))


def _pause_profiler(worker: Any) -> Callable[[], None]:
    """Stop the Dask worker's sampling profiler; returns the undo, which restarts it if it ran.

    Every 10 ms (``distributed.worker.profile.interval``) the worker's event loop walks the stack
    of each running task under the GIL: one worker process built augmented 640x480 images 2-17 %
    faster with it off (four interleaved pairs on 2 cores). The callback belongs to the event loop's thread,
    so both steps run there, in order: whether it ran is read when it is stopped, not before.
    """
    callback = getattr(worker, "periodic_callbacks", {}).get("profile")
    if callback is None:  # started with distributed.worker.profile.enabled: false
        return lambda: None
    was_running = False

    def stop() -> None:
        nonlocal was_running
        was_running = callback.is_running()
        callback.stop()

    def start() -> None:
        if was_running:
            callback.start()

    worker.loop.add_callback(stop)
    return lambda: worker.loop.add_callback(start)


def _stop_run(topic: str, keys: Sequence[str], dask_worker: Any = None) -> list[str]:
    """On a Dask worker: stop run ``topic``'s tasks; the keys of ``keys`` it still holds, in any
    state (a task taken but not begun yet, one running, or cancelled and running on)."""
    with _dask_running_lock:
        _dask_stopped.add(topic)
        running = {k for k in keys if k in _dask_running}
    state = getattr(dask_worker, "state", None)
    held = getattr(state, "tasks", {})  # read on the worker's event loop, which owns it
    return sorted(running | {k for k in keys if k in held})


class DaskExecutor:
    """Submits each shard task to a Dask cluster (``pip install shardkit[dask]``).

    Any deployment works: ``dask scheduler`` + ``dask worker`` by hand, dask-jobqueue on
    SLURM/PBS, Kubernetes. Inputs and OUT must be on a filesystem every worker sees. A worker
    that dies costs only its shard: Dask reruns the task elsewhere, and the atomic commit keeps
    the half-written file invisible. Progress comes per record, through Dask's event topics.
    While shardkit tasks run in a worker its sampling profiler is paused, unless ``profile``.
    """

    def __init__(self, address: str, connect_timeout: float = 30, stop_timeout: float = 600, profile: bool = False) -> None:
        self.address = address
        self.connect_timeout = connect_timeout
        self.stop_timeout = stop_timeout
        self.profile = profile

    def _connect(self) -> Any:
        try:
            from distributed import Client
        except ImportError:
            raise WorkerError("--executor dask needs the dask extra: pip install 'shardkit[dask]'") from None
        _quiet_sync_cancel()
        try:
            return Client(self.address, timeout=self.connect_timeout)  # type: ignore[no-untyped-call]
        except (OSError, ValueError, TimeoutError) as exc:
            raise WorkerError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None

    def check(self) -> None:
        """Reach the scheduler now: an address that answers nothing fails before planning, not after."""
        with self._connect():
            pass

    def run(self, tasks: Sequence[Job], on_progress: OnProgress, on_shard: OnShard) -> list[ShardResult]:
        if not tasks:
            return []
        with self._connect() as client:
            from distributed import as_completed

            self._check_cluster(client)
            # One task group per shard (Dask groups keys by their prefix up to the first '-'): as one
            # group, Dask co-assigns consecutive "root" tasks to one worker, which put the two big
            # train shards on the same worker and left the other idle. Bigger shards go first.
            keys = [_dask_key(t) for t in tasks]
            progress = _DaskProgress(on_progress)
            topic = f"shardkit-progress-{uuid.uuid4().hex}"
            client.subscribe_topic(topic, progress.event)  # type: ignore[no-untyped-call]
            futures = [
                client.submit(_run_on_dask, task, key, topic, self.profile, key=key, pure=False, priority=weight(task))
                for task, key in zip(tasks, keys, strict=True)
            ]
            names = {key: task.name for task, key in zip(tasks, keys, strict=True)}
            results = []
            try:
                for future in as_completed(futures):  # type: ignore[no-untyped-call]
                    result = self._result(future, names[future.key])
                    progress.finished(future.key, result.records)
                    on_shard(result)
                    results.append(result)
            except BaseException:
                client.cancel(futures)  # type: ignore[no-untyped-call]
                self._stop(client, topic, keys)
                raise
            finally:
                with contextlib.suppress(Exception):  # a lost connection must not hide the build's own error
                    client.unsubscribe_topic(topic)  # type: ignore[no-untyped-call]
            return results

    def _check_cluster(self, client: Any) -> None:
        """Refuse a scheduler or workers that cannot load this shardkit's tasks. The scheduler
        unpickles the task graph (it would fail every task with a traceback); a worker that cannot
        unpickle a task closes, Dask gives up on none of it, and the build would wait for ever.
        Workers that join later are not asked."""
        # What unpickling a task imports: this module, and through it the worker's dependencies.
        # eval is a builtin, so it travels by reference where a function of shardkit's would need shardkit.
        probe = f"__import__({__name__!r}).__version__"
        found: dict[str, Any] = {}
        scheduler = f"the Dask scheduler at {self.address}"
        try:
            found[scheduler] = client.run_on_scheduler(eval, probe)
        except Exception as exc:  # run_on_scheduler re-raises the scheduler's error
            found[scheduler] = exc
        for address, version in sorted(client.run(eval, probe, on_error="return").items()):
            found[f"Dask worker {address}"] = version
        _check_versions(found)

    def _result(self, future: Any, name: str) -> ShardResult:
        """The shard's result; a worker's own exception (EntryError, ...) as it was raised there,
        and Dask's failures as one line that says what to do."""
        from distributed import CancelledError, KilledWorker

        try:
            result: ShardResult = future.result()
        except KilledWorker as exc:
            raise WorkerError(
                f"{name}: every Dask worker that ran it died ({exc.allowed_failures + 1} tries), most often killed for using "
                "too much memory (see the workers' logs). Finished shards are kept: rerun the same command to resume, "
                "with more memory per worker or fewer threads per worker"
            ) from None
        except CancelledError as exc:  # the client lost the scheduler, or someone cancelled the task
            raise WorkerError(
                f"{name}: Dask gave up on the task ({getattr(exc, 'reason', 'cancelled')}); is the scheduler at "
                f"{self.address} still up? Finished shards are kept: rerun the same command to resume"
            ) from None
        return result

    def _stop(self, client: Any, topic: str, keys: Sequence[str]) -> None:
        """After ``cancel``: return only once no worker holds a task of this run (up to
        ``stop_timeout``), so that once the build returns, and its lock is released, nothing of it
        writes into OUT. Dask's cancel is a message the scheduler reads later, and a task a worker
        has taken runs on however cancelled: each worker is told to stop the run's tasks, and asked
        until it holds none. Past the timeout, a straggler still cannot commit into another build."""
        deadline = time.monotonic() + self.stop_timeout
        while time.monotonic() < deadline:
            try:  # the scheduler first: a key it has forgotten goes to no worker after the workers answer
                queued = client.run_on_scheduler(_known_to_scheduler, list(keys))
                # Every worker the scheduler knows; one that cannot answer may be busy, not gone: asked again.
                held = client.run(_stop_run, topic, list(keys), on_error="return")
            except Exception:  # the scheduler went away: nothing left to wait for that we can see
                return
            if not queued and all(isinstance(h, list) and not h for h in held.values()):
                return
            time.sleep(0.1)


class _DaskProgress:
    """Per-record progress from Dask tasks' events, exact per shard once it finishes.

    Events travel apart from results and may arrive after their task's result, and a task rerun
    after a worker died ticks again: so ticks count per task, late ones are dropped, and a
    finished task settles its count to the records it wrote (a rerun's excess goes back).
    """

    def __init__(self, on_progress: OnProgress) -> None:
        self._on_progress = on_progress
        self._lock = threading.Lock()
        self._ticked: dict[str, int] = {}
        self._finished: set[str] = set()

    def event(self, event: tuple[float, Any]) -> None:  # called on the client's event loop thread
        _, (key, n) = event
        with self._lock:
            if key in self._finished:
                return
            self._ticked[key] = self._ticked.get(key, 0) + n
            self._on_progress(n)

    def finished(self, key: str, records: int) -> None:
        with self._lock:
            self._finished.add(key)
            settle = records - self._ticked.pop(key, 0)
            if settle:
                self._on_progress(settle)


class _SyncCancelNameError(logging.Filter):
    """Drops the traceback Tornado logs when a signal stops a client call at one moment:
    distributed's ``sync`` (2026.8) then schedules ``cancel``, which reads a ``future`` not yet
    assigned and raises ``NameError`` on the event loop. The stop is shardkit's own (the build says
    what it kept), so that traceback is noise on the user's terminal; any other is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, NameError) and "sync.<locals>.cancel" in record.getMessage())


_SYNC_CANCEL = _SyncCancelNameError()


def _quiet_sync_cancel() -> None:
    logger = logging.getLogger("tornado.application")
    if _SYNC_CANCEL not in logger.filters:
        logger.addFilter(_SYNC_CANCEL)


def _known_to_scheduler(keys: Sequence[str], dask_scheduler: Any = None) -> list[str]:
    """On the scheduler: those of ``keys`` it has not forgotten yet (it may still send them to a worker)."""
    tasks = getattr(dask_scheduler, "tasks", {})
    return [k for k in keys if k in tasks]


def _check_versions(found: dict[str, Any]) -> None:
    """``found``: for each part of a cluster, the shardkit version it loaded, or why it could not."""
    for where, version in found.items():
        if isinstance(version, BaseException):
            raise WorkerError(
                f"{where} cannot import shardkit ({type(version).__name__}: {version}): "
                f"install shardkit {__version__} with its dependencies on the scheduler and every worker"
            )
        if version != __version__:
            raise WorkerError(f"{where} runs shardkit {version}, this build {__version__}: install one version everywhere")


def _dask_key(task: Job) -> str:
    # Unique per output folder too: Dask runs a key once, and two builds of the same inputs into
    # two folders must both get their shards. No '-': Dask groups keys by the part before one.
    where = hashlib.sha256(task.settings.out_dir.encode()).hexdigest()[:8]
    return f"shardkit.{task.name}.{task.settings.fingerprint[:12]}.{where}".replace("-", ".")
