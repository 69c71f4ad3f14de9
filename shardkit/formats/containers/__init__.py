"""Shard containers: the file formats shards are written in, each behind one adapter.

``adapter`` says what a container is to the rest of shardkit, ``registry`` finds one by name or
by file name; TFRecord (``tfrecord_shards``: framing, CRC walk, ``.idx``) and ArrayRecord
(``arrayrecord_shards``) are the two. Nothing outside this folder frames, unframes or names a
container's files itself (``tests/test_architecture.py`` holds it).
"""
