"""The build pipeline, one folder per phase: ``inputs/`` -> ``plan/`` -> ``shard/`` (run by
``executors/``) -> ``state/`` (resume, locks, manifest).

``builder`` runs it end to end (``shardkit.build``/``finalize``) and ``config`` is the build's
config; everything below reads top-down in that order.
"""
