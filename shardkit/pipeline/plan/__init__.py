"""Phase 2, the plan: rows -> shuffled plan files cut into shard tasks.

``arithmetic`` holds the pure functions (shard bounds, shuffle keys, record seeds), ``planner``
streams the rows through the on-disk ``spool`` into ``plan_file``, and ``tasks`` holds the values
that cross process boundaries (a shard task, the build's settings, a shard's result).
"""
