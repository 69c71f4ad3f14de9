"""How shardkit's processes meet Ctrl-C and SIGTERM: the parent stops the work, workers stay quiet.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group, and SLURM pre-emption
sends SIGTERM to every process of a job step: each worker would print its own traceback. So
pool workers ignore SIGINT and end silently on SIGTERM, and only the parent decides: it stops
the pool (``Pool.terminate`` sends SIGTERM), removes temp files and says what was kept. The CLI
makes SIGTERM to the ``shardkit`` process raise like Ctrl-C does, so both take that one path;
the library itself installs no signal handler.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.context import BaseContext
from multiprocessing.pool import Pool
from types import FrameType
from typing import Any, TypeVar

from shardkit.errors import Interrupted

T = TypeVar("T")
R = TypeVar("R")

_STOP = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM in this thread while worker processes start: they inherit the mask,
    so none sees a signal before it has chosen to ignore it. One that arrives meanwhile is
    delivered when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def quiet_worker() -> None:
    """In a worker process: leave Ctrl-C to the parent, and end without a traceback on SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


def quiet_pool(
    context: BaseContext, processes: int, initializer: Callable[..., None] | None = None, initargs: tuple[Any, ...] = ()
) -> Pool:
    """A ``multiprocessing`` pool whose workers are quiet (``quiet_worker``) before anything else
    runs. End it with ``stop_pool``."""
    pool: Pool | None = None
    try:
        with held():
            pool = context.Pool(processes, initializer=_start_quiet, initargs=(initializer, initargs))  # type: ignore[attr-defined]
    except BaseException:  # a signal held while the workers started is delivered as the hold ends
        if pool is not None:
            stop_pool(pool)
        raise
    return pool


def pool_map(function: Callable[[T], R], jobs: Sequence[T], workers: int) -> list[R]:
    """``function`` of each job, in order: on a quiet pool of up to ``workers`` processes, one job a
    task, where there are several of both; else here, one after another."""
    if workers > 1 and len(jobs) > 1:
        import multiprocessing as mp

        pool = quiet_pool(mp.get_context(), min(workers, len(jobs)))
        try:
            return pool.map(function, jobs, chunksize=1)
        finally:
            stop_pool(pool)
    return [function(job) for job in jobs]


def stop_pool(pool: Pool) -> None:
    """End the pool's workers and wait until they are gone, with Ctrl-C and SIGTERM held: a second
    Ctrl-C while stopping must not leave workers writing after the parent has cleaned up."""
    with held():
        pool.terminate()
        pool.join()


def _start_quiet(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    quiet_worker()
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While a command runs, SIGTERM raises ``Interrupted`` in the main thread as Ctrl-C raises
    ``KeyboardInterrupt``, so a build stops the same way for ``docker stop``, ``timeout`` or a
    pre-empted batch job as for Ctrl-C. Elsewhere than the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Interrupted("interrupted", signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def ignoring() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored for a moment (a process reporting that it was interrupted)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in _STOP}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def ignore_further() -> None:
    """For a process about to exit because of an interrupt: later Ctrl-C or SIGTERM are moot."""
    for signum in _STOP:
        signal.signal(signum, signal.SIG_IGN)


def exit_status(exc: BaseException) -> int:
    """The shell's convention for a process ended by a signal: 128 + the signal's number."""
    return 128 + getattr(exc, "signum", signal.SIGINT)
