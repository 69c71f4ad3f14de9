"""``shardkit reshard``: shards that already exist, read once, written again balanced, globally
shuffled, sized for the hosts that read them, or in another container.

Inputs (``sources``) are a shardkit OUT, a TFDS prepared folder (``tfds_folder``), or TFRecord and
ArrayRecord files anyone wrote. Planning (``planner``) finds every record (``record_index``), sizes
the shards (``sizing``) and draws one permutation per split; each shard is then one task
(``task``) that copies its records (``copier``) on the build's executors, committed and resumed
as a build's shards are (``resharder``), with a manifest from what the inputs say (``metadata``).
"""
