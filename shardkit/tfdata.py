"""``shardkit.tfdata``: the tuned tf.data reader, at its public import path.

    import shardkit.tfdata
    ds = shardkit.tfdata.load("shards/", "train", shuffle=4096, seed=0, batch_size=32)

The code lives in ``shardkit.read.tf_datasets``; TensorFlow is imported when a function is called.
"""

from shardkit.read.tf_datasets import feature_spec, load, read_manifest, shard_files

__all__ = ["feature_spec", "load", "read_manifest", "shard_files"]
