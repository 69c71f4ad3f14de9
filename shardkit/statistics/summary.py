"""Statistics for a person or a script: a ``DatasetFeatureStatisticsList`` as plain data (what
``shardkit stats --json`` prints and ``shardkit.stats`` holds) and as a few lines a feature."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardkit.statistics.proto import CHANNELS

COCO = ("small", "medium", "large")
TOP_SHOWN = 5  # top values a text line shows (the data keeps 20)


def summarize(proto: Any) -> dict[str, Any]:
    """``{split: {"records": n, "features": {key: {...}}}}`` from the proto, one dict a feature."""
    return {d.name: {"records": int(d.num_examples), "features": {_key(f): _feature(f) for f in d.features}} for d in proto.datasets}


def _key(feature: Any) -> str:
    return "/".join(feature.path.step) if feature.path.step else str(feature.name)


def _common(common: Any) -> dict[str, Any]:
    return {
        "count": int(common.num_non_missing),
        "missing": int(common.num_missing),
        "values_per_record": [int(common.min_num_values), int(common.max_num_values)],
        "avg_values_per_record": float(common.avg_num_values),
    }


def _custom(feature: Any) -> dict[str, Any]:
    return {c.name: c for c in feature.custom_stats}


def _feature(feature: Any) -> dict[str, Any]:
    custom = _custom(feature)
    which = feature.WhichOneof("stats")
    if which == "num_stats":
        num = feature.num_stats
        quantiles = next((h for h in num.histograms if h.type == h.QUANTILES), None)
        deciles = (
            []
            if quantiles is None or not quantiles.buckets
            else [b.low_value for b in quantiles.buckets] + [quantiles.buckets[-1].high_value]
        )
        return {
            "type": "INT" if feature.type == feature.INT else "FLOAT",
            **_common(num.common_stats),
            "min": num.min,
            "max": num.max,
            "mean": num.mean,
            "std": num.std_dev,
            "zeros": int(num.num_zeros),
            "median": num.median,
            "deciles": deciles,
            "quantile_rank_error": custom["quantiles_rank_error"].num if "quantiles_rank_error" in custom else None,
            **({"coco_areas": {n: int(custom[f"coco_area_{n}"].num) for n in COCO}} if "coco_area_small" in custom else {}),
        }
    if which == "string_stats":
        text = feature.string_stats
        return {
            "type": "STRING",
            **_common(text.common_stats),
            "unique": int(text.unique),
            "unique_estimated": "unique_is_estimate" in custom,
            "top": [[v.value, int(v.frequency)] for v in text.top_values],
            "top_max_error": int(custom["top_values_max_error"].num) if "top_values_max_error" in custom else 0,
            "avg_length": text.avg_length,
        }
    blob = feature.bytes_stats
    out: dict[str, Any] = {
        "type": "BYTES",
        **_common(blob.common_stats),
        "bytes": [int(blob.min_num_bytes), float(blob.avg_num_bytes), int(blob.max_num_bytes)],
    }
    if "image_format_histogram" in custom:
        out["type"] = "IMAGE"
        out["formats"] = {b.label.lower(): int(b.sample_count) for b in custom["image_format_histogram"].rank_histogram.buckets}
        out["pixels_measured"] = int(custom["pixels_measured"].num) if "pixels_measured" in custom else 0
        out["pixels"] = _pixels(custom)
        if not out["pixels"] and "pixel_histogram/1ch/L" in custom:  # a mask: pixels per class id, sampled rows
            counts = [b.sample_count for b in custom["pixel_histogram/1ch/L"].histogram.buckets]
            total = sum(counts) or 1
            out["class_pixels"] = {str(level): n / total for level, n in enumerate(counts) if n}
    return out


def _pixels(custom: Mapping[str, Any]) -> dict[str, Any]:
    """Per channel count (1, 3, 4), the mean and std of each channel on 0-255 and 0-1."""
    found: dict[str, Any] = {}
    for channels, names in sorted(CHANNELS.items()):
        tags = [names[c] if len(names) == channels else str(c) for c in range(channels)]
        means = [custom.get(f"pixel_mean/{channels}ch/{t}") for t in tags]
        stds = [custom.get(f"pixel_std/{channels}ch/{t}") for t in tags]
        if any(m is None for m in means) or any(s is None for s in stds):
            continue
        mean, std = [m.num for m in means], [s.num for s in stds]  # type: ignore[union-attr]
        found[names] = {"mean": mean, "std": std, "mean_01": [m / 255 for m in mean], "std_01": [s / 255 for s in std]}
    return found


def _num(x: float) -> str:
    return f"{x:.6g}"


def lines(summary: Mapping[str, Any], labels: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None) -> list[str]:
    """A few lines a feature, split by split; ``labels``: the manifest's class counts per split."""
    out: list[str] = []
    for split, data in summary.items():
        out.append(f"{split}: {data['records']} records")
        for key, feature in data["features"].items():
            out.extend("  " + line for line in _feature_lines(key, feature, data["records"]))
        for key, counts in ((labels or {}).get(split) or {}).items():
            if not counts:
                continue
            shown = ", ".join(f"{name} {n}" for name, n in list(counts.items())[:10])
            out.append(f"  {key} classes: {shown}{', ...' if len(counts) > 10 else ''}")
    return out


def _feature_lines(key: str, f: Mapping[str, Any], records: int) -> list[str]:
    lo, hi = f["values_per_record"]
    per = "" if lo == hi == 1 else f", {lo}-{hi} values a record" if lo != hi else f", {lo} values a record"
    missing = f", {f['missing']} missing" if f["missing"] else ""
    head = f"{key} ({f['type'].lower()}{per}{missing})"
    if f["type"] in ("INT", "FLOAT"):
        if not f["count"] or not f["deciles"]:
            return [f"{head}: no values"]
        line = (
            f"{head}: min {_num(f['min'])}, max {_num(f['max'])}, mean {_num(f['mean'])}, std {_num(f['std'])}, "
            f"median {_num(f['median'])}, zeros {f['zeros']}"
        )
        if "coco_areas" in f:
            line += "; COCO sizes " + ", ".join(f"{name} {n}" for name, n in f["coco_areas"].items())
        return [line]
    if f["type"] == "STRING":
        about = "about " if f["unique_estimated"] else ""
        if f["top"] and f["top"][0][1] == 1:
            return [f"{head}: {about}{f['unique']} distinct, none repeated"]
        top = ", ".join(f"{v!r} {n}" for v, n in f["top"][:TOP_SHOWN])
        return [f"{head}: {about}{f['unique']} distinct, top {top}"]
    lo_b, avg_b, hi_b = f["bytes"]
    found = [f"{head}: {lo_b}-{hi_b} bytes, {avg_b:.0f} on average"]
    if f["type"] == "IMAGE":
        formats = ", ".join(f"{name} {n}" for name, n in f["formats"].items())
        found[0] += f"; {formats}"
        for names, px in f["pixels"].items():
            mean = ", ".join(f"{m:.4f}" for m in px["mean_01"])
            std = ", ".join(f"{s:.4f}" for s in px["std_01"])
            found.append(f"  {names} pixels of {f['pixels_measured']} images: Normalize(mean=({mean}), std=({std}))  (0-1 scale)")
        if f.get("class_pixels"):
            shares = ", ".join(f"{level} {share:.1%}" for level, share in list(f["class_pixels"].items())[:12])
            found.append(f"  pixels by class id: {shares}")
        elif not f["pixels"]:
            found.append("  pixels not measured: pictures passed through undecoded (shardkit stats --pixels decodes them)")
    return found
