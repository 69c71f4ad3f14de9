"""A shard's files from writing to commit, for any job that writes one: a build's shard task, a reshard's.

``ShardWriters`` hands each encoded record to one writer per container of the job (the primary
first), each into a local temp file; ``WrittenShard`` is the shard whole in those temp files with
its record, and ``commit`` publishes them (renamed, or uploaded) and then the record, the commit point.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any, Protocol

from shardkit.errors import StateError, WriteError
from shardkit.formats.containers.adapter import ShardContainer, ShardWriter, WrittenFile
from shardkit.output import layout
from shardkit.output.build_state import current_fingerprint
from shardkit.output.shard_record import ShardFile, ShardResult, write_shard_record
from shardkit.storage import atomic, location


class JobSettings(Protocol):
    """What every shard job of one run shares, as far as writing and committing a shard go."""

    @property
    def out_dir(self) -> str: ...
    @property
    def containers(self) -> tuple[ShardContainer, ...]: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def fsync(self) -> bool: ...


class ShardJob(Protocol):
    """One shard to write: which split, which of how many, its name in the primary container."""

    @property
    def split(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def num_shards(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def settings(self) -> JobSettings: ...


@dataclasses.dataclass(frozen=True)
class StagedFile:
    """One container's file of a shard, whole in its temp file."""

    container: ShardContainer
    name: str  # its final name in OUT
    temp: str
    written: WrittenFile
    sidecar: tuple[str, bytes] | None  # (name, content) of what goes beside it


@dataclasses.dataclass(frozen=True)
class WrittenShard:
    """A shard whole in its local temp files, and its record: what ``commit`` makes finished."""

    task: ShardJob
    result: ShardResult
    files: tuple[StagedFile, ...]  # the shard in each of the job's containers, the primary first
    flushed: bool = True  # False: the files are to be flushed to stable storage before they are committed

    def commit(self) -> None:
        """Each file (flushed first, where that was left to the commit), then the sidecars, then the
        record (the commit point): renamed or uploaded, each whole."""
        settings = self.task.settings
        try:
            check_still_ours(self.task)
            if not self.flushed:
                for staged in self.files:
                    try:
                        atomic.flush_file(staged.temp)
                    except OSError as exc:  # a full disk or a failing one: named by the shard's own name, as a write's error is
                        raise WriteError.from_os_error(location.join(settings.out_dir, staged.name), exc) from None
            for staged in self.files:
                atomic.publish(staged.temp, location.join(settings.out_dir, staged.name))
            for staged in self.files:
                if staged.sidecar is not None:  # beside its shard, before the record: the record is the commit point for all
                    atomic.write_atomic(location.join(settings.out_dir, staged.sidecar[0]), staged.sidecar[1], settings.fsync)
        except BaseException:
            self.discard()
            raise
        write_shard_record(settings.out_dir, self.result, settings.fsync)

    def discard(self) -> None:
        for staged in self.files:
            atomic.remove_quietly(staged.temp)


class ShardWriters:
    """One writer per container of the job: each record is encoded once and handed to all."""

    def __init__(self, task: ShardJob, tag: str) -> None:
        settings = task.settings
        self.files: list[tuple[ShardContainer, str, str]] = []  # (container, final name, temp path)
        self.writers: list[ShardWriter] = []
        try:
            for container in settings.containers:
                name = container.shard_name(task.split, task.index, task.num_shards)
                temp = layout.temp_path(settings.out_dir, name, tag)
                self.files.append((container, name, temp))
                self.writers.append(container.open_writer(temp, location.join(settings.out_dir, name)))
        except BaseException:
            self.abandon()
            raise

    def write(self, record: bytes) -> None:
        for writer in self.writers:
            writer.write(record)

    def write_batch(self, records: Any) -> None:
        for writer in self.writers:
            writer.write_batch(records)

    def write_frames(self, frames: Sequence[bytes], lengths: Sequence[int]) -> None:
        """Records framed as every container of the job frames them (``ShardContainer.copies_frames``)."""
        for writer in self.writers:
            writer.write_frames(frames, lengths)

    def close(self, sync: bool) -> tuple[StagedFile, ...]:
        staged = []
        for (container, name, temp), writer in zip(self.files, self.writers, strict=True):
            written = writer.close(sync)
            sidecar_name = container.sidecar_name(name)
            sidecar = None if written.sidecar is None or sidecar_name is None else (sidecar_name, written.sidecar)
            staged.append(StagedFile(container, name, temp, written, sidecar))
        return tuple(staged)

    def abandon(self) -> None:
        """Close every writer quietly and remove every temp file (a writer may have made its file before failing)."""
        for writer in self.writers:
            writer.abandon()
        for _, _, temp in self.files:
            atomic.remove_quietly(temp)


def shard_result(
    task: ShardJob,
    files: tuple[StagedFile, ...],
    started: float,
    *,
    entries: int,
    covers: tuple[tuple[str, int, int], ...] = (),
    skipped: tuple[tuple[str, int, str], ...] = (),
    lengths: dict[str, tuple[int, int]] | None = None,
    sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]] | None = None,
    labels: dict[str, dict[str, int] | None] | None = None,
    statistics: dict[str, Any] | None = None,
    duplicates: dict[str, Any] | None = None,
) -> ShardResult:
    """The shard's record: what its files hold (the primary, and its twins in the other containers)
    and what the job counted of its records."""
    primary, twins = files[0], files[1:]
    return ShardResult(
        name=task.name,
        split=task.split,
        index=task.index,
        num_shards=task.num_shards,
        records=primary.written.records,
        bytes=primary.written.size,
        crc32c=primary.written.crc32c,
        entries=entries,
        covers=covers,
        skipped=skipped,
        lengths=lengths or {},
        sizes=sizes or {},
        fingerprint=task.settings.fingerprint,
        seconds=round(time.perf_counter() - started, 3),
        index_file=None if primary.sidecar is None else primary.sidecar[0],
        labels=labels or {},
        statistics=statistics,
        duplicates=duplicates,
        format=primary.container.name,
        twins=tuple(ShardFile(t.container.name, t.name, t.written.size, t.written.crc32c, t.sidecar and t.sidecar[0]) for t in twins),
    )


def check_still_ours(task: ShardJob) -> None:
    """Refuse to commit into OUT once another build owns it.

    A task can outlive its build: a Dask worker finishes the task it is running after the
    client that submitted it has failed, been cancelled or been killed, and meanwhile
    ``--overwrite`` may have started a different build in OUT. The same build's shard would be
    byte-identical, so only a changed (or removed) fingerprint stops the commit.
    """
    settings = task.settings
    if current_fingerprint(settings.out_dir) != settings.fingerprint:
        raise StateError(
            f"{settings.out_dir}: now holds another build ({layout.STATE_DIR}/{layout.BUILD_STATE} changed while {task.name} was written); "
            "this task's shard was discarded"
        )
