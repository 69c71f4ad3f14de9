"""``shardkit stats FILE...``: the statistics of shard files, whoever wrote them, in one pass.

Each file goes to a process pool worker (``statistics.of_files.count_file``), one at a time, and
the parts merge exactly, as a build's shards do; ``output`` gets them as the
``DatasetFeatureStatisticsList`` TFDV and Facets read, one dataset. A shardkit output given is
refused: its statistics are already in it.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import time
from collections.abc import Sequence
from typing import Any

from shardkit.errors import Interrupted, UsageError
from shardkit.interrupts import quiet_pool, stop_pool
from shardkit.output import layout
from shardkit.output.found import expand
from shardkit.statistics.of_files import count_file
from shardkit.statistics.shard_statistics import ShardStatistics
from shardkit.storage.atomic import write_atomic
from shardkit.units import plural

DATASET = "files"  # the one dataset's name in the proto


@dataclasses.dataclass(frozen=True)
class FilesStatistics:
    """What ``file_statistics`` found: the records of ``files``, their statistics merged."""

    files: tuple[str, ...]
    statistics: ShardStatistics
    seconds: float

    @property
    def records(self) -> int:
        return self.statistics.records

    def proto(self) -> Any:
        """A ``DatasetFeatureStatisticsList`` of one dataset, ``DATASET``."""
        from shardkit.statistics.proto import dataset_list

        return dataset_list({DATASET: self.statistics})


def file_statistics(paths: Sequence[str], *, workers: int = 1, compression: str = "auto", output: str | None = None) -> FilesStatistics:
    """Statistics of every record of the shard files ``paths`` (files, folders of them, globs);
    with ``output``, written there as the proto (never over a file it read)."""
    started = time.perf_counter()
    targets = expand(list(paths))
    if targets.outputs:
        out = targets.outputs[0].path
        given = f"{out}: a shardkit output, whose statistics are in its {layout.STATISTICS}"
        raise UsageError(f"{given}; give its shard files to count them again")
    if output is not None and os.path.realpath(output) in {os.path.realpath(f) for f in targets.files}:
        raise UsageError(f"--output {output} is one of the files to read: name a new file")
    jobs = [(path, compression) for path in targets.files]
    try:
        if workers > 1 and len(jobs) > 1:
            pool = quiet_pool(mp.get_context(), min(workers, len(jobs)))
            try:
                parts = pool.map(count_file, jobs, chunksize=1)
            finally:
                stop_pool(pool)
        else:
            parts = [count_file(job) for job in jobs]
    except KeyboardInterrupt as exc:
        stopped = f"interrupted: stats stopped before it read all {plural(len(jobs), 'file')}; it wrote nothing"
        raise Interrupted.after(exc, stopped) from exc
    total = ShardStatistics()
    for part in parts:
        total.merge(ShardStatistics.from_data(part))
    found = FilesStatistics(tuple(targets.files), total, time.perf_counter() - started)
    if output is not None:
        write_atomic(output, found.proto().SerializeToString())
    return found
