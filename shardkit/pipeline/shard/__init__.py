"""Phase 3, one shard: a task -> its entries -> records -> one committed shard file.

``worker`` runs a task; ``records`` turns an entry into serialized Examples with ``augment``
(and ``reduced_decode`` for photos far larger than the training size); ``fetch`` reads the
files of entries in buckets ahead of need.
"""
