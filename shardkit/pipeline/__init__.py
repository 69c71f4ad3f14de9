"""The build pipeline: index files -> entries -> plan -> workers -> shards + per-shard records -> manifest.

``builder`` runs it (``shardkit.build``/``finalize``); ``index_files`` and ``entries`` read the
inputs, ``config`` the YAML config, ``plan`` and ``tasks`` cut the work into shard tasks,
``worker`` (with ``augment`` and ``worker_settings``) builds one shard, the executors run tasks
inline, on a process pool or on Dask, and ``resume``, ``lock`` and ``manifest`` keep OUT
consistent across interruptions.
"""
