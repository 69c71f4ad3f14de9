"""``shardkit preview OUT --stats``: a build's statistics (``shardkit stats``) as one picture.

Per split: the class counts of each label feature (the manifest's), then a cell a feature in
rows of three: a number's ten equal-width buckets (the proto's standard histogram), a picture's
per-channel pixel histogram (256 levels, one pixel column each) with the mean and std written
under it, a text's top values as bars. The layout is computed from the statistics first
(``layout``) and drawn from it, so what is drawn where can be checked. Pillow only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image, ImageDraw

from shardkit.check.stats import DatasetStatistics
from shardkit.errors import UsageError
from shardkit.view import fonts
from shardkit.view.sheet import BACKGROUND, GAP, INK, LINE, colour

WIDTH = 960
COLUMNS = 3
CELL = (WIDTH - GAP) // COLUMNS  # a cell's width, its right gap included
CHART = 56  # the height of a number's bars
STRIP = 28  # the height of one channel's pixel histogram
LEVELS = 256
ROW = 12  # one class's or top value's bar
TOP_SHOWN = 6  # top values drawn a text feature
CLASSES_SHOWN = 40  # classes drawn a label feature
NUMBER = (70, 110, 160)  # a number's bars
TEXT = (150, 110, 190)  # a text's top values
CHANNEL = {"R": (215, 45, 45), "G": (40, 150, 60), "B": (45, 85, 215), "L": (90, 90, 90), "A": (170, 170, 170)}
_FAINT = (232, 232, 232)
_GREY = (110, 110, 110)


@dataclasses.dataclass(frozen=True)
class Box:
    x: int
    y: int
    width: int
    height: int


@dataclasses.dataclass(frozen=True)
class Placed:
    """One thing drawn: a split's title, a label feature's class counts, or a feature's cell."""

    split: str
    key: str  # the feature ("" for the split's title)
    kind: str  # "title", "classes", "number", "constant" (one value throughout), "picture", "text", "bytes"
    box: Box


def bar_height(count: float, most: float, room: int) -> int:
    """How many pixels a bar of ``count`` is where ``most`` fills ``room``: at least 1 for any count."""
    if count <= 0 or most <= 0:
        return 0
    return max(1, round(room * count / most))


def statistics_sheet(paths: Sequence[str], *, split: str | None = None) -> Image.Image:
    """The picture of ``paths``' statistics (a shardkit output's ``statistics.pb``, or computed)."""
    from shardkit.check.stats import stats

    return draw(stats(paths), split=split)


def draw(found: DatasetStatistics, *, split: str | None = None) -> Image.Image:
    placed = layout(found, split=split)
    height = max((p.box.y + p.box.height for p in placed), default=0) + GAP
    sheet = Image.new("RGB", (WIDTH, LINE + 2 * GAP + height), BACKGROUND)
    pen = ImageDraw.Draw(sheet)
    fonts.write(pen, (GAP, GAP), f"statistics: {found.source}", INK, WIDTH - 2 * GAP, keep_end=True)
    features = _features(found.proto)
    for p in placed:
        if p.kind == "title":
            pen.line((GAP, p.box.y, WIDTH - GAP, p.box.y), fill=_GREY)
            fonts.write(pen, (GAP, p.box.y + 3), f"{p.split}: {found.splits[p.split]['records']} records", INK, WIDTH)
        elif p.kind == "classes":
            _classes(pen, p, found.labels[p.split][p.key])
        else:
            _CELLS[p.kind](pen, p, found.splits[p.split]["features"][p.key], features[p.split][p.key])
    return sheet


def layout(found: DatasetStatistics, *, split: str | None = None) -> list[Placed]:
    """Where each split's title, class counts and feature cells go (below the picture's title line)."""
    if split is not None and split not in found.splits:
        raise UsageError(f"no split {split!r} in these statistics: {', '.join(found.splits) or 'none'}")
    features = _features(found.proto)
    placed: list[Placed] = []
    y = 2 * GAP + LINE
    for name, data in found.splits.items():
        if split is not None and name != split:
            continue
        placed.append(Placed(name, "", "title", Box(GAP, y, WIDTH - 2 * GAP, LINE + GAP)))
        y += LINE + 2 * GAP
        for key, counts in _named_labels(found.labels.get(name) or {}, data["features"]).items():
            height = LINE + min(len(counts), CLASSES_SHOWN) * ROW + (LINE if len(counts) > CLASSES_SHOWN else 0) + GAP
            placed.append(Placed(name, key, "classes", Box(GAP, y, WIDTH - 2 * GAP, height)))
            y += height + GAP
        summaries = data["features"]
        constant = [key for key, f in summaries.items() if _kind(f) == "number" and _constant(features[name][key])]
        cells = [(key, _kind(f), _cell_height(f, features[name][key])) for key, f in summaries.items() if key not in constant]
        for start in range(0, len(cells), COLUMNS):
            row = cells[start : start + COLUMNS]
            for i, (key, kind, height) in enumerate(row):
                placed.append(Placed(name, key, kind, Box(GAP + i * CELL, y, CELL - GAP, height)))
            y += max(h for _, _, h in row) + GAP
        for start in range(0, len(constant), COLUMNS):  # one value in every record: a line each, three a row
            for i, key in enumerate(constant[start : start + COLUMNS]):
                placed.append(Placed(name, key, "constant", Box(GAP + i * CELL, y, CELL - GAP, LINE)))
            y += LINE + (GAP if start + COLUMNS >= len(constant) else 0)
    return placed


def _named_labels(labels: Mapping[str, Mapping[str, int]], summaries: Mapping[str, Any]) -> dict[str, Mapping[str, int]]:
    """The manifest's label counts worth their own bars: those with class names. An int64 feature's
    counts by bare value (the manifest counts any with few values) are its number histogram already."""
    return {
        key: counts
        for key, counts in labels.items()
        if key not in summaries or _kind(summaries[key]) != "number" or not all(v.lstrip("-").isdigit() for v in counts)
    }


def _features(proto: Any) -> dict[str, dict[str, Any]]:
    return {d.name: {"/".join(f.path.step) or f.name: f for f in d.features} for d in proto.datasets}


def _kind(summary: Mapping[str, Any]) -> str:
    return {"INT": "number", "FLOAT": "number", "STRING": "text", "IMAGE": "picture"}.get(summary["type"], "bytes")


def _cell_height(summary: Mapping[str, Any], feature: Any) -> int:
    kind = _kind(summary)
    if kind == "number":
        return LINE + CHART + 2 + 2 * LINE
    if kind == "text":
        return LINE + min(len(summary["top"]), TOP_SHOWN) * ROW + LINE
    if kind == "picture":
        strips = sum(len(channels) for channels in pixel_histograms(feature).values())
        return LINE + strips * (STRIP + 2) + (1 + 2 * len(summary["pixels"]) if summary["pixels"] else 2) * LINE
    return 2 * LINE


# --- drawing ----------------------------------------------------------------------------------------


def _title(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], extra: str = "") -> None:
    missing = f", {summary['missing']} missing" if summary["missing"] else ""
    fonts.write(pen, (p.box.x, p.box.y), f"{p.key} ({summary['type'].lower()}{missing}){extra}", INK, p.box.width)


def _constant(feature: Any) -> bool:
    """Whether every value of a number is the same one: a line says it, no chart."""
    buckets = number_buckets(feature)
    return len(buckets) == 1 and buckets[0][0] == buckets[0][1]


def _number(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], feature: Any) -> None:
    _title(pen, p, summary)
    x, top = p.box.x, p.box.y + LINE
    pen.rectangle((x, top, x + p.box.width - 1, top + CHART - 1), fill=_FAINT)
    buckets = number_buckets(feature)
    if not buckets:
        fonts.write(pen, (x + GAP, top + CHART // 2 - LINE // 2), "no values", _GREY, p.box.width)
        return
    most = max(count for _, _, count in buckets)
    width = p.box.width // len(buckets)
    for i, (_, _, count) in enumerate(buckets):
        height = bar_height(count, most, CHART)
        if height:
            pen.rectangle((x + i * width + 1, top + CHART - height, x + (i + 1) * width - 2, top + CHART - 1), fill=NUMBER)
    below = top + CHART + 2
    low, high = f"{buckets[0][0]:.4g}", f"{buckets[-1][1]:.4g}"
    fonts.write(pen, (x, below), low, _GREY, p.box.width / 2)
    fonts.write(pen, (x + p.box.width - fonts.length(pen, high), below), high, _GREY, p.box.width / 2)
    about = f"mean {summary['mean']:.4g}, std {summary['std']:.4g}, median {summary['median']:.4g}, zeros {summary['zeros']}"
    fonts.write(pen, (x, below + LINE), about, INK, p.box.width)


def number_buckets(feature: Any) -> list[tuple[float, float, float]]:
    """A number's standard histogram: (low, high, count) a bucket."""
    histogram = next((h for h in feature.num_stats.histograms if h.type == h.STANDARD), None)
    return [] if histogram is None else [(b.low_value, b.high_value, b.sample_count) for b in histogram.buckets]


def pixel_histograms(feature: Any) -> dict[int, dict[str, list[float]]]:
    """Per channel count, each channel's 256-level pixel histogram (custom ``pixel_histogram/3ch/R``),
    in the order a picture's cell draws them."""
    found: dict[int, dict[str, list[float]]] = {}
    for custom in feature.custom_stats:
        parts = custom.name.split("/")
        if len(parts) == 3 and parts[0] == "pixel_histogram" and parts[1].endswith("ch"):
            found.setdefault(int(parts[1][:-2]), {})[parts[2]] = [b.sample_count for b in custom.histogram.buckets]
    return dict(sorted(found.items()))


def _picture(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], feature: Any) -> None:
    formats = ", ".join(f"{name} {n}" for name, n in summary["formats"].items())
    _title(pen, p, summary, f": {formats}")
    x, y = p.box.x, p.box.y + LINE
    for channels in pixel_histograms(feature).values():
        for tag, counts in channels.items():
            fonts.write(pen, (x, y + STRIP // 2 - LINE // 2), tag, CHANNEL.get(tag, INK), 12)
            left = x + 14
            pen.rectangle((left, y, left + LEVELS - 1, y + STRIP - 1), fill=_FAINT)
            most = max(counts, default=0)
            for level, count in enumerate(counts[:LEVELS]):
                height = bar_height(count, most, STRIP)
                if height:
                    pen.line((left + level, y + STRIP - height, left + level, y + STRIP - 1), fill=CHANNEL.get(tag, INK))
            y += STRIP + 2
    lo, avg, hi = summary["bytes"]
    if not summary["pixels"]:
        fonts.write(pen, (x, y), "pixels not measured: passed through undecoded, or shard files", _GREY, p.box.width)
        fonts.write(pen, (x, y + LINE), f"{lo}-{hi} bytes, {avg:.0f} on average", INK, p.box.width)
        return
    fonts.write(pen, (x, y), f"pixels of {summary['pixels_measured']} pictures; Normalize on 0-1:", INK, p.box.width)
    for names, px in summary["pixels"].items():
        y += LINE
        mean = ", ".join(f"{m:.3f}" for m in px["mean_01"])
        std = ", ".join(f"{s:.3f}" for s in px["std_01"])
        fonts.write(pen, (x, y), f"{names} mean ({mean})", INK, p.box.width)
        fonts.write(pen, (x, y + LINE), f"{' ' * len(names)} std ({std})", INK, p.box.width)
        y += LINE


def _constant_line(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], feature: Any) -> None:
    missing = f", {summary['missing']} missing" if summary["missing"] else ""
    line = f"{p.key} = {summary['min']:.6g} in all {summary['count']} records{missing}"
    fonts.write(pen, (p.box.x, p.box.y), line, INK, p.box.width)


def _text(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], feature: Any) -> None:
    about = "about " if summary["unique_estimated"] else ""
    _title(pen, p, summary, f": {about}{summary['unique']} distinct")
    top = summary["top"][:TOP_SHOWN]
    name_width, count_width = 110, 48
    room = p.box.width - name_width - count_width
    most = max((n for _, n in top), default=0)
    y = p.box.y + LINE
    for value, n in top:
        fonts.write(pen, (p.box.x, y), str(value), INK, name_width - 6)
        length = bar_height(n, most, room)
        left = p.box.x + name_width
        if length:
            pen.rectangle((left, y + 2, left + length - 1, y + ROW - 2), fill=TEXT)
        fonts.write(pen, (left + length + 3, y), str(n), _GREY, count_width)
        y += ROW
    lo, hi = summary["values_per_record"]
    per = "1 value" if lo == hi == 1 else f"{lo} values" if lo == hi else f"{lo}-{hi} values"
    fonts.write(pen, (p.box.x, y), f"average length {summary['avg_length']:.1f}; {per} a record", _GREY, p.box.width)


def _bytes(pen: ImageDraw.ImageDraw, p: Placed, summary: Mapping[str, Any], feature: Any) -> None:
    _title(pen, p, summary)
    lo, avg, hi = summary["bytes"]
    fonts.write(pen, (p.box.x, p.box.y + LINE), f"{lo}-{hi} bytes, {avg:.0f} on average", INK, p.box.width)


_CELLS = {"constant": _constant_line, "number": _number, "picture": _picture, "text": _text, "bytes": _bytes}


def class_bar_room(box: Box) -> tuple[int, int]:
    """Where a class panel's bars start (x) and how long the longest is."""
    return box.x + 160, box.width - 160 - 90


def _classes(pen: ImageDraw.ImageDraw, p: Placed, counts: Mapping[str, int]) -> None:
    records = sum(counts.values())
    fonts.write(pen, (p.box.x, p.box.y), f"{p.key}: {records} records in {len(counts)} classes (the manifest's counts)", INK, WIDTH)
    left, room = class_bar_room(p.box)
    most = max(counts.values(), default=0)
    y = p.box.y + LINE
    shown = list(counts.items())[:CLASSES_SHOWN]
    for i, (name, n) in enumerate(shown):
        fonts.write(pen, (p.box.x, y), name, INK, left - p.box.x - 8)
        length = bar_height(n, most, room)
        if length:
            pen.rectangle((left, y + 1, left + length - 1, y + ROW - 2), fill=colour(i + 1))
        share = f"{n}  ({100 * n / records:.1f}%)" if records else "0"
        fonts.write(pen, (left + length + 4, y), share, INK, 90)
        y += ROW
    if len(counts) > len(shown):
        fonts.write(pen, (p.box.x, y), f"... and {len(counts) - len(shown)} more classes", _GREY, WIDTH)
