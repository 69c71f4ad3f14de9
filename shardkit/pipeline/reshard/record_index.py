"""Where every record of one input file is: the step of planning that reads each input once.

A file in a bucket, or GZIP-compressed, is first copied to a local plain file in the plan folder
(``staged``); then its container's walk checks every record's framing and checksum and hands on
where each sound one is (a TFRecord frame's byte offset, an ArrayRecord record's number) and its
length. They are kept as two arrays of int64, 16 bytes a record, never as Python objects.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from shardkit.errors import ShardkitError, WriteError
from shardkit.formats.containers import registry
from shardkit.pipeline.reshard.sources import InputFile


@dataclasses.dataclass(frozen=True)
class FileIndex:
    """What the walk over one input found."""

    locators: np.ndarray  # int64: where each sound record is, in file order
    lengths: np.ndarray  # int64: each one's payload bytes
    staged: str | None  # the local plain copy it was read from, a name in the plan folder (None: read in place)
    damaged: tuple[tuple[int, str], ...]  # (where, reason) of each record left out (on_error skip)
    stopped: tuple[int, str] | None  # where the walk could not go on, and why (the rest of the file is unreadable)


def staged_name(number: int, source: InputFile) -> str:
    """The plan folder's name of input ``number``'s local plain copy."""
    return f"input-{number:05d}.{source.container}"


def index_file(number: int, source: InputFile, plan_dir: str, skip: bool) -> FileIndex:
    """Find every record of ``source`` (input ``number``); with ``skip``, walk on past damaged records."""
    container = registry.named(source.container, source.compression)
    path, staged, problem = source.path, None, None
    if source.staged:
        staged = staged_name(number, source)
        path = os.path.join(plan_dir, staged)
        try:
            problem = container.stage(source.path, path, source.compression)
        except OSError as exc:
            if os.path.exists(plan_dir):  # the plan's disk failed, not the input
                raise WriteError.from_os_error(path, exc) from None
            raise
        except ShardkitError as exc:
            raise ShardkitError(f"{source.path}: cannot read: {exc}") from None
    damaged: list[tuple[int, str]] = []
    locators, lengths, result = container.locate(path, (lambda where, why: damaged.append((where, why))) if skip else None)
    stopped = None
    if result.error is not None:
        where = result.error_offset if result.error_offset is not None else result.error_record or 0
        stopped = (where, result.error)
    elif problem is not None:
        stopped = (0, problem)
    return FileIndex(locators, lengths, staged, tuple(damaged), stopped)
