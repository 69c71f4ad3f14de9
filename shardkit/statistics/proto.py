"""Statistics as TFDV and Facets read them: a tensorflow-metadata ``DatasetFeatureStatisticsList``
with one dataset a split, each feature's numeric, string or bytes statistics filled as TFDV's own
generators fill them (ten equal-width and ten equal-count buckets, the top values and their rank
histogram), and what TFDV has no field for as custom statistics: a picture's formats (under the
name TFDV's image statistics use), per-channel pixel mean and std, and the sketches' error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from shardkit.formats.example_proto import INT64
from shardkit.statistics.feature_stats import (
    HISTOGRAM_ROW_STEP,
    AreaStats,
    BytesStats,
    FeatureStats,
    NumberStats,
    PictureStats,
    StringStats,
    ValueLists,
)
from shardkit.statistics.shard_statistics import ShardStatistics
from shardkit.statistics.sketches import Quantiles

BUCKETS = 10  # TFDV's default: ten buckets in each histogram
CHANNELS = {1: "L", 3: "RGB", 4: "RGBA", 2: "LA"}


def dataset_list(splits: Mapping[str, ShardStatistics]) -> Any:
    """``splits``' statistics as a ``DatasetFeatureStatisticsList``."""
    from tensorflow_metadata.proto.v0 import statistics_pb2 as pb

    out = pb.DatasetFeatureStatisticsList()
    for split, stats in splits.items():
        dataset = out.datasets.add(name=split, num_examples=stats.records)
        for key, feature in sorted(stats.features.items()):
            _feature(dataset.features.add(), key, feature, stats.records, pb)
    return out


def _feature(out: Any, key: str, stats: FeatureStats, records: int, pb: Any) -> None:
    out.path.step.append(key)
    if isinstance(stats, NumberStats):
        out.type = pb.FeatureNameStatistics.INT if stats.wire == INT64 else pb.FeatureNameStatistics.FLOAT
        _numbers(out.num_stats, stats, records, pb)
        out.custom_stats.add(name="quantiles_rank_error", num=stats.quantiles.rank_error)
        if isinstance(stats, AreaStats):
            for name, count in zip(("small", "medium", "large"), stats.sizes, strict=True):
                out.custom_stats.add(name=f"coco_area_{name}", num=count)
    elif isinstance(stats, StringStats):
        out.type = pb.FeatureNameStatistics.STRING
        _strings(out.string_stats, stats, records, pb)
        if not stats.distinct.exact:
            out.custom_stats.add(name="unique_is_estimate", num=1)
            out.custom_stats.add(name="top_values_max_error", num=stats.distinct.top_error)
    else:
        assert isinstance(stats, BytesStats)
        out.type = pb.FeatureNameStatistics.BYTES
        _bytes(out.bytes_stats, stats, records, pb)
        if isinstance(stats, PictureStats):
            _pictures(out, stats, pb)


def _common(out: Any, lists: ValueLists, records: int, pb: Any) -> None:
    out.num_non_missing = lists.records
    out.num_missing = max(records - lists.records, 0)
    if lists.records:
        out.min_num_values = lists.least or 0
        out.max_num_values = lists.most or 0
        out.avg_num_values = lists.total / lists.records
        out.tot_num_values = lists.total
        _quantile_buckets(out.num_values_histogram, lists, pb)


def _numbers(out: Any, stats: NumberStats, records: int, pb: Any) -> None:
    _common(out.common_stats, stats.lists, records, pb)
    if not stats.moments.n:
        return
    out.mean, out.std_dev, out.num_zeros = stats.moments.mean, stats.moments.std, stats.zeros
    out.min, out.max = stats.low or 0.0, stats.high or 0.0
    out.median = stats.quantiles.quantiles(2)[1]
    standard = out.histograms.add(type=pb.Histogram.STANDARD, num_nan=stats.nans)
    low, high = float(stats.low or 0.0), float(stats.high or 0.0)
    spread = high > low and math.isfinite(high - low)  # an infinite value leaves one bucket from the least to the most
    edges = [low + (high - low) * i / BUCKETS for i in range(BUCKETS + 1)] if spread else [low, high]
    for i, count in enumerate(stats.quantiles.counts_below(edges)):
        standard.buckets.add(low_value=edges[i], high_value=edges[i + 1], sample_count=count)
    quantiles = out.histograms.add(type=pb.Histogram.QUANTILES, num_nan=stats.nans)
    _quantile_buckets(quantiles, stats.quantiles, pb)


def _quantile_buckets(out: Any, sketch: Quantiles | ValueLists, pb: Any) -> None:
    out.type = pb.Histogram.QUANTILES
    bounds = sketch.quantiles(BUCKETS)
    if not bounds:
        return
    each = (sketch.records if isinstance(sketch, ValueLists) else sketch.sketch.n) / BUCKETS
    for i in range(BUCKETS):
        out.buckets.add(low_value=bounds[i], high_value=bounds[i + 1], sample_count=each)


def _strings(out: Any, stats: StringStats, records: int, pb: Any) -> None:
    _common(out.common_stats, stats.lists, records, pb)
    out.unique = stats.distinct.unique
    if stats.sizes.records:
        out.avg_length = stats.sizes.total / stats.sizes.records
    for rank, (value, count) in enumerate(stats.distinct.top()):
        out.top_values.add(value=_shown(value), frequency=count)
        out.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=_shown(value), sample_count=count)


def _shown(value: str) -> str:
    """A value as a proto string holds it: stray bytes (kept as escapes) written as U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _bytes(out: Any, stats: BytesStats, records: int, pb: Any) -> None:
    _common(out.common_stats, stats.lists, records, pb)
    sizes = stats.sizes
    if sizes.records:
        out.avg_num_bytes = sizes.total / sizes.records
        out.min_num_bytes, out.max_num_bytes = sizes.least or 0, sizes.most or 0
        out.max_num_bytes_int = sizes.most or 0


def _pictures(out: Any, stats: PictureStats, pb: Any) -> None:
    formats = out.custom_stats.add(name="image_format_histogram").rank_histogram
    for rank, (name, count) in enumerate(sorted(stats.formats.items(), key=lambda kv: (-kv[1], kv[0]))):
        formats.buckets.add(low_rank=rank, high_rank=rank, label=name.upper(), sample_count=count)
    out.custom_stats.add(name="pixels_measured", num=stats.measured)
    out.custom_stats.add(name="pixel_histogram_row_step", num=HISTOGRAM_ROW_STEP)  # the histograms count every Nth row
    for channels in sorted(stats.histograms):
        names = CHANNELS.get(channels, "".join(str(c) for c in range(channels)))
        means, stds = stats.channel_moments(channels)  # none for a mask: its pixels are class ids
        for c in range(channels):
            tag = f"{names[c] if len(names) == channels else c}"
            if c < len(means):
                out.custom_stats.add(name=f"pixel_mean/{channels}ch/{tag}", num=means[c])
                out.custom_stats.add(name=f"pixel_std/{channels}ch/{tag}", num=stds[c])
            histogram = out.custom_stats.add(name=f"pixel_histogram/{channels}ch/{tag}").histogram
            histogram.type = pb.Histogram.STANDARD
            for level, count in enumerate(stats.histograms[channels][c].tolist()):
                histogram.buckets.add(low_value=level, high_value=level + 1, sample_count=count)
