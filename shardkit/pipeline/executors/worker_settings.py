"""Process-wide settings for shard work, applied while tasks run and undone after the last one.

Two settings matter for CPU-bound image work: native thread pools pinned to one thread (the
parallelism is the processes; see ``augment.pin_native_threads``), and glibc's malloc thresholds
freed from a fixed value (``malloc.relax``). An executor may add its own (a Dask worker's
sampling profiler is paused). All are per process, while a Dask worker runs tasks in threads of
one process, so ``shard_work`` counts the tasks inside: the first one in applies the settings,
the last one out undoes them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

from shardkit.pipeline.executors import malloc

Setting = Callable[[], Callable[[], None]]  # applies itself, returns its undo


def apply(augment: bool) -> Callable[[], None]:
    """Apply the settings in this process now; returns the undo (pool workers never call it)."""
    undo = [malloc.relax()]
    if augment:
        undo.append(_pin_threads())

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


@contextlib.contextmanager
def fork_safe(start_method: str) -> Iterator[None]:
    """Forking pool workers made safe from this process's OpenCV, for the time inside.

    OpenCV's thread pool does not survive ``fork``: a child that resizes it (every augmenting
    worker pins it to one thread) or runs a parallel operation waits for ever on threads that
    stayed in the parent. A parent that used OpenCV before the build (a preview in the same
    notebook, an image loaded with cv2) has that pool running, so while a forking pool lives the
    parent's native pools are pinned to one thread: stopped before any child is forked.
    """
    if start_method != "fork" or "cv2" not in sys.modules:
        yield
        return
    restore = _pin_threads()
    try:
        yield
    finally:
        restore()


def _pin_threads() -> Callable[[], None]:
    from shardkit.pipeline.shard.augment import pin_native_threads  # imports OpenCV: only when augmenting

    return pin_native_threads()


class _Scope:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._undo: list[Callable[[], None]] = []
        self._pinned = False

    @contextlib.contextmanager
    def __call__(self, augment: bool, also: Sequence[Setting] = ()) -> Iterator[None]:
        """``also``: settings of the executor's, applied with the others by the first task in."""
        with self._lock:
            if self._inside == 0:
                self._undo.append(malloc.relax())
                self._undo.extend(setting() for setting in also)
            if augment and not self._pinned:
                self._undo.append(_pin_threads())
                self._pinned = True
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0:
                    undo, self._undo, self._pinned = self._undo, [], False
                    for step in reversed(undo):
                        step()


shard_work = _Scope()
"""``with shard_work(augment, also):`` around each task that shares its process with others."""
