"""Where shard tasks run: inline, on a local process pool, or on a Dask cluster.

``local_executors`` and ``dask_executor`` are the executors; ``worker_settings`` and ``malloc``
set up the processes they start (threads per worker, the allocator).
"""
