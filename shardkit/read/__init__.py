"""Reading shards back: the tuned tf.data reader, random access without TensorFlow, and
``snapshot-materialize``. Public import paths: ``shardkit.tfdata``, ``shardkit.reader``."""
