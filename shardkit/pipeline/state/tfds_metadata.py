"""TensorFlow Datasets metadata, so ``tfds.builder_from_directory(OUT)`` reads a shardkit folder.

Written from the manifest as plain JSON (no TFDS import): ``dataset_info.json`` with a file
template that matches shardkit's own shard names (``{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}``), so
one set of files serves both; ``features.json`` with each feature as its kind describes it to TFDS
(images and masks as ``Image``, class names as ``ClassLabel`` with names in the file TFDS reads
them from, ``output.layout.labels_name``, numbers as ``Tensor``, strings as ``Text``, objects as a
``Sequence`` of nested dicts). The ``KEY/height``-style size features stay out of it: TFDS
reads ``/`` as nesting, and they remain in every record for tf.data readers. ``output.layout``
names the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardkit.features.base import TFDS, FeatureKind
from shardkit.features.registry import of_entry
from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.output.manifest import Manifest
from shardkit.storage import atomic, location


def write(out_dir: str, manifest: Manifest, durable: bool = True, features: Mapping[str, Any] | None = None) -> list[str]:
    """Write the TFDS metadata files for ``manifest`` (``features``: the TFDS features, where its
    config does not describe them: a reshard of foreign records); returns their names."""
    if manifest.parameters.compression == "gzip":
        return []  # TFDS reads TFRecord shards uncompressed only
    return _write(out_dir, manifest, durable, features if features is not None else _features(manifest))


def _features(manifest: Manifest) -> dict[str, Any]:
    """Each feature as its kind describes it to TFDS, from the config and the schema."""
    config_features = manifest.config["features"]
    grouped: dict[str, tuple[FeatureKind, list[Mapping[str, Any]]]] = {}  # a feature's key -> its kind and schema entries
    for spec in manifest.schema:
        kind = of_entry(spec)
        grouped.setdefault(kind.feature_key(spec), (kind, []))[1].append(spec)
    features = {}
    for key, (kind, entries) in grouped.items():
        if key in config_features:  # not the size features beside images
            described = kind.tfds_features(key, entries, config_features[key])
            if described is not None:
                features[key] = described
    return features


def _write(out_dir: str, manifest: Manifest, durable: bool, features: Mapping[str, Any]) -> list[str]:
    splits = [
        {
            "filepathTemplate": "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}",
            "name": name,
            "numBytes": str(info.bytes),
            "shardLengths": [str(s.records) for s in info.shards],
        }
        for name, info in manifest.splits.items()
        if info.shards
    ]
    primary, *others = (registry.named(name).tfds_file_format for name in manifest.parameters.formats)
    info: dict[str, Any] = {
        "name": "shardkit",
        "description": f"Built by shardkit: see {layout.MANIFEST}.",
        "fileFormat": primary,
        "splits": splits,
        "version": "1.0.0",
    }
    if others:  # as_dataset reads the primary (TFRecord), as_data_source the ArrayRecord files
        info["alternativeFileFormats"] = others
    atomic.write_json(location.join(out_dir, layout.DATASET_INFO), info, durable)
    atomic.write_json(
        location.join(out_dir, layout.FEATURES),
        {"featuresDict": {"features": features}, "pythonClassName": TFDS + "features_dict.FeaturesDict"},
        durable,
    )
    written = [layout.DATASET_INFO, layout.FEATURES]
    for key, names in manifest.classes.items():
        if "classLabel" not in features.get(key, {}):
            continue  # names TFDS would not read (objects keep theirs in each record, and in label_map.pbtxt)
        atomic.write_atomic(location.join(out_dir, layout.labels_name(key)), "".join(f"{n}\n" for n in names).encode(), durable)
        written.append(layout.labels_name(key))
    return written
