"""``shardkit preview OUT -o records.png``: a reproducible random sample of records, decoded, on a sheet.

The sample is ``random.Random(seed).sample`` over the records' numbers, so it needs the counts
first: a shardkit output's come from its manifest, and its records are read through the ``.idx``
files (one ranged read each); a shard without an index, and any other TFRecord file (counted by a
framing walk), is walked only up to its last chosen record. Which features are pictures comes from
the manifest's schema, or in a foreign file from what the bytes look like (``inspect``'s sniffing):
the first JPEG or PNG is the image, and a single-channel PNG of its size under a name like
``mask``, ``label`` or ``segmentation`` is overlaid as a mask. No TensorFlow.
"""

from __future__ import annotations

import bisect
import dataclasses
import io
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from shardkit.errors import ShardkitError, UsageError
from shardkit.features.drawn import Overlay
from shardkit.features.registry import KINDS, of_entry
from shardkit.formats import image_codec, image_headers
from shardkit.formats.containers import registry
from shardkit.formats.example_proto import BYTES, INT64, DecodeError, decode_example
from shardkit.formats.record_survey import sniff
from shardkit.output.found import Output, expand
from shardkit.read.random_access import ShardReader
from shardkit.view.sheet import Tile, render

MAX_COUNT = 256  # past this a sheet's tiles are too small to see anything
THUMBNAIL = 512  # the longest side a decoded picture is kept at: tiles are drawn at most 160 px high
MASK_NAMES = ("mask", "label", "segmentation")
LABEL_NAMES = ("label", "class", "category")
IDENTITY_KEYS = ("source_id", "image/source_id", "image/filename", "filename", "id")
_GREY = 200  # a record with no picture shows a blank tile

Features = Mapping[str, tuple[str, Sequence[Any]]]


@dataclasses.dataclass(frozen=True)
class Record:
    """One sampled record: the file it is in, its number there, its Example features."""

    file: str
    number: int
    features: Features
    output: Output | None = None
    problem: str | None = None  # not a tf.train.Example
    where: str = ""  # the caption saying where it is: "shard 3 #17", "file.tfrecord #17"


@dataclasses.dataclass(frozen=True)
class Sample:
    records: list[Record]  # in file order, then record order
    total: int  # how many records they were drawn from
    description: str  # what was sampled, for the sheet's title


@dataclasses.dataclass(frozen=True)
class RecordTiles:
    tiles: list[Tile]  # one per record of ``sample``, in its order
    sample: Sample


@dataclasses.dataclass(frozen=True)
class _Source:
    file: str
    records: int
    output: Output | None = None
    split: str | None = None
    first: int = 0  # the number of the file's first record within its split
    shard: int | None = None  # its place among the split's shards


def record_sheet(
    paths: Sequence[str], *, split: str | None = None, count: int = 16, seed: int = 0, columns: int | None = None
) -> Image.Image:
    """The sheet of ``count`` records drawn at random (``seed``) from ``split`` (default: each
    output's first split; plain shard files: all their records), masks overlaid, captions
    naming the record, its classes and where it is."""
    if columns is not None and columns < 1:
        raise UsageError(f"--columns {columns}: a sheet has at least one column")
    drawn = record_tiles(paths, split=split, count=count, seed=seed)
    tiles = drawn.tiles
    width = columns or math.ceil(math.sqrt(len(tiles)))
    rows = [tiles[i : i + width] for i in range(0, len(tiles), width)]
    return render(rows, title=drawn.sample.description)


def record_tiles(paths: Sequence[str], *, split: str | None = None, count: int = 16, seed: int = 0) -> RecordTiles:
    """The sampled records as decoded tiles (images at most ``THUMBNAIL`` px on a side)."""
    sample = sample_records(paths, split=split, count=count, seed=seed)
    drawn = [_tile(record) for record in sample.records]
    if not any(found for _, found in drawn):
        reasons = {r.problem for r in sample.records if r.problem}
        why = f" ({'; '.join(sorted(reasons))})" if reasons else " (no bytes feature holds a JPEG or PNG)"
        raise ShardkitError(f"{', '.join(map(str, paths))}: no images in these records{why}")
    return RecordTiles([tile for tile, _ in drawn], sample)


def sample_records(paths: Sequence[str], *, split: str | None = None, count: int = 16, seed: int = 0, compression: str = "auto") -> Sample:
    """``count`` records drawn at random, reproducibly with ``seed``, reading only what they need."""
    if not 1 <= count <= MAX_COUNT:
        raise UsageError(f"-n {count}: a sheet shows 1 to {MAX_COUNT} records")
    targets = expand(paths)
    if split is not None and not targets.outputs:
        raise UsageError(f"--split {split}: only shardkit outputs have splits; {', '.join(map(str, paths))} are plain shard files")
    sources = _sources(targets.outputs, split) + [_counted(path, compression) for path in targets.files]
    total = sum(s.records for s in sources)
    if not total:
        raise ShardkitError(f"{', '.join(map(str, paths))}: no records to show")
    starts = list(itertools.accumulate((s.records for s in sources), initial=0))
    wanted: dict[int, list[int]] = {}  # source -> record numbers in its file
    for chosen in sorted(random.Random(seed).sample(range(total), min(count, total))):
        i = bisect.bisect_right(starts, chosen) - 1
        wanted.setdefault(i, []).append(chosen - starts[i])
    readers: dict[tuple[str, str], ShardReader | None] = {}
    records = [r for i, numbers in sorted(wanted.items()) for r in _read(sources[i], numbers, readers, compression)]
    splits = sorted({s.split for s in sources if s.split})
    where = ", ".join(map(str, paths)) + (f" [{', '.join(splits)}]" if splits else "")
    return Sample(records, total, f"{where}: {len(records)} of {total} records, seed {seed}")


def _sources(outputs: list[Output], split: str | None) -> list[_Source]:
    sources = []
    for output in outputs:
        splits = output.manifest.splits
        name = split if split is not None else next(iter(splits), "")
        if name not in splits:
            raise ShardkitError(f"{output.path}: no split {name!r} (splits: {', '.join(splits) or 'none'})")
        first = 0
        for k, shard in enumerate(splits[name].shards):
            sources.append(_Source(output.shard_path(shard), shard.records, output, name, first, k))
            first += shard.records
    return sources


def _counted(path: str, compression: str) -> _Source:
    result = registry.of_file(path, compression).walk(path, checksum=False)
    if not result.ok:
        raise ShardkitError(f"{path}: {result.describe_error()} (shardkit verify {path} tells more)")
    return _Source(path, result.records)


def _read(source: _Source, numbers: list[int], readers: dict[tuple[str, str], ShardReader | None], compression: str) -> list[Record]:
    if source.output is not None and source.split is not None:
        key = (source.output.path, source.split)
        if key not in readers:
            try:
                readers[key] = ShardReader(source.output.path, source.split)
            except ShardkitError:  # no .idx files (GZIP shards, or never indexed): walk the shard instead
                readers[key] = None
        reader = readers[key]
        if reader is not None:
            return [_record(source, n, reader.raw(source.first + n)) for n in numbers]
    want = set(numbers)
    found: dict[int, bytes] = {}

    def keep(index: int, offset: int, payload: memoryview) -> None:
        if index in want:
            found[index] = bytes(payload)

    result = registry.of_file(source.file, compression).walk(source.file, keep, limit=max(numbers) + 1, checksum=False)
    if len(found) < len(want):
        raise ShardkitError(f"{source.file}: {result.describe_error() or f'{result.records} records, fewer than the manifest says'}")
    return [_record(source, n, found[n]) for n in numbers]


def _record(source: _Source, number: int, data: bytes) -> Record:
    where = f"shard {source.shard} #{number}" if source.shard is not None else f"{source.file.rsplit('/', 1)[-1]} #{number}"
    try:
        return Record(source.file, number, decode_example(data), source.output, where=where)
    except DecodeError as exc:
        return Record(source.file, number, {}, source.output, f"not a tf.train.Example: {exc}", where)


# --- which features are what, and the tile ---------------------------------------------------------


def roles(record: Record) -> tuple[str | None, str | None]:
    """The keys of the record's image and of the mask drawn over it (None where there is none)."""
    features = record.features
    described = _describing(record)
    if described is not None:
        schema = [f for f in described.manifest.schema if f["key"] in features and features[f["key"]][1]]
        image = next((f["key"] for f in schema if of_entry(f).leads), None)
        mask = next((f["key"] for f in schema if of_entry(f).follows_lead), None)
        return image, mask
    claimed = _drawn_keys(record)  # instance masks are drawn with their objects, not as the record's mask
    pictures = [
        k
        for k, (dtype, values) in features.items()
        if dtype == BYTES and values and sniff(values[0]) in ("jpeg", "png") and k not in claimed
    ]
    masks = [k for k in pictures if any(name in k.lower() for name in MASK_NAMES) and _single_channel(features[k][1][0])]
    images = sorted((k for k in pictures if k not in masks), key=lambda k: ("image" not in k.lower(), k))
    return (images[0] if images else None), (masks[0] if masks and images else None)


def _describing(record: Record) -> Output | None:
    """The record's output where it describes its features (a build's does; a reshard of files
    another tool wrote only infers their schema, so their keys are read as any foreign file's)."""
    return record.output if record.output is not None and record.output.manifest.config.get("features") else None


def captions(record: Record) -> list[str]:
    """The record's identity, its labels (class names where the manifest has them), where it is."""
    features = record.features
    lines = []
    identity = next((k for k in IDENTITY_KEYS if features.get(k, ("", []))[0] == BYTES and features[k][1]), None)
    if identity is not None:
        lines.append(_text(features[identity][1][0]))
    claimed = _drawn_keys(record) if _describing(record) is None else set()  # objects' classes are named on their boxes
    labels = [_label(record, key) for key in sorted(features) if key not in claimed and _is_label(record, key)]
    if labels:
        lines.append(", ".join(labels))
    lines.append(record.where)
    return lines


def _is_label(record: Record, key: str) -> bool:
    dtype, values = record.features[key]
    described = _describing(record)
    if described is not None:
        entry = next((f for f in described.manifest.schema if f["key"] == key), None)
        role = of_entry(entry).label_role if entry is not None else "by_name"
        if role != "by_name":
            return role == "always"
    named = any(name in key.lower() for name in LABEL_NAMES)
    return named and len(values) >= 1 and (dtype == INT64 or (dtype == BYTES and sniff(values[0]) == "text"))


def _label(record: Record, key: str) -> str:
    values = record.features[key][1]
    names = record.output.manifest.classes.get(key) if record.output is not None else None
    shown = [
        names[v] if names and isinstance(v, int) and 0 <= v < len(names) else _text(v) if isinstance(v, bytes) else str(v)
        for v in values[:4]
    ]
    more = f" +{len(values) - 4}" if len(values) > 4 else ""
    return (" ".join(shown) if names else f"{key.rsplit('/', 1)[-1]} {' '.join(shown)}") + more


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _single_channel(data: bytes) -> bool:
    try:
        return image_headers.probe(data).mode in ("L", "P", "1", "I;16", "I")
    except image_headers.ImageProblem:
        return False


def _tile(record: Record) -> tuple[Tile, bool]:
    """The record's tile, and whether it has a picture (one without shows a grey square, so that
    its captions still say what it holds)."""
    lines = captions(record) if not record.problem else [record.problem, record.where]
    blank = np.full((64, 64), _GREY, np.uint8)
    image_key, mask_key = roles(record)
    if image_key is None:
        return Tile(blank, None, ["(no image)", *lines[-2:]]), False
    try:
        image, size = decode_picture(record.features[image_key][1][0])
    except image_headers.ImageProblem as exc:
        return Tile(blank, None, [f"{image_key}: {exc}", *lines[-1:]]), False
    mask = None
    shown = (image.shape[1], image.shape[0])
    if mask_key is not None:
        try:
            mask = decode_mask(record.features[mask_key][1][0], size, shown)
        except image_headers.ImageProblem as exc:
            lines.insert(0, f"{mask_key}: {exc}")
    return Tile(image, mask, lines, objects(record, shown)), True


def _drawn_keys(record: Record) -> set[str]:
    """In a file another tool wrote, the keys of the objects a kind finds there (``P/...``)."""
    prefixes = [key + "/" for kind in KINDS.values() for key in kind.found_in(record.features)]
    return {k for k in record.features if k.startswith(tuple(prefixes))} if prefixes else set()


def objects(record: Record, shown: tuple[int, int]) -> list[Overlay]:
    """What the record's features draw over its picture (objects), found by the manifest's schema
    or, in a file another tool wrote, by each kind from the keys."""
    found: list[Overlay] = []
    described = _describing(record)
    if described is not None:
        manifest = described.manifest
        kinds = {of_entry(f).feature_key(f): of_entry(f) for f in manifest.schema}
        drawn = [(kind, key, manifest.classes.get(key)) for key, kind in kinds.items()]
    else:
        drawn = [(kind, key, None) for kind in KINDS.values() for key in kind.found_in(record.features)]
    for kind, key, classes in drawn:
        overlay = kind.overlay(key, record.features, classes, shown)
        if overlay is not None:
            found.append(overlay)
    return found


def thumbnail_size(size: tuple[int, int], limit: int = THUMBNAIL) -> tuple[int, int]:
    """(width, height) scaled so that the longer side is at most ``limit``; never enlarged."""
    scale = min(1.0, limit / max(size))
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def decode_picture(data: bytes) -> tuple[np.ndarray, tuple[int, int]]:
    """An image as uint8 (grey or RGB), shrunk to a thumbnail when large, and its size as stored
    (width, height). Small images decode exactly as ``image_codec`` (and TensorFlow) decode them."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            size = im.size
            target = thumbnail_size(size)
            mode = "L" if im.mode in ("L", "1", "I;16", "I", "F") else "RGB"
            if target == size and im.mode not in ("I;16", "I", "F"):
                return image_codec.decode(data, mode), size
            im.draft(mode, target)  # JPEG: decode at a fraction of the size at once
            if im.mode in ("I;16", "I", "F"):  # deep grey: stretched to 8 bits for the eye
                deep = np.asarray(im, dtype=np.float32)
                top = float(deep.max()) or 1.0
                im = Image.fromarray(np.clip(deep * 255 / top, 0, 255).astype(np.uint8), "L")
            shown = im.convert(mode).resize(target, Image.Resampling.LANCZOS) if target != im.size else im.convert(mode)
            return np.asarray(shown), size
    except image_headers.ImageProblem:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise image_headers.ImageProblem(f"cannot decode image ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def decode_mask(data: bytes, size: tuple[int, int], shown: tuple[int, int]) -> np.ndarray | None:
    """A mask's class values at the image's shown size (nearest neighbour: values stay values);
    None when it is not a single-channel mask of the image's ``size``."""
    info = image_headers.probe(data)
    if (info.width, info.height) != size or info.mode not in ("L", "P", "1", "I;16", "I", "RGB", "RGBA"):
        return None
    if info.mode in ("RGB", "RGBA"):  # a colour-coded mask: the sheet numbers its colours
        values = image_codec.decode(data, "RGB")
    elif info.mode in ("L", "P", "1"):
        values = image_codec.decode(data, "L", class_values=True)
    else:
        values = image_codec.decode(data, info.mode)
    if shown == size:
        return values
    return np.asarray(Image.fromarray(values).resize(shown, Image.Resampling.NEAREST))
