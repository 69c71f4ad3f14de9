"""A build's options as one checked value: ``BuildOptions``.

``shardkit build`` makes one from click's parameters, ``shardkit.build`` from its keyword
arguments, and the builder takes it. Its values are checked when it is made, so a bad option is
a one-line ``UsageError`` before any work, whichever way the build was asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shardkit.errors import UsageError
from shardkit.formats.containers import registry
from shardkit.output.build_state import BuildParameters
from shardkit.storage.boundary import check_schemes

if TYPE_CHECKING:
    from shardkit.pipeline.config import Config
    from shardkit.pipeline.executors.local_executors import Executor

ON_ERROR = ("fail", "skip")
COMPRESSIONS = (None, "gzip")
DUPLICATES = (None, "report", "drop")


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """Everything about a build but its inputs and its output folder (``shardkit.build``'s keywords)."""

    config: Config | str | Path | None = None  # None: inferred from the first entry (image [+ mask or label])
    from_folder: str | Path | None = None  # an ImageFolder tree, instead of index files
    split: str | None = None  # every input in this split, whatever its file name says
    image_root: str | Path | None = None  # where the inputs' relative image paths resolve (default: each input's own folder)
    ignore: Sequence[str] = ()  # globs of index file names to skip
    records_per_shard: int | None = None  # input entries per shard (None: shards of about 128 MB)
    workers: int | None = None  # worker processes (None: the usable cores)
    seed: int = 0  # of the shuffle and of augmentation
    format: str | Sequence[str] = registry.DEFAULT  # the shard containers: "arrayrecord", "tfrecord,arrayrecord", ...
    compression: str | None = None  # TFRecord's: None or "gzip"
    on_error: str = "fail"  # a bad entry stops the build ("fail"), or is skipped and listed ("skip")
    overwrite: bool = False  # replace a different build already in OUT
    fsync: bool = True  # flush each shard to stable storage before committing it
    progress: bool | None = None  # a progress bar (None: when stderr is a terminal)
    executor: Executor | None = None  # where shard tasks run (None: inline or a local process pool)
    num_nodes: int = 1  # this node's share of one plan over num_nodes batch nodes ...
    node_index: int = 0  # ... is node_index, 0 .. num_nodes - 1
    index: bool = True  # TFRecord's: NAME.idx beside each uncompressed shard
    shuffle: bool = True  # order entries and records by hashes of the seed (False: the inputs' order)
    source_id: bool = True  # a string feature naming each record's input
    # The read rule (``storage.boundary``): paths that annotation files and tables name may leave
    # their dataset's root; URLs of these schemes are read besides gs:// and s3:// (e.g. "http").
    allow_outside_root: bool = False
    allow_schemes: Sequence[str] = ()
    # Duplicates and train/test leaks: None (not searched), "report" (OUT/duplicates.jsonl, the
    # manifest and the summary say them) or "drop" (also left out: the training side's twins of
    # evaluation inputs, and all but one of a group within a split); pictures within
    # ``duplicate_threshold`` bits of 64 are twins.
    duplicates: str | None = None
    duplicate_threshold: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "ignore", tuple(self.ignore))  # frozen means frozen: not the caller's list
        if isinstance(self.allow_schemes, str):
            raise UsageError(f"allow_schemes takes a list of schemes, not the string {self.allow_schemes!r}")
        object.__setattr__(self, "allow_schemes", check_schemes(self.allow_schemes))
        if self.records_per_shard is not None and self.records_per_shard < 1:
            raise UsageError("--records-per-shard must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.compression not in COMPRESSIONS:
            raise UsageError(f"unknown compression {self.compression!r} (known: none, gzip)")
        object.__setattr__(self, "format", registry.names_of(self.format))
        registry.configured(self.format, self.compression, self.index)  # a setting a container refuses: one line, before any work
        if self.on_error not in ON_ERROR:
            raise UsageError(f"unknown --on-error {self.on_error!r} (known: fail, skip)")
        if self.duplicates not in DUPLICATES:
            raise UsageError(f"unknown --duplicates {self.duplicates!r} (known: report, drop)")
        if (
            isinstance(self.duplicate_threshold, bool)
            or not isinstance(self.duplicate_threshold, int)
            or not 0 <= self.duplicate_threshold <= 64
        ):
            raise UsageError(f"--duplicate-threshold is a number of bits from 0 to 64, not {self.duplicate_threshold!r}")
        if self.num_nodes < 1:
            raise UsageError("--num-nodes must be at least 1")
        if not 0 <= self.node_index < self.num_nodes:
            raise UsageError(f"--node-index {self.node_index} is outside 0..{self.num_nodes - 1} (--num-nodes {self.num_nodes})")
        if self.num_nodes > 1 and self.overwrite:
            raise UsageError("--overwrite with --num-nodes would let one node delete the others' shards: clear OUT first")

    def parameters(self) -> BuildParameters:
        """The options the records depend on: part of the fingerprint, kept in the build state and the manifest."""
        formats = registry.names_of(self.format)
        drop = self.duplicate_threshold if self.duplicates == "drop" else None  # what is left out changes the records
        return BuildParameters(self.seed, self.compression, self.records_per_shard, self.split, self.index, self.shuffle, formats, drop)


def check_call(indexes: Sequence[str | Path], out: str | Path, options: BuildOptions) -> None:
    """What the options alone cannot check: an output folder, and inputs from one place."""
    if not str(out):
        raise UsageError("an output folder is required (-o OUT)")
    check_inputs(indexes, options.from_folder)


def check_inputs(indexes: Sequence[str | Path], from_folder: str | Path | None) -> None:
    """Index files and folders, or an ImageFolder tree: one of the two (as a build, so a preview)."""
    if bool(indexes) == (from_folder is not None):
        raise UsageError("give index files or folders, or --from-folder ROOT, but not both")
