"""``shardkit.reader``: random access to a split without TensorFlow, at its public import path.

    from shardkit.reader import ShardReader
    train = ShardReader("shards/", "train", decode_images=True)    # len(train), train[i], a torch Dataset

The code lives in ``shardkit.read.random_access``.
"""

from shardkit.read.random_access import ShardReader

__all__ = ["ShardReader"]
