"""Augmentations before a build: a few entries, each as the original and its augmented copies.

The inputs are read and checked as the build reads them (the build's ``prepare``, then
``checked_rows``: a bad line or an unknown config key is the build's own one-line error), and the
class lists are collected from every row, so class ids and names are the build's. Only the chosen
entries' files are opened. Their records come from the build's ``RecordMaker``, with the config's
augment section asking for ``copies`` copies and the original: copy ``c`` is seeded by
``record_seed(seed, identity, c)`` whatever the shard, so for ``c`` below the config's copies the
pixels are those the build writes.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from shardkit.errors import EntryError, ShardkitError, UsageError
from shardkit.features.drawn import Overlay
from shardkit.formats import image_headers
from shardkit.formats.example_proto import decode_example
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.entries import Entry, checked_rows, to_entry
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.splits import SplitInput
from shardkit.pipeline.options import check_inputs
from shardkit.pipeline.prepare import prepare
from shardkit.pipeline.shard.records import RecordMaker
from shardkit.storage.boundary import Boundary
from shardkit.view import sheet
from shardkit.view.records import decode_mask, decode_picture

MAX_COPIES = 16  # copies drawn beside an original: more would not fit a readable row
MAX_ENTRIES = 64


@dataclasses.dataclass(frozen=True)
class Record:
    """One record of a previewed entry, as the build would serialize it, and decoded."""

    copy: int  # -1: the original; then 0, 1, ...: the augmented copies, as ``record_seed`` numbers them
    data: bytes  # the serialized tf.train.Example
    features: dict[str, tuple[str, list[Any]]]  # key -> (dtype, values), as ``decode_example`` gives them
    pixels: dict[str, np.ndarray]  # image and mask features, decoded (masks keep their class values)


@dataclasses.dataclass(frozen=True)
class PreviewEntry:
    split: str
    source: str  # the index file (or folder root) and line the entry came from
    line: int
    identity: str  # what seeds its records, and its source_id
    records: tuple[Record, ...]  # the original, then the copies


@dataclasses.dataclass(frozen=True)
class AugmentationPreview:
    config: Config  # as the build resolves it: source_id added, class lists filled
    entries: tuple[PreviewEntry, ...]
    copies: int  # augmented copies shown per entry
    built_copies: int | None  # the copies the build makes (None: the config does not augment)
    keep_original: bool  # whether the build writes the original too
    seed: int


def augmentation_records(
    indexes: Sequence[str | Path] = (),
    *,
    config: Config | str | Path | None = None,
    from_folder: str | Path | None = None,
    split: str | None = None,
    ignore: Sequence[str] = (),
    entries: int = 6,
    copies: int = 4,
    seed: int = 0,
    full: bool = True,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    allow_schemes: Sequence[str] = (),
) -> AugmentationPreview:
    """``entries`` entries spread evenly over the inputs (in input order, splits one after the
    other, first and last included), each with its original record and ``copies`` augmented ones,
    made by the build's own code with ``seed`` (``image_root``, and what it may read, as the
    build's). Raises the build's errors for bad inputs."""
    check_inputs(indexes, from_folder)
    if entries < 1:
        raise UsageError("-n must be at least 1")
    if entries > MAX_ENTRIES:
        raise UsageError(f"-n must be at most {MAX_ENTRIES} (a sheet of more is not a preview)")
    if not 0 <= copies <= MAX_COPIES:
        raise UsageError(f"--copies must be between 0 and {MAX_COPIES}")
    # The build's front half, with the preview's two differences: --split picks the split to show, as
    # the file names say (the build's --split renames every input's), and a config's own source_id is
    # kept (as a build with --no-source-id keeps it) rather than refused.
    prepared = prepare(
        indexes, config=config, from_folder=from_folder, only_split=split, ignore=ignore, source_id=False, image_root=image_root,
        allow_outside_root=allow_outside_root,
    )  # fmt: skip
    splits, cfg = prepared.splits, prepared.config
    if not any(spec.key == "source_id" for spec in cfg.features):
        cfg = cfg.with_source_id()
    if not any(spec.kind.leads for spec in cfg.features):
        raise ShardkitError("the config has no image feature: there is nothing to preview")
    chosen, classes = _choose(splits, cfg, entries)
    if not chosen:
        raise ShardkitError("the inputs hold no entries")
    cfg = cfg.with_classes(classes)
    augment = cfg.augment
    shown = cfg if augment is None else _with_copies(cfg, copies)
    rule = Boundary({s.path: s.root for part in splits.values() for s in part.sources}, allow_schemes, allow_outside_root)
    maker = RecordMaker(shown, seed, rule)
    fallback = None if augment is None or copies <= augment.copies else RecordMaker(_with_copies(cfg, augment.copies), seed, rule)
    previewed = []
    for split_name, row in chosen:
        entry = to_entry(row, cfg, splits[split_name].sources[_position(splits[split_name], row)].folder)
        try:
            records = _records(maker, entry, shown, full)
        except EntryError:
            if fallback is None:
                raise
            # a copy beyond those the build makes failed (a random transform's impossible draw):
            # what the build writes is still shown
            records = _records(fallback, entry, shown, full)
        previewed.append(PreviewEntry(split_name, entry.source, entry.line, entry.identity, records))
    return AugmentationPreview(
        config=cfg,
        entries=tuple(previewed),
        copies=copies if augment is not None else 0,
        built_copies=augment.copies if augment is not None else None,
        keep_original=augment is None or augment.keep_original,
        seed=seed,
    )


def augmentation_sheet(
    indexes: Sequence[str | Path] = (),
    *,
    config: Config | str | Path | None = None,
    from_folder: str | Path | None = None,
    split: str | None = None,
    ignore: Sequence[str] = (),
    entries: int = 6,
    copies: int = 4,
    seed: int = 0,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    allow_schemes: Sequence[str] = (),
) -> Image.Image:
    """The contact sheet of ``augmentation_records``: one row per entry, the original then its
    copies; originals alone (a config with no augment section) in a grid."""
    preview = augmentation_records(
        indexes, config=config, from_folder=from_folder, split=split, ignore=ignore, entries=entries, copies=copies, seed=seed, full=False,
        image_root=image_root, allow_outside_root=allow_outside_root, allow_schemes=allow_schemes,
    )  # fmt: skip
    rows = sheet_rows(preview)
    if len(rows) > 1 and all(len(row) == 1 for row in rows):  # originals alone (no augment section): a grid, not a column
        width = math.ceil(math.sqrt(len(rows)))
        rows = [[row[0] for row in rows[i : i + width]] for i in range(0, len(rows), width)]
    return sheet.render(rows, title=title(preview))


def sheet_rows(preview: AugmentationPreview) -> list[list[sheet.Tile]]:
    """One row of tiles per entry: each record's images (the first mask over the first image),
    captioned with which record it is, its labels, and on the first tile the entry's identity."""
    cfg = preview.config
    images = [spec.key for spec in cfg.features if spec.kind.leads]
    masks = [spec.key for spec in cfg.features if spec.kind.follows_lead]
    rows = []
    for entry in preview.entries:
        row: list[sheet.Tile] = []
        for record in entry.records:
            name = "original" if record.copy < 0 else f"copy {record.copy + 1}"
            labels = _labels(cfg, record)
            first = images[0]
            # Masks share the first image's size (the build checks it): each is shown over it.
            pictures = [(first, masks[0] if masks else None), *((key, None) for key in images[1:]), *((first, key) for key in masks[1:])]
            for image_key, mask_key in pictures:
                shown = [k for k in (image_key, mask_key) if k is not None]
                caption = [f"{name}: {' + '.join(shown)}" if len(pictures) > 1 else name, *labels]
                if not row:
                    caption.append(entry.identity)
                mask = record.pixels[mask_key] if mask_key is not None else None
                image = record.pixels[image_key]
                drawn = _objects(cfg, record, (int(image.shape[1]), int(image.shape[0]))) if image_key == first else []
                row.append(sheet.Tile(image, mask, caption, drawn))
        rows.append(row)
    return rows


def title(preview: AugmentationPreview) -> str:
    counts: dict[str, int] = {}
    for entry in preview.entries:
        counts[entry.split] = counts.get(entry.split, 0) + 1
    where = ", ".join(f"{name} ({n})" if len(counts) > 1 else name for name, n in counts.items())
    config = os.path.basename(preview.config.source) if preview.config.source else "inferred"
    if preview.built_copies is None:
        shown = "originals only (the config has no augment section)"
    else:
        built = f"the build makes {preview.built_copies}" + ("" if preview.keep_original else ", without the original")
        shown = f"original + {preview.copies} copies ({built})"
    return f"shardkit preview: {len(preview.entries)} entries of {where}, {shown}, seed {preview.seed}, config {config}"


def _choose(splits: dict[str, SplitInput], cfg: Config, count: int) -> tuple[list[tuple[str, Row]], dict[str, set[str]]]:
    """Every row checked as planning checks it (the first bad one raises), the class names of
    each open class_name feature collected, and ``count`` rows kept, evenly spaced over all rows.

    Memory stays a few rows whatever the inputs' size: every ``stride``-th row is kept and, when
    more than ``4 * count`` are held, every other one dropped and the stride doubled; the rows
    nearest to the evenly spaced positions are then picked from those.
    """
    classes = cfg.open_classes()
    kept: list[tuple[str, Row]] = []
    stride, seen, limit = 1, 0, 4 * max(count, 16)
    errors: list[EntryError] = []  # stays empty: with "fail" the first bad row raises
    for name, split_input in splits.items():
        for row in checked_rows(split_input.rows, cfg, "fail", errors, classes):
            if seen % stride == 0:
                kept.append((name, row))
                if len(kept) > limit:
                    kept = kept[::2]
                    stride *= 2
            last = (name, row)
            seen += 1
    if seen <= count:
        return kept, classes
    if count == 1:
        return kept[:1], classes
    inner = (min(len(kept) - 1, round(i * (seen - 1) / (count - 1) / stride)) for i in range(count - 1))
    picks = [kept[i] for i in dict.fromkeys(inner)]  # in order, without repeats
    return [*picks, last], classes


def _with_copies(cfg: Config, copies: int) -> Config:
    assert cfg.augment is not None
    return dataclasses.replace(cfg, augment=dataclasses.replace(cfg.augment, copies=copies, keep_original=True))


def _position(split_input: SplitInput, row: Row) -> int:
    return next(i for i, s in enumerate(split_input.sources) if s.path == row.source)


def _records(maker: RecordMaker, entry: Entry, cfg: Config, full: bool) -> tuple[Record, ...]:
    try:
        data = maker.records_for(entry)
    except image_headers.ImageProblem as exc:  # as a build's worker reports it
        raise EntryError.of_entry(entry.source, entry.line, entry.identity, str(exc)) from None
    # Each picture's key -> whether it holds class values (a mask, drawn over its image) or colours.
    pictures = {spec.key: spec.kind.class_values for spec in cfg.features if spec.kind.picture}
    out = []
    for copy, record in zip(maker.copies, data, strict=True):
        features: dict[str, tuple[str, list[Any]]] = {key: (dtype, list(values)) for key, (dtype, values) in decode_example(record).items()}
        # full: the stored pixels, exactly (what a test compares with the build)
        pixels = {key: _pixels(features[key][1][0], mask) for key, mask in pictures.items()} if full else _thumbnails(features, pictures)
        out.append(Record(copy, record, features, pixels))
    return tuple(out)


def _pixels(data: bytes, mask: bool) -> np.ndarray:
    """A stored image's pixels: a mask's class values as they are, an image as L, RGB or RGBA."""
    with Image.open(io.BytesIO(data)) as im:
        if mask and im.mode in ("1", "L", "P", "I;16"):
            return np.asarray(im).astype(np.uint8) if im.mode == "1" else np.asarray(im)
        if im.mode not in ("L", "RGB", "RGBA"):  # raw files keep their own mode
            return np.asarray(im.convert("RGBA" if "transparency" in im.info or "A" in im.mode else "RGB"))
        return np.asarray(im)


def _thumbnails(features: dict[str, tuple[str, list[Any]]], pictures: dict[str, bool]) -> dict[str, np.ndarray]:
    """Images decoded as thumbnails (JPEG at a fraction of its size at once), masks shrunk alike
    by nearest neighbour: a sheet of 12-megapixel photos costs thumbnails, not full decodes."""
    out: dict[str, np.ndarray] = {}
    first = next((key for key, mask in pictures.items() if not mask), None)
    size = shown = None
    if first is not None:
        out[first], size = decode_picture(features[first][1][0])
        shown = (int(out[first].shape[1]), int(out[first].shape[0]))
    for key, mask in pictures.items():
        if key == first:
            continue
        data = features[key][1][0]
        if mask and size is not None and shown is not None:
            shrunk = decode_mask(data, size, shown)
            out[key] = shrunk if shrunk is not None else _pixels(data, True)
        else:
            out[key] = decode_picture(data)[0]
    return out


def _objects(cfg: Config, record: Record, shown: tuple[int, int]) -> list[Overlay]:
    """What each feature draws over the record's first image (its objects), as its kind draws them."""
    drawn = (spec.kind.overlay(spec.key, record.features, spec.classes, shown) for spec in cfg.features)
    return [overlay for overlay in drawn if overlay is not None]


def _labels(cfg: Config, record: Record) -> list[str]:
    """Each feature's label as its kind captions it (a class name, a single integer); named
    ``key: value`` where there are several (tiles are narrow: one label is shown bare)."""
    out = []
    for spec in cfg.features:
        values = record.features.get(spec.key, ("", []))[1]
        caption = spec.kind.caption(values, spec.classes) if values else None
        if caption is not None:
            out.append((spec.key, caption))
    return [value if len(out) == 1 else f"{key}: {value}" for key, value in out]
