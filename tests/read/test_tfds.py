"""tfds.builder_from_directory reads a shardkit folder: same records, dtypes, shapes and class names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import shardkit
from shardkit.pipeline.config import parse_config
from tests.arread import array_records, needs_array_record
from tests.tfread import decode as tf_decode
from tests.tfread import raw_records, read_split

tfds = pytest.importorskip("tensorflow_datasets")


def test_segmentation_folder_reads_through_tfds(seg_data: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    out = tmp_path / "out"
    config = parse_config(
        {"features": {"image": {"kind": "image", "column": 0, "encoding": "jpeg"}, "mask": {"kind": "mask", "column": 1}}}
    )
    shardkit.build([seg_data], out, config=config, workers=1, records_per_shard=5, progress=False)
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.splits["train"].num_examples == 24 and builder.info.splits["val"].num_examples == 8
    for split in ("train", "val"):
        ours = read_split(str(out), split)
        theirs = list(tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False)))
        assert len(theirs) == len(ours)
        for mine, other in zip(ours, theirs, strict=True):
            assert set(other) == {"image", "mask", "source_id"}
            assert other["source_id"] == mine["source_id"]
            assert other["image"].dtype == np.uint8 and other["image"].shape == (48, 64, 3)
            assert np.array_equal(other["image"], tf.io.decode_jpeg(mine["image"]).numpy())
            assert np.array_equal(other["mask"], tf.io.decode_png(mine["mask"]).numpy())


def test_class_labels_numbers_and_text(cls_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build(out=out, from_folder=cls_data, workers=1, progress=False)
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.features["label"].names == ["cat", "dog", "fox"]
    labels = [int(x["label"]) for x in tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False))]
    assert labels == [int(r["label"]) for r in read_split(str(out), "train")]
    assert result.manifest is not None and (out / "label.labels.txt").read_text() == "cat\ndog\nfox\n"

    (tmp_path / "train.jsonl").write_text(
        "".join(
            f'{{"image": "{p}", "n": {i}, "x": [{i}.5, 1.0], "s": "t{i}"}}\n'
            for i, p in enumerate(sorted(cls_data.glob("train/*/*.jpg"))[:3])
        )
    )
    config = parse_config(
        {
            "features": {
                "image": {"kind": "image", "encoding": "raw"},
                "n": {"kind": "int64"},
                "x": {"kind": "float"},
                "s": {"kind": "string"},
            }
        }
    )
    shardkit.build([tmp_path / "train.jsonl"], tmp_path / "nums", config=config, workers=1, progress=False)
    rows = list(tfds.as_numpy(tfds.builder_from_directory(str(tmp_path / "nums")).as_dataset(split="train", shuffle_files=False)))
    rows.sort(key=lambda r: r["source_id"])  # train.jsonl:1, :2, :3
    assert [r["source_id"] for r in rows] == [b"train.jsonl:1", b"train.jsonl:2", b"train.jsonl:3"]
    assert [int(r["n"]) for r in rows] == [0, 1, 2] and [r["s"] for r in rows] == [b"t0", b"t1", b"t2"]
    assert rows[1]["x"].tolist() == [1.5, 1.0] and rows[0]["image"].shape == (32, 40, 3)


def test_class_names_of_a_nested_key_are_where_tfds_reads_them(cls_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = parse_config({"features": {"image": {"kind": "image", "column": 0}, "label/coarse": {"kind": "class_name", "column": 1}}})
    shardkit.build(out=out, from_folder=cls_data, config=config, workers=1, progress=False)
    assert (out / "label.coarse.labels.txt").read_text() == "cat\ndog\nfox\n"  # TFDS' own name for the file: / becomes .
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.features["label/coarse"].names == ["cat", "dog", "fox"]
    labels = [int(x["label/coarse"]) for x in tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False))]
    assert labels == [int(r["label/coarse"]) for r in read_split(str(out), "train")]


@needs_array_record
def test_an_arrayrecord_build_reads_through_tfds_as_a_data_source_with_its_label_counts(cls_data: Path, tmp_path: Path) -> None:
    """``--format arrayrecord``: the TFDS metadata names array_record, so ``as_data_source`` gives
    random access to the records; the class names and the manifest's label counts are a TFRecord build's."""
    arrays = shardkit.build(out=tmp_path / "ar", from_folder=cls_data, workers=1, format="arrayrecord", progress=False)
    tfrecords = shardkit.build(out=tmp_path / "tf", from_folder=cls_data, workers=1, progress=False)
    assert arrays.manifest is not None and tfrecords.manifest is not None
    counts = {split: info.labels for split, info in arrays.manifest.splits.items()}
    assert counts == {split: info.labels for split, info in tfrecords.manifest.splits.items()}
    assert counts["train"] == {"label": {"cat": 6, "dog": 6, "fox": 6}}
    builder = tfds.builder_from_directory(str(tmp_path / "ar"))
    assert builder.info.file_format.value == "array_record" and builder.info.features["label"].names == ["cat", "dog", "fox"]
    source = builder.as_data_source("train")
    expected = read_split(str(tmp_path / "tf"), "train")
    assert len(source) == len(expected) == 18
    assert [int(source[i]["label"]) for i in range(len(source))] == [int(r["label"]) for r in expected]  # by record number
    assert all(np.array_equal(source[i]["image"], tf_decode(expected[i]["image"])) for i in (17, 3, 9))
    assert array_records(str(tmp_path / "ar"), "train") == raw_records(str(tmp_path / "tf"), "train")
