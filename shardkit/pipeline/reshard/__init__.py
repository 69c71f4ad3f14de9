"""``shardkit reshard``: shards that already exist (a shardkit OUT, foreign TFRecord or ArrayRecord
files, a TFDS prepared dataset folder) rewritten balanced, globally shuffled, sized for the hosts
that read them, or converted to another container.
"""
