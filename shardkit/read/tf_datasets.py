"""A tuned ``tf.data`` reader for shardkit folders, the feature spec taken from the manifest.

    import shardkit.read.tf_datasets
    ds = shardkit.tfdata.load("shards/", split="train", shuffle=4096, seed=0, batch_size=32)

The recipe: shard files listed from the manifest (optionally split across hosts at the file
level), interleaved with parallel reads, parsed in batches with the vectorised
``tf.io.parse_example``, images optionally decoded to uint8 with their stored channel count,
and ``prefetch(AUTOTUNE)`` at the end. Deterministic unless asked otherwise.

``out`` may be a ``gs://`` URL: the manifest is read through ``storage.location`` and the shard
URLs go to TensorFlow's own GCS filesystem unchanged. TensorFlow reads no other store by itself
(its ``s3://`` filesystem moved to tensorflow-io): such a URL is one clear error naming the ways out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from shardkit.errors import ShardkitError, UsageError
from shardkit.features.registry import of_entry
from shardkit.formats.containers import registry
from shardkit.output.found import load_output
from shardkit.output.manifest import Manifest
from shardkit.read import tf_objects, tf_resize
from shardkit.storage import location

PARSE_BATCH = 256


def read_manifest(out: str) -> Manifest:
    """The folder's manifest, structure-checked (a damaged one is one clear error)."""
    return load_output(out).manifest


def feature_spec(manifest: Manifest) -> dict[str, Any]:
    """``tf.io.parse_example`` spec from the manifest schema: fixed features dense, ragged ones ragged."""
    import tensorflow as tf

    types = {"bytes": tf.string, "string": tf.string, "int64": tf.int64, "float": tf.float32}
    spec: dict[str, Any] = {}
    for feature in manifest.schema:
        dtype = types[feature["dtype"]]
        if feature.get("ragged"):
            spec[feature["key"]] = tf.io.RaggedFeature(dtype)
        else:
            spec[feature["key"]] = tf.io.FixedLenFeature(feature["shape"], dtype)
    return spec


def shard_files(out: str, manifest: Manifest, split: str) -> list[str]:
    if split not in manifest.splits:
        known = ", ".join(manifest.splits) or "none"
        raise ShardkitError(f"{out}: no split {split!r} (splits: {known})")
    info = manifest.splits[split]
    readable = [format for format in info.formats if registry.CONTAINERS[format].read_by_tf_data]
    if not readable:
        raise ShardkitError(
            f"{out}: split {split!r} holds {' and '.join(info.formats)} shards, which tf.data cannot read: rebuild with "
            "--format tfrecord,arrayrecord (one plan, both containers), or read it with shardkit.reader.ShardReader"
        )
    return [location.join(out, shard.file(readable[0]).name) for shard in info.shards]


def unreadable_url(out: str, schemes: Collection[str]) -> str | None:
    """Why TensorFlow cannot read ``out`` when its scheme is not among the filesystems ``schemes``
    TensorFlow has registered (``tf.io.gfile.get_registered_schemes()``); None when it can."""
    scheme = location.scheme(out)
    if scheme is None or scheme in schemes:
        return None
    ways = f"read it with shardkit.reader.ShardReader({out!r}), or copy the folder to a local disk"
    if scheme in ("s3", "s3a"):
        return (
            f"{out}: TensorFlow's tf.data has no s3:// filesystem (it moved to tensorflow-io): {ways} (aws s3 sync) "
            "or to gs://, or install a tensorflow-io that supports this TensorFlow and import tensorflow_io first"
        )
    readable = ", ".join(f"{s}://" for s in sorted(schemes) if s not in ("", "file", "ram")) or "no URL"
    return f"{out}: TensorFlow's tf.data reads local paths and {readable}, not {scheme}://: {ways}"


def load(
    out: str,
    split: str = "train",
    *,
    batch_size: int | None = None,
    decode_images: bool = True,
    shuffle: int | None = None,
    seed: int | None = None,
    num_hosts: int = 1,
    host_index: int = 0,
    parse: str = "batched",
    deterministic: bool = True,
    cache: bool = False,
    drop_remainder: bool = False,
    max_objects: int | None = None,
    image_size: tuple[int, int] | None = None,
) -> Any:
    """A ``tf.data.Dataset`` of feature dicts from a shardkit folder.

    ``shuffle`` is a buffer size (file order is shuffled too, with ``seed``); ``num_hosts`` /
    ``host_index`` give each host a disjoint set of shard files; ``parse="single"`` parses
    record by record instead of in vectorised batches; ``cache`` keeps the serialized records in
    memory after the first epoch (before shuffling, so every epoch is still shuffled).

    Lists of any length (ragged features) batch as ``tf.RaggedTensor``. An objects feature ``P``
    also gives ``P/boxes`` ((N, 4) float32: ymin, xmin, ymax, xmax, fractions of the image) and
    ``P/classes`` ((N,) int64: each object's place in the manifest's class list), and with
    ``decode_images`` its masks as (N, H, W) uint8; ``max_objects`` pads those to exactly that
    many objects (boxes and classes with -1, masks with 0), so that they batch densely (a record
    with more objects is an error: ``shardkit inspect OUT`` says the most a record has).

    ``image_size=(H, W)`` scales each decoded picture to fit in H x W, keeping its aspect ratio,
    and pads it at the bottom and right with zeros (Model Garden's ``resize_and_crop_image``;
    ``read.tf_resize``), boxes, keypoints and masks moved to match, so that pictures of different sizes
    batch; without it, ``batch_size`` on pictures the manifest says differ in size is an error.
    """
    import tensorflow as tf

    if parse not in ("batched", "single"):
        raise UsageError(f"parse must be 'batched' or 'single', not {parse!r}")
    if max_objects is not None and max_objects < 1:
        raise UsageError(f"max_objects must be at least 1, not {max_objects}")
    size = tf_resize.checked(image_size, decode_images)
    if not 0 <= host_index < num_hosts:
        raise UsageError(f"host_index {host_index} is outside 0..{num_hosts - 1}")
    problem = unreadable_url(out, tf.io.gfile.get_registered_schemes())
    if problem:
        raise ShardkitError(problem)
    manifest = read_manifest(out)
    files = shard_files(out, manifest, split)
    if len(files) < num_hosts:
        raise ShardkitError(f"{split} has {len(files)} shard files, fewer than {num_hosts} hosts: rebuild with more shards")
    compression = "GZIP" if manifest.parameters.compression == "gzip" else ""
    spec = feature_spec(manifest)
    objects = tf_objects.lists_of(manifest, spec)
    if size is not None:
        tf_resize.check_movable(out, spec, objects)
    if max_objects is not None and not objects:
        raise UsageError(f"max_objects: {out} has no objects feature to pad")
    autotune = tf.data.AUTOTUNE

    ds = tf.data.Dataset.from_tensor_slices(files)
    if num_hosts > 1:
        ds = ds.shard(num_hosts, host_index)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
        cycle_length=min(len(files), 16),
        num_parallel_calls=autotune,
        deterministic=deterministic,
    )
    if cache:
        ds = ds.cache()  # serialized records: cheap to hold, and shuffled afresh each epoch below
    if shuffle:
        ds = ds.shuffle(shuffle, seed=seed, reshuffle_each_iteration=True)
    decoders = _image_decoders(manifest) if decode_images else {}
    if batch_size is not None and batch_size > 1 and size is None:
        _check_one_size(out, manifest, decoders)

    def parsed(batch: Any) -> Any:  # serialized records -> feature dicts, objects' boxes and classes built (lists ragged)
        return tf_objects.built(tf.io.parse_example(batch, spec), objects)

    def parsed_padded(batch: Any) -> Any:
        return tf_objects.padded(parsed(batch), objects, max_objects) if max_objects else parsed(batch)

    if parse == "batched" and batch_size and not decoders:
        # The vectorised parse straight on the training batches: no unbatch, no re-batch.
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        ds = ds.map(parsed_padded, num_parallel_calls=autotune, deterministic=deterministic)
        return ds.prefetch(autotune)
    # Parsed as a batch (of one record, with parse="single") and unbatched: lists then stay ragged
    # tensors of one record, which batch again into ragged batches where plain tensors would not.
    ds = ds.batch(PARSE_BATCH if parse == "batched" else 1)
    ds = ds.map(parsed, num_parallel_calls=autotune, deterministic=deterministic).unbatch()
    if decoders or max_objects:
        lead = next((f["key"] for f in manifest.schema if of_entry(f).leads and f["key"] in decoders), None)
        parsed_spec, rebatch = ds.element_spec, tf_objects.has_ragged(ds.element_spec)
        nearest = {f["key"]: of_entry(f).class_values for f in manifest.schema if f["key"] in decoders}

        def record(x: Any) -> Any:
            decoded = tf_objects.decoded_masks(_decode(x, decoders), objects, lead)
            decoded = tf_resize.sized(decoded, nearest, objects, lead, size) if size else decoded
            decoded = tf_objects.one_padded(decoded, objects, max_objects) if max_objects else decoded
            return tf_objects.as_batch_of_one(decoded, parsed_spec) if rebatch else decoded

        ds = ds.map(record, num_parallel_calls=autotune, deterministic=deterministic)
        if rebatch:  # each record came out as a batch of one, to keep its lists ragged: see as_batch_of_one
            ds = ds.unbatch()
    if batch_size:
        ds = ds.batch(batch_size, drop_remainder=drop_remainder, num_parallel_calls=autotune, deterministic=deterministic)
    return ds.prefetch(autotune)


def _image_decoders(manifest: Manifest) -> dict[str, tuple[str, int]]:
    """Picture key -> (encoding, channels) for the features whose kind decodes them into pixels."""
    out = {}
    for f in manifest.schema:
        decoder = of_entry(f).tf_decoder(f)
        if decoder is not None:
            out[f["key"]] = decoder
    return out


def _check_one_size(out: str, manifest: Manifest, decoders: Mapping[str, tuple[str, int]]) -> None:
    """One line, before TensorFlow's traceback at the first batch, where the manifest says the
    decoded pictures of the build differ in size (its ``height`` and ``width`` ranges)."""
    for entry in manifest.schema:
        heights, widths = entry.get("height") or [], entry.get("width") or []
        if entry["key"] in decoders and (len(set(heights)) > 1 or len(set(widths)) > 1):
            sizes = f"height {min(heights)} to {max(heights)}, width {min(widths)} to {max(widths)}"
            raise UsageError(
                f"{out}: the images of {entry['key']!r} differ in size ({sizes}), so they do not batch: pass "
                "image_size=(H, W) to resize and pad each one (boxes, keypoints and masks moved to match), or batch_size=None "
                "and resize them in your own map"
            )


def _decode(features: dict[str, Any], decoders: dict[str, tuple[str, int]]) -> dict[str, Any]:
    import tensorflow as tf

    out = dict(features)
    for key, (encoding, channels) in decoders.items():
        data = features[key]
        if encoding == "jpeg":
            image = tf.io.decode_jpeg(data, channels=channels, dct_method="INTEGER_ACCURATE")
        elif encoding == "png":
            image = tf.io.decode_png(data, channels=channels, dtype=tf.uint8)
        else:
            image = tf.io.decode_image(data, channels=channels, expand_animations=False)
        image.set_shape([None, None, channels or None])
        out[key] = image
    return out
