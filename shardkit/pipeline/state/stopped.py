"""What a build that stopped early tells the user: what is kept, and how to resume.

Ctrl-C, SIGTERM and a failed write (a full disk, a quota, a folder gone read-only) all end the
same way: the executor has stopped its workers, the temp files are gone, every committed shard
stays, and one line says how many and what to do. ``reporting`` wraps a build and turns the
exception it ends with into that line, from what the build had learned by then (``Progress``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator

from shardkit import interrupts
from shardkit.errors import Interrupted, ShardkitError, WriteError
from shardkit.output import layout
from shardkit.pipeline.state import resume
from shardkit.storage import atomic, location


@dataclasses.dataclass
class Progress:
    """How far a build got, filled in as it learns it."""

    out_dir: str | None = None
    fingerprint: str | None = None
    names: list[str] | None = None  # the shards this run (this node) builds, once planned
    node: tuple[int, int] = (0, 1)  # (index, count) under --num-nodes

    def kept(self) -> str | None:
        """``6 of 40 shards finished and kept``, or None before the plan is known."""
        if self.out_dir is None or self.fingerprint is None or self.names is None:
            return None
        try:
            finished, _ = resume.committed(self.out_dir, self.names, self.fingerprint)
        except (OSError, ShardkitError):  # OUT went away, or its store: say nothing rather than hide why the build stopped
            return None
        index, count = self.node
        whose = f"node {index} of {count}: " if count > 1 else ""
        return f"{whose}{len(finished)} of {len(self.names)} shards finished and kept"


@contextlib.contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Re-raise an interrupt or a failed write with what the build keeps and how to resume."""
    try:
        yield
    except KeyboardInterrupt as exc:
        # The work has stopped and its temp files are gone: a second Ctrl-C while the kept shards
        # are counted (milliseconds, reading their records) must not cut this line short.
        with interrupts.ignoring():
            kept = progress.kept()
        if kept is None:
            raise Interrupted.after(exc, "interrupted before any shard was started; run the same command to start (or resume)") from exc
        raise Interrupted.after(exc, f"interrupted: {kept} in {progress.out_dir}; run the same command to resume") from exc
    except WriteError as exc:
        kept = progress.kept()
        if kept is None or exc.kept is not None:
            raise
        raise WriteError(exc.path, exc.reason, exc.code, kept) from exc


def remove_temps(out_dir: str, reached: Progress, num_nodes: int) -> None:
    """Temp files of a build that stopped mid-way, or of a killed one before it, wherever in OUT a
    build writes them (and a bucket build's staging folder, once empty). A node's own alone: other
    nodes may be writing theirs, and the files all nodes share."""
    if num_nodes > 1 and reached.names is None:
        return
    with interrupts.held():  # a second Ctrl-C must not cut the sweep short
        for temp in layout.temp_files(out_dir, None if num_nodes == 1 else reached.names):
            atomic.remove_quietly(temp)  # a task still running elsewhere may have removed its own
        if num_nodes == 1 and location.is_url(out_dir):
            with contextlib.suppress(OSError):
                os.rmdir(layout.work_dir(out_dir))
