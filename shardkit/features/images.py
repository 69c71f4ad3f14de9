"""Pictures: ``image`` (a photo, augmented as albumentations' image) and ``mask`` (a per-pixel
class map that follows its image through every geometric transform, stored as lossless PNG).

Each record carries the picture's bytes and ``KEY/height``, ``KEY/width`` and ``KEY/channels``.
Original bytes pass through untouched whenever nothing changes the pixels and the file is
already in the target format.
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from shardkit.errors import ConfigError
from shardkit.features.base import TFDS, Encoder, Features, FeatureSpec, Loaded, RecordStats
from shardkit.features.columns import from_records
from shardkit.features.files import FileKind
from shardkit.formats import image_codec, image_headers
from shardkit.formats.image_headers import ImageInfo, ImageProblem, probe
from shardkit.statistics.feature_stats import pixel_count

ENCODINGS = ("jpeg", "png", "raw")
SIZES = ("height", "width", "channels")
# Raw files keep their own mode; decode them the way TensorFlow's decoders present them.
_AS_DECODED = {"P": "RGB", "1": "L", "LA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB"}


class PictureKind(FileKind):
    """A picture file: probed, decoded on need, re-encoded only when its pixels or format change."""

    picture: ClassVar[bool] = True
    statistics_role: ClassVar[str | None] = "picture"

    def channels(self, value: object, encoding: str | None, path: str, source: str | None) -> int | None:
        if value is None:
            return None
        if value not in (1, 3, 4):
            raise ConfigError(f"{path}.channels", "channels applies to image and mask features and is 1, 3 or 4", source)
        if encoding == "jpeg" and value == 4:
            raise ConfigError(f"{path}.channels", "jpeg cannot store 4 channels; use png", source)
        if encoding == "raw":
            raise ConfigError(f"{path}.channels", "raw stores the file's bytes untouched, so channels cannot change", source)
        return int(value)  # type: ignore[call-overload]

    def size_key(self, key: str, size: str) -> str:
        """Where the record keeps the picture's ``height``, ``width`` or ``channels``."""
        return f"{key}/{size}"

    def extra_keys(self, spec: FeatureSpec) -> tuple[str, ...]:
        return _beside_keys(self, spec.key)  # asked once a record: worked out once a key

    def beside_keys(self, key: str) -> tuple[str, ...]:
        """The keys ``write_beside`` writes for the picture ``key``."""
        return tuple(self.size_key(key, suffix) for suffix in SIZES)

    def write_beside(
        self, spec: FeatureSpec, out: Features, data: bytes, image_format: str, height: int, width: int, channels: int
    ) -> None:
        """The features written beside the picture's bytes: its size."""
        height_key, width_key, channels_key = self.extra_keys(spec)
        out[height_key] = ("int64", [height])
        out[width_key] = ("int64", [width])
        out[channels_key] = ("int64", [channels])

    def beside_schema(self, key: str) -> list[dict[str, Any]]:
        return [{"key": self.size_key(key, suffix), "dtype": "int64", "kind": "int64", "shape": []} for suffix in SIZES]

    def check_config(self, spec: FeatureSpec, features: tuple[FeatureSpec, ...], source: str | None) -> None:
        keys = {f.key for f in features}
        for extra in self.extra_keys(spec):
            if extra in keys:
                raise ConfigError(f"features.{extra}", f"clashes with the size feature written beside image {spec.key!r}", source)

    # -- loading and encoding --------------------------------------------------------------------

    def stored(self, spec: FeatureSpec, data: bytes) -> tuple[ImageInfo, str] | None:
        info = probe(data)
        return info, image_codec.stored_mode(info, self.class_values, self.name, spec.channels, spec.encoding or "png")

    def initial_lengths(self, spec: FeatureSpec) -> dict[str, tuple[int, int]]:
        return {key: (1, 1) for key in (spec.key, *self.extra_keys(spec))}

    def augment_input(self, spec: FeatureSpec, value: Any, loaded: Loaded) -> Any:
        return loaded.pre_augment(spec.key)

    def batchable(self, spec: FeatureSpec) -> bool:
        return not self.follows_lead  # a mask is checked against its record's image, record by record

    def batch_file(self, spec: FeatureSpec, data: bytes, stored: tuple[ImageInfo, str] | None) -> Any:
        """The picture as ``encoder`` writes it without augmentation (its bytes passed through, or
        re-encoded): (bytes, format, height, width, channels, the histogram of its pixels where
        they were decoded, else None)."""
        info, mode = stored  # type: ignore[misc]
        if image_codec.can_pass_through(info, spec.encoding or "png", mode):
            return data, info.format.lower(), info.height, info.width, image_codec.channels_of(mode), None
        array = image_codec.decode(data, mode, self.class_values, info=info)
        picture = image_codec.encode(array, spec.encoding or "png", spec.quality, spec.zlib_level, mask=self.class_values)
        shape = int(array.shape[0]), int(array.shape[1])
        return picture, spec.encoding or "png", *shape, image_codec.channels_of(mode), pixel_count(array, moments=not self.class_values)

    def batch_columns(self, spec: FeatureSpec, values: Any, stats: RecordStats) -> list[tuple[str, str, Any]]:
        import pyarrow as pa

        for height, width, channels in {v[2:5] for v in values}:  # a size once a chunk, not once a record
            stats.size(spec.key, height, width, channels)
        for value in values:
            stats.picture_counted(spec.key, value[1], value[5])
        return [(spec.key, "bytes", pa.array([v[0] for v in values], pa.large_binary())), *self.beside_columns(spec, values)]

    def beside_columns(self, spec: FeatureSpec, values: list[tuple[bytes, str, int, int, int]]) -> list[tuple[str, str, Any]]:
        """What ``write_beside`` writes, for a batch of (bytes, format, height, width, channels)."""
        import pyarrow as pa

        return [(key, "int64", pa.array([v[i] for v in values], pa.int64())) for i, key in enumerate(self.extra_keys(spec), start=2)]

    def encoder(self, spec: FeatureSpec, stats: RecordStats) -> Encoder:
        key, encoding, class_values = spec.key, spec.encoding or "png", self.class_values
        beside = self.write_beside

        def encode(value: Any, loaded: Loaded, augmented: dict[str, np.ndarray] | None, out: Features, labels: list[Any]) -> None:
            info, mode = loaded.stored(key)
            channels = image_codec.channels_of(mode)
            if augmented is None and image_codec.can_pass_through(info, encoding, mode):
                data, height, width, image_format = loaded.files[key], info.height, info.width, info.format.lower()
                array = loaded.decoded(key)  # the file's pixels where augmentation decoded them; else not measured
            else:
                array = augmented[key] if augmented is not None else loaded.array(spec)
                # raw: the original keeps its bytes; an augmented copy has new pixels, in its source's format
                image_format = encoding if encoding != "raw" else image_codec.copy_encoding(info)
                data = image_codec.encode(array, image_format, spec.quality, spec.zlib_level, mask=class_values)
                height, width = int(array.shape[0]), int(array.shape[1])
                if encoding == "raw":  # decoded in a working mode (LA as RGBA): what the copy holds
                    channels = int(array.shape[2]) if array.ndim == 3 else 1
            out[key] = ("bytes", [data])
            beside(spec, out, data, image_format, height, width, channels)
            stats.size(key, height, width, channels)
            stats.picture(key, image_format, array)

        return encode

    # -- the manifest and readers ----------------------------------------------------------------

    def schema(
        self, key: str, config: Mapping[str, Any], lengths: Mapping[str, tuple[int, int]], sizes: Mapping[str, list[Any]]
    ) -> list[dict[str, Any]]:
        entry = super().schema(key, config, lengths, sizes)[0]
        entry["encoding"] = config.get("encoding", "png")
        if key in sizes:
            h0, h1, w0, w1, ch = sizes[key]
            entry.update({"height": [h0, h1], "width": [w0, w1], "channels": list(ch)})
        return [entry, *self.beside_schema(key)]

    def tfds_feature(self, entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        channels = entry.get("channels") or []
        image: dict[str, Any] = {"shape": {"dimensions": ["-1", "-1", str(channels[0] if len(channels) == 1 else -1)]}, "dtype": "uint8"}
        if entry.get("encoding") in ("jpeg", "png") and len(channels) == 1:
            # With a fixed format TFDS needs fixed channels; otherwise it sniffs the format (as for raw files).
            image["encodingFormat"] = entry["encoding"]
        return {"pythonClassName": TFDS + "image_feature.Image", "image": image}

    def tf_decoder(self, entry: Mapping[str, Any]) -> tuple[str, int] | None:
        channels = entry.get("channels") or [0]
        return entry.get("encoding", "png"), channels[0] if len(channels) == 1 else 0

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        if not decode_images:
            return super().python_value(entry, values, decode_images)
        from PIL import Image

        with Image.open(io.BytesIO(values[0])) as im:
            if im.mode in _AS_DECODED and not (self.class_values and im.mode in ("P", "1")):
                target = "RGBA" if im.mode == "P" and "transparency" in im.info else _AS_DECODED[im.mode]
                return np.asarray(im.convert(target))
            return np.asarray(im).astype(np.uint8) if im.mode == "1" else np.asarray(im)

    def python_single(self, entry: Mapping[str, Any], decode_images: bool) -> Literal["value", "text"] | None:
        return None if decode_images else "value" if entry.get("shape") == [] else None

    def decoded_size(self, key: str, features: Mapping[str, tuple[str, list[Any]]]) -> tuple[int, int] | None:
        data = features[key][1][0]
        try:
            size = image_headers.decoded_size(data)
        except ImageProblem as exc:
            raise ImageProblem(f"image {key!r} {exc}") from None
        problem = image_headers.tf_problem(probe(data))  # Pillow decodes more than tf.data does (a TIFF stored raw)
        if problem is not None:
            raise ImageProblem(f"image {key!r} is {problem}: rebuild it with encoding: png or jpeg")
        sizes = [self.size_key(key, d) for d in ("width", "height")]
        declared = tuple(int(features[k][1][0]) for k in sizes if features.get(k, ("", []))[1])
        if len(declared) == 2 and size != declared:
            raise ImageProblem(f"image {key!r} decodes to {size[0]}x{size[1]} but its features say {declared[0]}x{declared[1]}")
        return size


class ImageKind(PictureKind):
    """``image``: JPEG (default), PNG, or the file's own bytes (``raw``)."""

    name: ClassVar[str] = "image"
    augment_target: ClassVar[str | None] = "image"
    leads: ClassVar[bool] = True
    shrinks_on_decode: ClassVar[bool] = True

    def encoding(self, value: object, path: str, source: str | None) -> str | None:
        encoding = value or "jpeg"
        if encoding not in ENCODINGS:
            raise ConfigError(f"{path}.encoding", f"unknown encoding {encoding!r} (known: {', '.join(ENCODINGS)})", source)
        return str(encoding)


class EncodedImageKind(ImageKind):
    """``encoded_image``: an image as TensorFlow's model zoos store it (the TF Object Detection API,
    Model Garden). Its key names the bytes, ``image/encoded``; beside them, under the same prefix,
    go ``image/format`` (``jpeg``, ``png``, ...), ``image/height``, ``image/width`` and
    ``image/key/sha256`` (of the stored bytes, hex)."""

    name: ClassVar[str] = "encoded_image"
    BESIDE: ClassVar[tuple[tuple[str, str], ...]] = (
        ("format", "string"),
        ("height", "int64"),
        ("width", "int64"),
        ("key/sha256", "string"),
    )

    def size_key(self, key: str, size: str) -> str:
        return f"{key.rsplit('/', 1)[0]}/{size}" if "/" in key else f"{key}/{size}"

    def beside_keys(self, key: str) -> tuple[str, ...]:
        return tuple(self.size_key(key, name) for name, _ in self.BESIDE)

    def beside_columns(self, spec: FeatureSpec, values: list[tuple[bytes, str, int, int, int]]) -> list[tuple[str, str, Any]]:
        records: list[Features] = []
        for picture, image_format, height, width, channels, *_ in values:
            records.append({})
            self.write_beside(spec, records[-1], picture, image_format, height, width, channels)
        return from_records(records, self.extra_keys(spec))

    def write_beside(
        self, spec: FeatureSpec, out: Features, data: bytes, image_format: str, height: int, width: int, channels: int
    ) -> None:
        format_key, height_key, width_key, sha_key = self.extra_keys(spec)
        out[format_key] = ("bytes", [image_format.encode("ascii")])
        out[height_key] = ("int64", [height])
        out[width_key] = ("int64", [width])
        out[sha_key] = ("bytes", [hashlib.sha256(data).hexdigest().encode("ascii")])

    def beside_schema(self, key: str) -> list[dict[str, Any]]:
        return [{"key": self.size_key(key, name), "dtype": dtype, "kind": dtype, "shape": []} for name, dtype in self.BESIDE]


class MaskKind(PictureKind):
    """``mask``: class ids per pixel, always lossless PNG, the size of the record's image."""

    name: ClassVar[str] = "mask"
    augment_target: ClassVar[str | None] = "mask"
    class_values: ClassVar[bool] = True
    statistics_role: ClassVar[str | None] = "mask"
    follows_lead: ClassVar[bool] = True

    def encoding(self, value: object, path: str, source: str | None) -> str | None:
        if value not in (None, "png"):
            raise ConfigError(f"{path}.encoding", "masks are always stored as lossless png", source)
        return "png"

    def check_config(self, spec: FeatureSpec, features: tuple[FeatureSpec, ...], source: str | None) -> None:
        super().check_config(spec, features, source)
        if not any(f.kind.leads for f in features):
            raise ConfigError("features", "a mask feature needs an image feature to belong to", source)


def size_mismatch(key: str, picture: ImageInfo, lead_key: str, lead: ImageInfo) -> str | None:
    """Why a picture that follows the record's leading one cannot belong to it, or None."""
    if (lead.width, lead.height) == (picture.width, picture.height):
        return None
    return f"mask {key!r} is {picture.width}x{picture.height} but image {lead_key!r} is {lead.width}x{lead.height}"


@functools.lru_cache(maxsize=256)
def _beside_keys(kind: PictureKind, key: str) -> tuple[str, ...]:
    return kind.beside_keys(key)
