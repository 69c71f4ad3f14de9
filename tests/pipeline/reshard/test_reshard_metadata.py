"""What a reshard's output says of its records: TFDS reads foreign records back through the
inferred features; a shardkit output's config, classes and label counts carry over, per shard recounted."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import shardkit
from shardkit import demo


def _example(i: int, extra: bool) -> bytes:
    import tensorflow as tf

    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "score": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 2, i / 4])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"t"] * (i % 3 + 1))),
    }
    if extra:
        feature["note"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"only in train"]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_tfds_reads_foreign_records_back_through_the_inferred_features(tmp_path: Path) -> None:
    import tensorflow as tf
    import tensorflow_datasets as tfds

    source = tmp_path / "in"
    source.mkdir()
    for split, ids, extra in (("train", range(0, 70), True), ("test", range(100, 130), False)):
        with tf.io.TFRecordWriter(str(source / f"{split}.tfrecord")) as writer:
            for i in ids:
                writer.write(_example(i, extra))
    out = tmp_path / "out"
    made = shardkit.reshard([source], out, shards=3, progress=False, workers=1).manifest

    schema = {entry["key"]: entry for entry in made.schema}
    assert schema["id"]["shape"] == [] and schema["score"]["shape"] == [2] and schema["tags"]["shape"] is None
    assert schema["note"].get("optional") and "note" not in json.loads((out / "features.json").read_text())["featuresDict"]["features"]
    builder = tfds.builder_from_directory(str(out))
    for split, ids in (("train", range(0, 70)), ("test", range(100, 130))):
        read = list(tfds.as_numpy(builder.as_dataset(split=split)))
        assert sorted(int(r["id"]) for r in read) == list(ids)
        assert all(list(r["score"]) == [r["id"] / 2, r["id"] / 4] and len(r["tags"]) == r["id"] % 3 + 1 for r in read)


def test_a_shardkit_outputs_config_classes_and_labels_carry_over(tmp_path: Path) -> None:
    tree = demo.make_classification(tmp_path / "cls", per_class=12, width=32, height=32)
    built = shardkit.build([], tmp_path / "built", from_folder=tree, progress=False, workers=1).manifest
    assert built is not None
    made = shardkit.reshard([tmp_path / "built"], tmp_path / "again", shards=4, progress=False, workers=1).manifest

    assert made.config == built.config and made.classes == built.classes and made.schema == built.schema
    for name, split in built.splits.items():
        assert made.splits[name].labels == split.labels
        shards = made.splits[name].shards
        summed: collections.Counter[str] = collections.Counter()
        for shard in shards:
            summed.update(shard.labels["label"])
        assert dict(summed) == dict(split.labels["label"])
    assert shardkit.verify([str(tmp_path / "again")]).ok
