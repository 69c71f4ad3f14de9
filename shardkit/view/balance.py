"""``shardkit preview OUT --labels -o balance.png``: label balance as a picture.

Per split and label feature: a bar per class (its record count), and how evenly the classes are
spread over the shards: each shard's class mix as a stacked column next to the split's, and the
most lopsided shard's distance from the split's mix beside what shards drawn at random would show
(``inspect``'s ``label_balance``). A shardkit output's counts come from its manifest; plain
TFRecord files (or an old manifest without counts) are read, counting their class-like int64
features. Pillow only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PIL import Image, ImageDraw

from shardkit.check.inspection import balanced, label_balance
from shardkit.errors import ShardkitError
from shardkit.features.registry import of_entry
from shardkit.formats.containers import registry
from shardkit.formats.example_proto import INT64, DecodeError, decode_example
from shardkit.output.found import Output, expand
from shardkit.view import fonts
from shardkit.view.records import LABEL_NAMES
from shardkit.view.sheet import BACKGROUND, GAP, INK, LINE, colour

WIDTH = 960
ROW = 14  # one class's bar
COLUMN = 64  # the height of the stacked shard columns
MAX_CLASSES = 64  # as the build counts: a feature with more values is not a label
SHARD_WIDTH = 16  # the widest a shard's column is drawn
_FAINT = (225, 225, 225)

Wanted = Callable[[str, str, Sequence[Any]], bool]  # (key, dtype, values): is this a label?


@dataclasses.dataclass(frozen=True)
class Counts:
    """One label feature of one split: record counts per class, in total and per shard."""

    where: str  # the output or "files"
    split: str
    key: str
    classes: list[str]  # in the order drawn: the manifest's class order, else numeric or by name
    totals: dict[str, int]
    shards: list[tuple[str, dict[str, int]]]  # (shard name, counts)

    def balance(self) -> dict[str, Any] | None:
        """``inspect``'s label balance of this feature: the most lopsided shard, and by chance."""
        found = label_balance(self.split, {self.key: self.totals}, [(n, {self.key: c}) for n, c in self.shards])
        return found[0] if found else None


def balance_sheet(paths: Sequence[str], *, compression: str = "auto") -> Image.Image:
    """The label balance picture of every split and label feature ``paths`` hold."""
    counts = label_counts(paths, compression=compression)
    heights = [_panel_height(c) for c in counts]
    sheet = Image.new("RGB", (WIDTH, GAP + LINE + GAP + sum(heights) + GAP), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    fonts.write(draw, (GAP, GAP), f"label balance: {', '.join(map(str, paths))}", INK, WIDTH - 2 * GAP)
    y = GAP + LINE + GAP
    for c, height in zip(counts, heights, strict=True):
        _panel(draw, c, y)
        y += height
    return sheet


def label_counts(paths: Sequence[str], *, compression: str = "auto") -> list[Counts]:
    """Every (split, label feature) with counts: from manifests, else from the records."""
    targets = expand(paths)
    found: list[Counts] = []
    for output in targets.outputs:
        found.extend(_from_manifest(output) if _has_counts(output) else _from_records(output, compression))
    if targets.files:
        shards = [(path.rsplit("/", 1)[-1], path) for path in targets.files]
        found.extend(_counted("files", "(files)", shards, compression, _labelish, {}))
    if not found:
        why = (
            "the manifest counts no labels (no class_name or int64 feature)"
            if targets.outputs and not targets.files
            else (f"no record has a single int64 feature named like a label ({', '.join(LABEL_NAMES)}) with at most {MAX_CLASSES} values")
        )
        raise ShardkitError(f"{', '.join(map(str, paths))}: no label counts to draw: {why}")
    return found


def _has_counts(output: Output) -> bool:
    """Whether the build counted labels (manifests before label counts have no ``labels``)."""
    return all(info.labels is not None for info in output.manifest.splits.values())


def _from_manifest(output: Output) -> list[Counts]:
    classes = output.manifest.classes
    found = []
    for split, info in output.manifest.splits.items():
        for key, totals in balanced(output.manifest, info.labels).items():
            if not totals:  # no records
                continue
            shards = [(s.name, dict(s.labels.get(key) or {})) for s in info.shards]
            found.append(Counts(output.path, split, key, _ordered(totals, classes.get(key)), dict(totals), shards))
    return found


def _from_records(output: Output, compression: str) -> list[Counts]:
    roles = {f["key"]: of_entry(f).label_role for f in output.manifest.schema}  # features the manifest does not describe: none

    def wanted(key: str, dtype: str, values: Sequence[Any]) -> bool:
        role = roles.get(key, "never")
        return role == "always" or (role == "by_name" and _labelish(key, dtype, values))

    found = []
    for split, info in output.manifest.splits.items():
        shards = [(s.name, output.shard_path(s)) for s in info.shards]
        found.extend(_counted(output.path, split, shards, compression, wanted, output.manifest.classes))
    return found


def _labelish(key: str, dtype: str, values: Sequence[Any]) -> bool:
    return dtype == INT64 and len(values) == 1 and any(name in key.lower() for name in LABEL_NAMES)


def _counted(
    where: str, split: str, shards: list[tuple[str, str]], compression: str, wanted: Wanted, classes: Mapping[str, Sequence[str]]
) -> list[Counts]:
    """Count the label values of every record of ``shards`` ((name, path)): the keys ``wanted``
    says are labels, named by ``classes`` where they have names."""
    per_shard: list[tuple[str, dict[str, dict[str, int]]]] = []
    dropped: set[str] = set()
    for name, path in shards:
        counts: dict[str, dict[str, int]] = {}

        def count(index: int, offset: int, payload: memoryview, counts: dict[str, dict[str, int]] = counts) -> None:
            try:
                features = decode_example(bytes(payload))
            except DecodeError:
                return
            for key, (dtype, values) in features.items():
                if key not in dropped and wanted(key, dtype, values):
                    names, value = classes.get(key), values[0]
                    label = names[value] if names and isinstance(value, int) and 0 <= value < len(names) else str(value)
                    tally = counts.setdefault(key, {})
                    tally[label] = tally.get(label, 0) + 1
                    if len(tally) > MAX_CLASSES:
                        dropped.add(key)

        result = registry.of_file(path, compression).walk(path, count, checksum=False)
        if not result.ok:
            raise ShardkitError(f"{path}: {result.describe_error()} (shardkit verify {path} tells more)")
        per_shard.append((name, counts))
    found = []
    for key in sorted({key for _, counts in per_shard for key in counts} - dropped):
        rows = [(name, counts.get(key, {})) for name, counts in per_shard]
        totals: dict[str, int] = {}
        for _, tally in rows:
            for label, n in tally.items():
                totals[label] = totals.get(label, 0) + n
        found.append(Counts(where, split, key, _ordered(totals, classes.get(key)), totals, rows))
    return found


def _ordered(totals: Mapping[str, int], names: Sequence[str] | None) -> list[str]:
    if names:
        return list(names) + sorted(set(totals) - set(names))  # a class with no record shows as none
    numeric = all(v.lstrip("-").isdigit() for v in totals)
    return sorted(totals, key=lambda v: (int(v), v) if numeric else (0, v))


# --- drawing ----------------------------------------------------------------------------------------


def _panel_height(c: Counts) -> int:
    return LINE + GAP + len(c.classes) * ROW + GAP + LINE + COLUMN + GAP + LINE + 3 * GAP


def _panel(draw: ImageDraw.ImageDraw, c: Counts, y: int) -> None:
    records = sum(c.totals.values())
    head = f"{c.where} [{c.split}] {c.key}: {records} records, {len(c.classes)} classes, {len(c.shards)} shards"
    fonts.write(draw, (GAP, y), head, INK, WIDTH - 2 * GAP)
    y += LINE + GAP
    name_width = min(220, max(int(fonts.length(draw, n)) for n in c.classes) + 8)
    most = max(c.totals.values(), default=1) or 1
    bar_room = WIDTH - 2 * GAP - name_width - 90
    for i, name in enumerate(c.classes):
        n = c.totals.get(name, 0)
        fonts.write(draw, (GAP, y), name, INK, name_width - 8)
        length = max(1, round(bar_room * n / most)) if n else 0
        if length:
            draw.rectangle((GAP + name_width, y + 1, GAP + name_width + length, y + ROW - 3), fill=colour(i + 1))
        share = f"{n}  ({100 * n / records:.1f}%)" if records else "0"
        fonts.write(draw, (GAP + name_width + length + 4, y), share, INK, WIDTH)
        y += ROW
    y += GAP
    fonts.write(draw, (GAP, y), "class mix: the split's, then each shard's", INK, WIDTH)
    y += LINE
    _column(draw, GAP, y, SHARD_WIDTH, c.classes, c.totals)
    room = WIDTH - 2 * GAP - SHARD_WIDTH - GAP
    width = max(1, min(SHARD_WIDTH, room // max(1, len(c.shards))))
    shown = c.shards[: room // width]
    x = GAP + SHARD_WIDTH + GAP
    for _, tally in shown:
        _column(draw, x, y, width, c.classes, tally)
        x += width
    y += COLUMN + GAP
    fonts.write(draw, (GAP, y), _verdict(c, len(shown)), INK, WIDTH - 2 * GAP)


def _column(draw: ImageDraw.ImageDraw, x: int, y: int, width: int, classes: list[str], tally: dict[str, int]) -> None:
    """One stacked column: each class's share of ``tally``, top to bottom in class order."""
    total = sum(tally.values())
    if not total:
        draw.rectangle((x, y, x + width - 1, y + COLUMN - 1), fill=_FAINT)
        return
    top, running = y, 0
    for i, name in enumerate(classes):
        running += tally.get(name, 0)
        bottom = y + round(COLUMN * running / total)
        if bottom > top:
            draw.rectangle((x, top, x + width - 1, bottom - 1), fill=colour(i + 1))
        top = bottom


def _verdict(c: Counts, shown: int) -> str:
    more = f" (the first {shown} of {len(c.shards)} shards drawn)" if shown < len(c.shards) else ""
    found = c.balance()
    if found is None:
        return "no per-shard counts" + more
    return (
        f"most lopsided shard: {found['shard']}, {found['largest_deviation']:.2f} from the split's mix"
        f" (shards drawn at random: about {found['by_chance']:.2f}; 0 = same mix, 1 = nothing in common){more}"
    )
