"""A reshard's options as one checked value: ``ReshardOptions`` (``shardkit.reshard``'s keywords).

Checked when made, so a bad option or a conflicting pair is a one-line ``UsageError`` before any
input is read.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shardkit.errors import UsageError
from shardkit.formats.containers import registry
from shardkit.output.build_state import BuildParameters

if TYPE_CHECKING:
    from shardkit.pipeline.executors.local_executors import Executor

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(value: int | str) -> int:
    """``256MB`` (decimal), ``1GiB`` (binary), ``4096`` (bytes) as bytes; a ``UsageError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        found = _SIZE.match(str(value))
        if found is None:
            raise UsageError(f"--shard-size {value!r} is not a size: give bytes, or a number and a unit (256MB, 1GiB)")
        number, prefix, binary, _ = found.groups()
        size = int(float(number) * (1024 if binary else 1000) ** _POWERS[prefix.lower()])
    if size < 1:
        raise UsageError(f"--shard-size must be at least 1 byte, not {value!r}")
    return size


@dataclasses.dataclass(frozen=True)
class ReshardOptions:
    """Everything about a reshard but its inputs and its output folder."""

    split: str | None = None  # every input file in this split, whatever its name says
    shards: int | None = None  # shards per split
    records_per_shard: int | None = None  # or records per shard
    shard_size: int | str | None = None  # or bytes per shard ("256MB")
    multiple_of: int = 1  # each split's shard count rounded up to a multiple of this (hosts x loader workers)
    seed: int = 0  # of the global shuffle
    shuffle: bool = True  # a uniform permutation of each split's records (False: the inputs' order)
    format: str | Sequence[str] = registry.DEFAULT  # the output's containers: "arrayrecord", "tfrecord,arrayrecord", ...
    compression: str | None = None  # TFRecord's: None or "gzip"
    index: bool = True  # TFRecord's: NAME.idx beside each uncompressed shard
    workers: int | None = None  # worker processes (None: the usable cores)
    on_error: str = "fail"  # a damaged record stops the reshard ("fail"), or is left out and listed ("skip")
    overwrite: bool = False  # replace a different build or reshard already in OUT
    fsync: bool = True  # flush each shard to stable storage before committing it
    progress: bool | None = None  # progress bars (None: when stderr is a terminal)
    executor: Executor | None = None  # where shard tasks run (None: inline or a local process pool)

    def __post_init__(self) -> None:
        sizes = [name for name, value in self._sizes().items() if value is not None]
        if len(sizes) > 1:
            raise UsageError(f"{_flag(sizes[0])} and {_flag(sizes[1])} both size the shards: give one of them")
        if self.shards is not None and self.shards < 1:
            raise UsageError("--shards must be at least 1")
        if self.records_per_shard is not None and self.records_per_shard < 1:
            raise UsageError("--records-per-shard must be at least 1")
        if self.shard_size is not None:
            object.__setattr__(self, "shard_size", parse_size(self.shard_size))
        if self.multiple_of < 1:
            raise UsageError("--multiple-of must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.compression not in (None, "gzip"):
            raise UsageError(f"unknown compression {self.compression!r} (known: none, gzip)")
        if self.on_error not in ("fail", "skip"):
            raise UsageError(f"unknown --on-error {self.on_error!r} (known: fail, skip)")
        object.__setattr__(self, "format", registry.names_of(self.format))
        registry.configured(self.format, self.compression, self.index)  # a setting a container refuses: one line, now

    def _sizes(self) -> dict[str, Any]:
        return {"shards": self.shards, "records_per_shard": self.records_per_shard, "shard_size": self.shard_size}

    def sizing(self) -> dict[str, Any]:
        """How the shards are sized, as the state and the manifest record it."""
        return {**self._sizes(), "multiple_of": self.multiple_of}

    def parameters(self) -> BuildParameters:
        """The options the output's records depend on, in the shape a build's state keeps them."""
        return BuildParameters(
            self.seed, self.compression, self.records_per_shard, self.split, self.index, self.shuffle, registry.names_of(self.format)
        )


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")
