"""Checks on the output folder before any work: one clear line, not a failure hours in.

OUT must be a folder this process can write (not a file, not on a read-only filesystem, not
denied) and not one the inputs are read from (``storage.protected``'s rule), and the build should
fit on its disk. The size estimate is rough (input file sizes
times records per entry), so a build that may not fit is warned about, never refused.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Mapping, Sequence

from shardkit.errors import OutputError, ShardkitWarning
from shardkit.output import layout
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.storage import location, protected
from shardkit.units import size


def check_out_folder(out_dir: str) -> None:
    """OUT is a folder this process can write into, or one it can create; nothing is created yet."""
    if location.is_url(out_dir):  # the first write, the lock object, says whether the bucket is there and writable
        return
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise OutputError(f"{out_dir}: is a file, not a folder; give -o a folder (it is created if missing)")
    existing = out_dir
    while not os.path.exists(existing):  # the nearest folder that exists is where OUT would be created
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputError(f"{out_dir}: cannot create the output folder ({existing} is a file); choose another -o")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(existing) else "permission denied"
        if existing == out_dir:
            raise OutputError(f"{out_dir}: cannot write into the output folder ({why}); choose another -o, or make it writable")
        raise OutputError(f"{out_dir}: cannot create the output folder in {existing} ({why}); choose another -o")


def check_out_spares_inputs(out_dir: str, indexes: Sequence[str | os.PathLike[str]], sources: Sequence[PlanSource],
                            from_folder: str | os.PathLike[str] | None, others: Sequence[object]) -> None:  # fmt: skip
    """OUT is not where the inputs are read from, and no input lies at a name a build writes or
    deletes in it (``--overwrite`` included), checked before anything is written.

    ``indexes`` and ``from_folder``: the inputs as passed; ``sources``: what they were found to
    be; ``others``: the config and the image root, where they are paths."""
    tree = None if from_folder is None else location.local_path(os.fspath(from_folder))
    read = [*(os.fspath(p) for p in indexes), *([tree] if tree else []), *(s.path for s in sources)]
    inputs = protected.Inputs([*read, *(os.fspath(p) for p in others if isinstance(p, str | os.PathLike))])
    listed = [(p if _is_folder(p) else location.dirname(location.absolute(p)), p) for p in read]
    walked = [tree] if tree is not None and registry.folder_format(tree).any_folder else []
    protected.refuse_writing_into(out_dir, inputs, layout.is_written, command="build", listed=listed, walked=walked)


def _is_folder(path: str) -> bool:
    return not location.is_url(path) and os.path.isdir(location.local_path(path))


def warn_if_short_of_space(out_dir: str, pending: Sequence[ShardTask], bytes_per_entry: Mapping[str, float]) -> None:
    """Warn when the shards still to build look bigger than the free space on OUT's filesystem."""
    if location.is_url(out_dir):
        return  # a bucket has no free-space figure; a local staging folder holds one shard per worker at a time
    need = sum(task.entries.entries * bytes_per_entry[task.split] for task in pending)
    free = shutil.disk_usage(out_dir).free
    if need > free:
        warnings.warn(
            f"{out_dir}: the shards still to build need about {size(need)} and its disk has {size(free)} free; "
            "the build may run out of space (finished shards are kept: free space and rerun to resume)",
            ShardkitWarning,
            stacklevel=3,
        )


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
