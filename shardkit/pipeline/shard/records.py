"""One entry -> its serialized records: load the files, probe, augment, encode ``tf.train.Example``.

The per-record steps of a shard, each a small method, with the running statistics the manifest
gets from every shard: list lengths, image sizes, and how many records carry each label value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from shardkit.formats import image_codec, image_headers
from shardkit.formats.example_proto import FeatureValue, encode_example
from shardkit.pipeline.config import Config, FeatureSpec
from shardkit.pipeline.inputs.entries import Entry
from shardkit.pipeline.plan.arithmetic import record_seed
from shardkit.pipeline.plan.tasks import ShardTask
from shardkit.pipeline.shard.fetch import Fetcher

if TYPE_CHECKING:
    from shardkit.pipeline.shard.reduced_decode import Downscale

MAX_LABEL_VALUES = 64  # an int64 feature with more distinct values than this is not counted as a label


class _Stats:
    """Running min/max of list lengths and image sizes, for the manifest's schema, and per label
    feature (class names, and int64 scalars with few values) how many records carry each value."""

    def __init__(self, config: Config) -> None:
        self.lengths: dict[str, tuple[int, int]] = {}
        self.sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]] = {}
        self.labels: dict[str, dict[str, int] | None] = {f.key: {} for f in config.features if f.kind in ("class_name", "int64")}

    def label(self, key: str, value: str | None) -> None:
        """Count one record's ``value`` of ``key``; None: this value is not a label (a list)."""
        counts = self.labels[key]
        if counts is None:
            return
        if value is None or (value not in counts and len(counts) == MAX_LABEL_VALUES):
            self.labels[key] = None  # too many values, or lists: not a label
            return
        counts[value] = counts.get(value, 0) + 1

    def length(self, key: str, n: int) -> None:
        lo, hi = self.lengths.get(key, (n, n))
        self.lengths[key] = (min(lo, n), max(hi, n))

    def size(self, key: str, height: int, width: int, channels: int) -> None:
        known = self.sizes.get(key)
        if known is not None and known[0] <= height <= known[1] and known[2] <= width <= known[3] and channels in known[4]:
            return  # most records: no new extreme
        if key not in self.sizes:
            self.sizes[key] = (height, height, width, width, (channels,))
            return
        h0, h1, w0, w1, ch = self.sizes[key]
        self.sizes[key] = (min(h0, height), max(h1, height), min(w0, width), max(w1, width), tuple(sorted({*ch, channels})))


class _Loaded:
    """One entry's files read into memory, headers probed, pixels decoded on first need."""

    def __init__(self, entry: Entry, files: list[tuple[int, FeatureSpec]], first_image: str | None, fetcher: Fetcher) -> None:
        self.entry = entry
        self.files: dict[str, bytes] = {}
        self.paths: dict[str, str] = {}
        self.infos: dict[str, image_headers.ImageInfo] = {}
        self.modes: dict[str, str] = {}
        self._arrays: dict[str, Any] = {}
        self._downscaled: dict[str, Any] = {}
        for i, spec in files:
            path = entry.values[i]
            key = spec.key
            self.paths[key] = path
            data = self.files[key] = fetcher.read(path, key)
            if spec.kind == "bytes":
                continue
            try:
                info = self.infos[key] = image_headers.probe(data)
                self.modes[key] = image_codec.stored_mode(info, spec.kind, spec.channels, spec.encoding or "png")
            except image_headers.ImageProblem as exc:
                raise image_headers.ImageProblem(f"{key}: {path}: {exc}") from None
        for _, spec in files:  # after the loop: a config may list a mask before its image
            if spec.kind == "mask" and first_image is not None:
                img, mask = self.infos[first_image], self.infos[spec.key]
                if (img.width, img.height) != (mask.width, mask.height):
                    raise image_headers.ImageProblem(
                        f"mask {spec.key!r} is {mask.width}x{mask.height} but image {first_image!r} is {img.width}x{img.height}"
                    )

    def downscaled(self, spec: FeatureSpec, downscale: Downscale) -> Any:
        """The array with the pipeline's leading downscale applied: a JPEG image decoded shrunk
        where that keeps enough pixels, anything else decoded whole; once per input, for every copy."""
        if spec.key not in self._downscaled:
            info = self.infos[spec.key]
            scale = downscale.decode_scale(info) if spec.kind == "image" else 1
            if scale > 1:
                with _naming(spec.key, self.paths[spec.key]):
                    array = image_codec.decode(self.files[spec.key], self.modes[spec.key], info=info, scale=scale)
                if array.shape[:2] != (info.height, info.width):
                    self._downscaled[spec.key] = downscale.from_reduced(array, info.height, info.width)
                    return self._downscaled[spec.key]
                self._arrays[spec.key] = array  # decoded whole after all (a file the fast decoder declined)
            full = self.array(spec)
            self._downscaled[spec.key] = downscale.image(full) if spec.kind == "image" else downscale.mask(full)
        return self._downscaled[spec.key]

    def array(self, spec: FeatureSpec) -> Any:
        if spec.key not in self._arrays:
            with _naming(spec.key, self.paths[spec.key]):
                data, mode = self.files[spec.key], self.modes[spec.key]
                self._arrays[spec.key] = image_codec.decode(data, mode, spec.kind == "mask", info=self.infos[spec.key])
        return self._arrays[spec.key]


@contextlib.contextmanager
def _naming(key: str, path: str) -> Iterator[None]:
    """Prefix an image problem with the feature and the file it came from."""
    try:
        yield
    except image_headers.ImageProblem as exc:
        raise image_headers.ImageProblem(f"{key}: {path}: {exc}") from None


class RecordMaker:
    """Turns entries into serialized Examples: the per-record steps, each a small method."""

    def __init__(self, task: ShardTask) -> None:
        settings = task.settings
        self.config = settings.config
        self.seed = settings.seed
        self.class_ids = {
            spec.key: {name: i for i, name in enumerate(spec.classes or ())} for spec in self.config.features if spec.kind == "class_name"
        }
        self.augmenter = None
        if self.config.augment is not None and self.config.augment.copies > 0:
            from shardkit.pipeline.shard.augment import Augmenter

            self.augmenter = Augmenter(
                self.config.augment.pipeline,
                [f.key for f in self.config.features if f.kind == "image"],
                [f.key for f in self.config.features if f.kind == "mask"],
                self.config.augment.decode,
            )
        self.stats = _Stats(self.config)
        # What every record needs, worked out once a shard rather than once a record.
        self.file_specs = [(i, f) for i, f in enumerate(self.config.features) if f.kind in ("image", "mask", "bytes")]
        self.first_image = next((f.key for f in self.config.features if f.kind == "image"), None)
        self.fetcher = Fetcher([i for i, _ in self.file_specs])
        self.size_keys = {f.key: (f"{f.key}/height", f"{f.key}/width", f"{f.key}/channels") for f in self.config.features if f.is_image}
        for f in self.config.features:  # one value a record, whatever the input: counted once here
            if f.kind not in ("int64", "float"):
                self.stats.lengths[f.key] = (1, 1)
                for size_key in self.size_keys.get(f.key, ()):
                    self.stats.lengths[size_key] = (1, 1)
        self._labels: list[tuple[str, str | None]] = []
        augment = self.config.augment
        # Which record each of records_for's results is: -1 the original, then the copies.
        self.copies = ([-1] if augment is None or augment.keep_original else []) + list(range(augment.copies if augment else 0))

    def prefetching(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        """A shard's ``entries`` as they come, while the files in buckets of the next ones are
        fetched concurrently (``pipeline.fetch``); local files are read as each entry is made."""
        return self.fetcher.ahead(entries)

    def records_for(self, entry: Entry) -> list[bytes]:
        """All records of one entry, as ``self.copies`` numbers them: the original (if kept or
        not augmenting), then the augmented copies."""
        self._labels = []  # counted once every record of the entry is made: a skipped entry counts nothing
        loaded = _Loaded(entry, self.file_specs, self.first_image, self.fetcher)
        augment = self.config.augment
        out = []
        if augment is None or augment.keep_original:
            out.append(self._example(loaded, None))
        if augment is not None and self.augmenter is not None:
            for copy in range(augment.copies):
                downscale = self.augmenter.downscale
                images = [f for f in self.config.features if f.is_image]
                if downscale is not None:
                    arrays = {f.key: loaded.downscaled(f, downscale) for f in images}
                else:
                    arrays = {f.key: loaded.array(f) for f in images}
                try:
                    augmented = self.augmenter(arrays, record_seed(self.seed, entry.identity, copy))
                except Exception as exc:  # albumentations raises many types for impossible params
                    raise image_headers.ImageProblem(f"augmentation failed: {type(exc).__name__}: {exc}") from None
                out.append(self._example(loaded, augmented))
        for key, value in self._labels:
            self.stats.label(key, value)
        return out

    def _example(self, loaded: _Loaded, augmented: dict[str, Any] | None) -> bytes:
        features: dict[str, tuple[str, FeatureValue]] = {}
        for spec, value in zip(self.config.features, loaded.entry.values, strict=True):
            if spec.is_image:
                self._image_feature(spec, loaded, augmented, features)
            elif spec.kind == "class_name":
                features[spec.key] = ("int64", [self.class_ids[spec.key][value]])
                self._labels.append((spec.key, value))
            elif spec.kind == "bytes":
                features[spec.key] = ("bytes", [loaded.files[spec.key]])
            elif spec.kind == "string":
                features[spec.key] = ("bytes", [value])
            else:
                features[spec.key] = (spec.dtype, value)
                self.stats.length(spec.key, len(value))
                if spec.kind == "int64":
                    self._labels.append((spec.key, str(value[0]) if len(value) == 1 else None))
        return encode_example(features)

    def _image_feature(
        self, spec: FeatureSpec, loaded: _Loaded, augmented: dict[str, Any] | None, out: dict[str, tuple[str, FeatureValue]]
    ) -> None:
        info = loaded.infos[spec.key]
        mode = loaded.modes[spec.key]
        encoding = spec.encoding or "png"
        if augmented is None and image_codec.can_pass_through(info, encoding, mode):
            data, height, width = loaded.files[spec.key], info.height, info.width
        else:
            array = augmented[spec.key] if augmented is not None else loaded.array(spec)
            data = image_codec.encode(array, encoding, spec.quality, spec.zlib_level, mask=spec.kind == "mask")
            height, width = int(array.shape[0]), int(array.shape[1])
        channels = image_codec.channels_of(mode)
        height_key, width_key, channels_key = self.size_keys[spec.key]
        out[spec.key] = ("bytes", [data])
        out[height_key] = ("int64", [height])
        out[width_key] = ("int64", [width])
        out[channels_key] = ("int64", [channels])
        self.stats.size(spec.key, height, width, channels)
