"""Run one ShardTask: load -> augment -> encode -> write one shard, then commit it atomically.

A worker never imports TensorFlow. It reports progress through a callback (ticks of records
written) and returns one ``ShardResult``; the parent owns the progress bar and the manifest.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from shardkit.errors import EntryError, OutputError, WriteError
from shardkit.formats import image_codec
from shardkit.formats.example_proto import FeatureValue, encode_example
from shardkit.formats.idx_sidecar import INDEX_SUFFIX, index_text
from shardkit.formats.tfrecord import RecordWriter, file_crc32c
from shardkit.pipeline.config import Config, FeatureSpec
from shardkit.pipeline.entries import Entry
from shardkit.pipeline.plan import record_seed
from shardkit.pipeline.tasks import ShardResult, ShardTask
from shardkit.storage import atomic, layout

Progress = Callable[[int], None]


class _Stats:
    """Running min/max of list lengths and image sizes, for the manifest's schema."""

    def __init__(self) -> None:
        self.lengths: dict[str, tuple[int, int]] = {}
        self.sizes: dict[str, tuple[int, int, int, int, tuple[int, ...]]] = {}

    def length(self, key: str, n: int) -> None:
        lo, hi = self.lengths.get(key, (n, n))
        self.lengths[key] = (min(lo, n), max(hi, n))

    def size(self, key: str, height: int, width: int, channels: int) -> None:
        if key not in self.sizes:
            self.sizes[key] = (height, height, width, width, (channels,))
            return
        h0, h1, w0, w1, ch = self.sizes[key]
        self.sizes[key] = (min(h0, height), max(h1, height), min(w0, width), max(w1, width), tuple(sorted({*ch, channels})))


class _Loaded:
    """One entry's files read into memory, headers probed, pixels decoded on first need."""

    def __init__(self, entry: Entry, config: Config) -> None:
        self.entry = entry
        self.files: dict[str, bytes] = {}
        self.paths: dict[str, str] = {}
        self.infos: dict[str, image_codec.ImageInfo] = {}
        self.modes: dict[str, str] = {}
        self._arrays: dict[str, Any] = {}
        for spec, value in zip(config.features, entry.values, strict=True):
            if spec.kind not in ("image", "mask", "bytes"):
                continue
            self.paths[spec.key] = value
            self.files[spec.key] = _read_file(value, spec.key)
            if spec.is_image:
                with _naming(spec.key, value):
                    info = image_codec.probe(self.files[spec.key])
                    self.infos[spec.key] = info
                    self.modes[spec.key] = image_codec.stored_mode(info, spec.kind, spec.channels, spec.encoding or "png")
        first_image = next((f.key for f in config.features if f.kind == "image"), None)
        for spec in config.features:
            if spec.kind == "mask" and first_image is not None:
                img, mask = self.infos[first_image], self.infos[spec.key]
                if (img.width, img.height) != (mask.width, mask.height):
                    raise image_codec.ImageProblem(
                        f"mask {spec.key!r} is {mask.width}x{mask.height} but image {first_image!r} is {img.width}x{img.height}"
                    )

    def array(self, spec: FeatureSpec) -> Any:
        if spec.key not in self._arrays:
            with _naming(spec.key, self.paths[spec.key]):
                self._arrays[spec.key] = image_codec.decode(self.files[spec.key], self.modes[spec.key], spec.kind == "mask")
        return self._arrays[spec.key]


@contextlib.contextmanager
def _naming(key: str, path: str) -> Iterator[None]:
    """Prefix an image problem with the feature and the file it came from."""
    try:
        yield
    except image_codec.ImageProblem as exc:
        raise image_codec.ImageProblem(f"{key}: {path}: {exc}") from None


def _read_file(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise image_codec.ImageProblem(f"{key}: {path}: file not found") from None
    except IsADirectoryError:
        raise image_codec.ImageProblem(f"{key}: {path}: is a folder, not a file") from None
    except OSError as exc:
        raise image_codec.ImageProblem(f"{key}: {path}: cannot read: {exc.strerror}") from None


class ShardWriter:
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
            from shardkit.pipeline.augment import Augmenter

            self.augmenter = Augmenter(
                self.config.augment.pipeline,
                [f.key for f in self.config.features if f.kind == "image"],
                [f.key for f in self.config.features if f.kind == "mask"],
            )
        self.stats = _Stats()

    def records_for(self, entry: Entry) -> list[bytes]:
        """All records of one entry: the original (if kept or not augmenting) then the copies."""
        loaded = _Loaded(entry, self.config)
        augment = self.config.augment
        out = []
        if augment is None or augment.keep_original:
            out.append(self._example(loaded, None))
        if augment is not None and self.augmenter is not None:
            for copy in range(augment.copies):
                arrays = {f.key: loaded.array(f) for f in self.config.features if f.is_image}
                try:
                    augmented = self.augmenter(arrays, record_seed(self.seed, entry.identity, copy))
                except Exception as exc:  # albumentations raises many types for impossible params
                    raise image_codec.ImageProblem(f"augmentation failed: {type(exc).__name__}: {exc}") from None
                out.append(self._example(loaded, augmented))
        return out

    def _example(self, loaded: _Loaded, augmented: dict[str, Any] | None) -> bytes:
        features: dict[str, tuple[str, FeatureValue]] = {}
        for spec, value in zip(self.config.features, loaded.entry.values, strict=True):
            if spec.is_image:
                self._image_feature(spec, loaded, augmented, features)
            elif spec.kind == "class_name":
                features[spec.key] = ("int64", [self.class_ids[spec.key][value]])
            elif spec.kind == "bytes":
                features[spec.key] = ("bytes", [loaded.files[spec.key]])
            elif spec.kind == "string":
                features[spec.key] = ("bytes", [value])
            else:
                features[spec.key] = (spec.dtype, value)
        for key, (_, values) in features.items():
            self.stats.length(key, len(values))
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
            data = image_codec.encode(array, encoding, spec.quality)
            height, width = int(array.shape[0]), int(array.shape[1])
        channels = image_codec.channels_of(mode)
        out[spec.key] = ("bytes", [data])
        out[f"{spec.key}/height"] = ("int64", [height])
        out[f"{spec.key}/width"] = ("int64", [width])
        out[f"{spec.key}/channels"] = ("int64", [channels])
        self.stats.size(spec.key, height, width, channels)


def _covers(entries: tuple[Entry, ...]) -> tuple[tuple[str, int, int], ...]:
    runs: list[list[Any]] = []
    for e in entries:
        if runs and runs[-1][0] == e.source and runs[-1][2] < e.line:
            runs[-1][2] = e.line
        else:
            runs.append([e.source, e.line, e.line])
    return tuple((s, a, b) for s, a, b in runs)


def run_task(task: ShardTask, progress: Progress | None = None, tick_every: float = 0.2) -> ShardResult:
    """Write one shard to a temporary name, fsync it, rename it into place, save its record."""
    started = time.perf_counter()
    settings = task.settings
    final = os.path.join(settings.out_dir, task.name)
    temp = layout.temp_path(settings.out_dir, task.name, uuid.uuid4().hex[:8])
    writer_state = ShardWriter(task)
    skipped: list[tuple[str, int, str]] = []
    pending = 0
    last_tick = time.monotonic()
    try:
        with _ShardFile(temp, final) as raw:
            sink: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if settings.compression == "gzip" else raw
            writer = RecordWriter(sink)
            for entry in task.entries:
                try:
                    records = writer_state.records_for(entry)
                except image_codec.ImageProblem as exc:
                    if settings.on_error != "skip":
                        raise EntryError(entry.source, entry.line, str(exc)) from None
                    skipped.append((entry.source, entry.line, str(exc)))
                    continue
                for record in records:
                    writer.write(record)
                pending += len(records)
                if progress is not None and time.monotonic() - last_tick >= tick_every:
                    progress(pending)
                    pending, last_tick = 0, time.monotonic()
            if sink is not raw:
                sink.close()
            raw.flush()
            if settings.fsync:
                raw.sync()
        if settings.compression == "gzip":
            size, crc = os.path.getsize(temp), file_crc32c(temp)
        else:
            size, crc = writer.bytes_written, writer.crc32c
        _check_still_ours(task)
        with atomic.naming(final):
            os.replace(temp, final)
        index_name = None
        if settings.index and settings.compression is None:
            # Beside the shard, before its record: the record is the commit point for both.
            index_name = task.name + INDEX_SUFFIX
            atomic.write_atomic(os.path.join(settings.out_dir, index_name), index_text(writer.offsets), settings.fsync)
    except BaseException:
        atomic.remove_quietly(temp)
        raise
    if progress is not None and pending:
        progress(pending)
    result = ShardResult(
        name=task.name,
        split=task.split,
        index=task.index,
        num_shards=task.num_shards,
        records=writer.records,
        bytes=size,
        crc32c=f"{crc:08x}",
        entries=len(task.entries) - len(skipped),
        covers=_covers(task.entries),
        skipped=tuple(skipped),
        lengths=writer_state.stats.lengths,
        sizes=writer_state.stats.sizes,
        fingerprint=settings.fingerprint,
        seconds=round(time.perf_counter() - started, 3),
        index_file=index_name,
    )
    layout.write_shard_record(settings.out_dir, result.to_dict(), settings.fsync)
    return result


class _ShardFile:
    """A shard's temp file, as the record writer (and gzip) see it: every OS error writing it (a
    full disk, a quota) is a ``WriteError`` naming the shard, while input errors stay entry errors."""

    def __init__(self, temp: str, final: str) -> None:
        self._final = final
        with atomic.naming(final):
            self._raw = open(temp, "wb")  # noqa: SIM115 (closed by __exit__, where a full disk can fail it too)

    def write(self, data: bytes) -> int:
        try:  # once per record: a bare try, not atomic.naming's context manager
            return self._raw.write(data)
        except OSError as exc:
            raise WriteError.from_os_error(self._final, exc) from None

    def flush(self) -> None:
        with atomic.naming(self._final):
            self._raw.flush()

    def sync(self) -> None:
        with atomic.naming(self._final):
            atomic.flush_to_disk(self._raw.fileno())

    def __enter__(self) -> _ShardFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            with atomic.naming(self._final):
                self._raw.close()
        else:  # already failing: closing flushes what is buffered, which may fail again and hide why
            with contextlib.suppress(OSError):
                self._raw.close()


def _check_still_ours(task: ShardTask) -> None:
    """Refuse to commit into OUT once another build owns it.

    A task can outlive its build: a Dask worker finishes the task it is running after the
    client that submitted it has failed, been cancelled or been killed, and meanwhile
    ``--overwrite`` may have started a different build in OUT. The same build's shard would be
    byte-identical, so only a changed (or removed) fingerprint stops the commit.
    """
    settings = task.settings
    if layout.state_fingerprint(settings.out_dir) != settings.fingerprint:
        raise OutputError(
            f"{settings.out_dir}: now holds another build (.shardkit/build.json changed while {task.name} was written); "
            "this task's shard was discarded"
        )
