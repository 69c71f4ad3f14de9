"""``shardkit.executors``: where a build's shard tasks run, at their public import path.

    shardkit.build(["data/"], "/shared/shards", executor=DaskExecutor("tcp://HOST:8786"))

``InlineExecutor`` (this process, ``--workers 1``), ``PoolExecutor`` (a multiprocessing pool,
the default) and ``DaskExecutor`` (a Dask cluster; ``pip install 'shardkit[dask]'``, Dask itself
is imported when it runs). The code lives in ``shardkit.pipeline.executors.local_executors`` and
``shardkit.pipeline.executors.dask_executor``.
"""

from shardkit.pipeline.executors.dask_executor import DaskExecutor
from shardkit.pipeline.executors.local_executors import Executor, InlineExecutor, PoolExecutor, default_workers

__all__ = ["DaskExecutor", "Executor", "InlineExecutor", "PoolExecutor", "default_workers"]
