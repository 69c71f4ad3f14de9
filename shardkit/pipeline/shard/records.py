"""One entry -> its serialized records: load the files, probe, augment, encode ``tf.train.Example``.

The per-record steps of a shard, each a small method, counting into the shard's ``stats.Stats``.
``batches`` is the other way to the same records, a chunk of entries at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from shardkit.features.base import Features, FeatureSpec
from shardkit.features.images import size_mismatch
from shardkit.formats import image_codec
from shardkit.formats.example_proto import encode_example
from shardkit.formats.image_headers import ImageInfo, ImageProblem
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.entries import Entry
from shardkit.pipeline.plan.arithmetic import record_seed
from shardkit.pipeline.shard.fetch import Fetcher
from shardkit.pipeline.shard.fingerprints import Fingerprints
from shardkit.pipeline.shard.stats import Stats, file_label, naming
from shardkit.storage.boundary import Boundary

if TYPE_CHECKING:
    from shardkit.pipeline.shard.reduced_decode import Downscale

T = TypeVar("T")


class _Loaded:
    """One entry's files read into memory, pictures' headers probed, pixels decoded on first need,
    and whatever its records share made once (``once``)."""

    def __init__(
        self, entry: Entry, files: list[tuple[int, FeatureSpec]], lead: str | None, fetcher: Fetcher, downscale: Downscale | None
    ) -> None:
        self.entry = entry
        self.lead = lead
        self.downscale = downscale  # the augmentation pipeline's leading downscale, if it is split off
        self.files: dict[str, bytes] = {}
        self.paths: dict[str, str] = {}
        self.specs: dict[str, FeatureSpec] = {}
        self.infos: dict[str, ImageInfo] = {}
        self.modes: dict[str, str] = {}
        self._arrays: dict[str, Any] = {}
        self._downscaled: dict[str, Any] = {}
        self._made: dict[str, Any] = {}
        for i, spec in files:
            path = entry.values[i]
            key = spec.key
            self.specs[key] = spec
            self.paths[key] = file_label(path)
            data = self.files[key] = fetcher.read(path, key, entry.source)
            try:
                stored = spec.kind.stored(spec, data)
            except ImageProblem as exc:
                raise ImageProblem(f"{key}: {self.paths[key]}: {exc}") from None
            if stored is not None:
                self.infos[key], self.modes[key] = stored
        if lead is not None:  # after the loop: a config may list a mask before its image
            for _, spec in files:
                if spec.kind.follows_lead:
                    problem = size_mismatch(spec.key, self.infos[spec.key], lead, self.infos[lead])
                    if problem is not None:
                        raise ImageProblem(problem)

    def stored(self, key: str) -> tuple[ImageInfo, str]:
        return self.infos[key], self.modes[key]

    def once(self, key: str, make: Callable[[], T]) -> T:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]  # type: ignore[no-any-return]

    def pre_augment(self, key: str) -> Any:
        spec = self.specs[key]
        return self.array(spec) if self.downscale is None else self.downscaled(spec, self.downscale)

    def pre_augment_mask(self, mask: Any) -> Any:
        return mask if self.downscale is None else self.downscale.mask(mask)

    def downscaled(self, spec: FeatureSpec, downscale: Downscale) -> Any:
        """The array with the pipeline's leading downscale applied: a JPEG image decoded shrunk
        where that keeps enough pixels, anything else decoded whole; once per input, for every copy."""
        if spec.key not in self._downscaled:
            info = self.infos[spec.key]
            kind = spec.kind
            scale = downscale.decode_scale(info) if kind.shrinks_on_decode else 1
            if scale > 1:
                with naming(spec.key, self.paths[spec.key]):
                    array = image_codec.decode(self.files[spec.key], self.modes[spec.key], info=info, scale=scale)
                if array.shape[:2] != (info.height, info.width):
                    self._downscaled[spec.key] = downscale.from_reduced(array, info.height, info.width)
                    return self._downscaled[spec.key]
                self._arrays[spec.key] = array  # decoded whole after all (a file the fast decoder declined)
            full = self.array(spec)
            self._downscaled[spec.key] = downscale.mask(full) if kind.class_values else downscale.image(full)
        return self._downscaled[spec.key]

    def decoded(self, key: str) -> Any:
        """The picture's pixels if they were decoded whole already (for augmentation), else None."""
        return self._arrays.get(key)

    def array(self, spec: FeatureSpec) -> Any:
        if spec.key not in self._arrays:
            kind = spec.kind
            with naming(spec.key, self.paths[spec.key]):
                data, mode = self.files[spec.key], self.modes[spec.key]
                self._arrays[spec.key] = image_codec.decode(data, mode, kind.class_values, info=self.infos[spec.key])
        return self._arrays[spec.key]


class RecordMaker:
    """Turns entries into serialized Examples: each feature's kind encodes it, record by record.

    Records depend on the config and the seed alone (never on the shard, the worker or the
    order), so a build's worker and a preview make the same bytes from the same entry.
    """

    def __init__(self, config: Config, seed: int, rule: Boundary | None = None) -> None:
        self.config = config
        self.seed = seed
        features = config.features
        self.augmenter = None
        if config.augment is not None and config.augment.copies > 0:
            from shardkit.pipeline.shard.augment import Augmenter

            targets = [(f.key, f.kind.augment_target) for f in features if f.kind.augment_target is not None]
            boxes = config.augment.boxes
            self.augmenter = Augmenter(
                config.augment.pipeline, targets, config.augment.decode, min_visibility=boxes.min_visibility, min_area=boxes.min_area
            )
        self.stats = Stats(config)
        self.fingerprints: Fingerprints | None = None  # set for --duplicates: a row an input
        # What every record needs, worked out once a shard rather than once a record.
        self.file_specs = [(i, f) for i, f in enumerate(features) if f.kind.reads_file]
        self.augmented = [(i, f) for i, f in enumerate(features) if f.kind.augment_target is not None]
        self.downscale = self.augmenter.downscale if self.augmenter is not None else None
        self.lead = next((f.key for f in features if f.kind.leads), None)
        self.fetcher = Fetcher([i for i, _ in self.file_specs], rule)  # rule: what the build may read (None: the defaults)
        self.encoders = [f.kind.encoder(f, self.stats) for f in features]
        for f in features:  # one value a record, whatever the input: counted once here
            self.stats.lengths.update(f.kind.initial_lengths(f))
        self._labels: list[tuple[str, str | None]] = []
        augment = config.augment
        # Which record each of records_for's results is: -1 the original, then the copies.
        self.copies = ([-1] if augment is None or augment.keep_original else []) + list(range(augment.copies if augment else 0))

    def prefetching(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        """A shard's ``entries`` as they come, while the files in buckets of the next ones are
        fetched concurrently (``pipeline.shard.fetch``); local files are read as each entry is made."""
        return self.fetcher.ahead(entries)

    def records_for(self, entry: Entry) -> list[bytes]:
        """All records of one entry, as ``self.copies`` numbers them: the original (if kept or
        not augmenting), then the augmented copies."""
        self._labels = []  # counted once every record of the entry is made: a skipped entry counts nothing
        self.stats.statistics.hold()  # ... and so are its values
        loaded = _Loaded(entry, self.file_specs, self.lead, self.fetcher, self.downscale)
        augment = self.config.augment
        out = []
        inputs, augmenter = None, self.augmenter
        if augment is not None and augmenter is not None:
            # Decoded, drawn and downscaled once for all copies (first: the original's statistics
            # count the pixels decoded here); each kind says what it gives the augmenter.
            inputs = {f.key: f.kind.augment_input(f, entry.values[i], loaded) for i, f in self.augmented}
        if augment is None or augment.keep_original:
            out.append(self._example(loaded, None))
        if augment is not None and augmenter is not None and inputs is not None:
            for copy in range(augment.copies):
                try:
                    augmented = augmenter(inputs, record_seed(self.seed, entry.identity, copy))
                except Exception as exc:  # albumentations raises many types for impossible params
                    raise ImageProblem(f"augmentation failed: {type(exc).__name__}: {exc}") from None
                out.append(self._example(loaded, augmented))
        for key, value in self._labels:
            self.stats.label(key, value)
        self.stats.statistics.commit()
        if self.fingerprints is not None:
            self._fingerprint(entry, loaded, out[0])
        return out

    def original(self, loaded: _Loaded) -> bytes:
        """The entry's record as it is without augmentation (``--duplicates drop`` compares them)."""
        return self._example(loaded, None)

    def _fingerprint(self, entry: Entry, loaded: _Loaded, first: bytes) -> None:
        """The input's row for ``--duplicates``: its picture's pixels as decoded for the build (the
        file decoded here where the build passes it through), or the record's bytes without one."""
        assert self.fingerprints is not None
        picture = self.fingerprints.picture
        if picture is None:
            self.fingerprints.add(entry.identity, None, first)
            return
        pixels = loaded.decoded(picture.key)
        self.fingerprints.add(entry.identity, loaded.array(picture) if pixels is None else pixels, loaded.files[picture.key])

    def _example(self, loaded: _Loaded, augmented: dict[str, Any] | None) -> bytes:
        features: Features = {}
        for encode, value in zip(self.encoders, loaded.entry.values, strict=True):
            encode(value, loaded, augmented, features, self._labels)
        self.stats.statistics.add(features)
        return encode_example(features)
