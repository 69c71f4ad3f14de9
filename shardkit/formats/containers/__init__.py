"""Shard containers: the file formats shards are written in, each behind one adapter.

TFRecord (its framing, CRC walk and ``.idx`` sidecar) lives here; nothing outside this folder
frames, unframes or names a container's files itself.
"""
