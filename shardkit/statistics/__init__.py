"""What a build's records hold, counted as they are written: per split and feature, numbers'
moments and quantiles, strings' distinct and top values, pictures' formats, sizes and pixels.

Each build worker keeps a ``ShardStatistics`` for its shard; the parent merges them exactly (sums,
moments by Chan's formula, sketches by their own merge) and writes ``OUT/statistics.pb``, the
``DatasetFeatureStatisticsList`` that TFDV and Facets read. Nothing here imports TensorFlow.
"""
