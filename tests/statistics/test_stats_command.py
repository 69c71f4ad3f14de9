"""``shardkit stats`` on what other tools wrote: TFRecord files from TensorFlow's own writer equal
NumPy over their values, ArrayRecord and a reshard's output (which has no statistics.pb) are
counted from their shards, and a damaged or inconsistent file is one line naming it."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit.errors import ShardkitError, UsageError
from tests import hostile
from tests.arread import needs_array_record


def _jpeg(rng: np.random.Generator) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as tf.train.Examples through TensorFlow's own TFRecordWriter."""
    import tensorflow as tf

    def feature(value: Any) -> Any:
        if isinstance(value, list) and (not value or isinstance(value[0], float)):
            return tf.train.Feature(float_list=tf.train.FloatList(value=value))
        if isinstance(value, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows:
            example = tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in row.items()}))
            writer.write(example.SerializeToString())


@pytest.fixture(scope="module")
def tf_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("foreign")
    rng = np.random.default_rng(7)
    rows = [
        {
            "n": int(rng.integers(-5, 5)),
            "v": [float(np.float32(x)) for x in rng.normal(2.0, 0.5, int(rng.integers(0, 4)))],
            "word": f"w{int(rng.zipf(1.5)) % 7}".encode(),
            "jpeg": _jpeg(rng),
        }
        for _ in range(90)
    ]
    files = [root / "part-0.tfrecord", root / "part-1.tfrecord"]
    _write(files[0], rows[:40])
    _write(files[1], rows[40:])
    return files, rows


def _rank(values: np.ndarray, value: float) -> tuple[float, float]:
    """The fractions of ``values`` below and at most ``value``: a quantile's rank lies between."""
    ordered = np.sort(values)
    return np.searchsorted(ordered, value, "left") / len(values), np.searchsorted(ordered, value, "right") / len(values)


def test_tensorflow_written_files_equal_numpy_over_their_values(tf_files: tuple[list[Path], list[dict[str, Any]]], tmp_path: Path) -> None:
    from click.testing import CliRunner
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from shardkit.cli.main import main

    files, rows = tf_files
    proto_path = tmp_path / "stats.pb"
    done = CliRunner().invoke(main, ["stats", "--json", "-w", "1", "-o", str(proto_path), *map(str, files)])
    assert done.exit_code == 0, done.output
    found = json.loads(done.output)
    features = found["splits"]["all"]["features"]
    assert found["splits"]["all"]["records"] == len(rows) == 90

    n = np.array([r["n"] for r in rows], dtype=np.float64)
    got = features["n"]
    assert (got["type"], got["count"], got["missing"], got["zeros"]) == ("INT", 90, 0, int((n == 0).sum()))
    assert (got["min"], got["max"]) == (n.min(), n.max())
    np.testing.assert_allclose([got["mean"], got["std"]], [n.mean(), n.std()], rtol=1e-12)
    low, high = _rank(n, got["median"])
    assert low - got["quantile_rank_error"] <= 0.5 <= high + got["quantile_rank_error"]

    v = np.concatenate([np.asarray(r["v"], dtype=np.float32) for r in rows]).astype(np.float64)
    got = features["v"]
    assert got["type"] == "FLOAT" and got["count"] == 90  # an empty list is a value list of length 0, not missing
    assert got["values_per_record"] == [min(len(r["v"]) for r in rows), max(len(r["v"]) for r in rows)]
    np.testing.assert_allclose([got["min"], got["max"], got["mean"], got["std"]], [v.min(), v.max(), v.mean(), v.std()], rtol=1e-6)

    words, counts = np.unique([r["word"].decode() for r in rows], return_counts=True)
    got = features["word"]
    assert (got["type"], got["unique"], got["unique_estimated"]) == ("STRING", len(words), False)
    assert got["top"] == sorted(([str(w), int(c)] for w, c in zip(words, counts, strict=True)), key=lambda wc: (-wc[1], wc[0]))

    sizes = [len(r["jpeg"]) for r in rows]
    got = features["jpeg"]
    assert (got["type"], got["formats"], got["pixels_measured"]) == ("IMAGE", {"jpeg": 90}, 0)
    assert got["bytes"][0] == min(sizes) and got["bytes"][2] == max(sizes)
    np.testing.assert_allclose(got["bytes"][1], np.mean(sizes))

    proto = statistics_pb2.DatasetFeatureStatisticsList()
    proto.ParseFromString(proto_path.read_bytes())  # --output: the proto TFDV reads
    assert [(d.name, d.num_examples) for d in proto.datasets] == [("all", 90)]
    assert found["source"] == "2 files"
    assert shardkit.stats([str(f) for f in files], workers=2).to_dict() == found  # a pool of two: the same as one


def test_a_reshard_output_is_counted_from_its_shards(seg_data: Path, tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("features:\n  image: {kind: image, column: 0, encoding: png}\n  mask: {kind: mask, column: 1}\n")
    built = tmp_path / "built"
    shardkit.build([seg_data], built, config=str(tmp_path / "config.yaml"), records_per_shard=10, workers=1, progress=False)
    again = tmp_path / "again"
    shardkit.reshard([built], again, shards=2, workers=1, progress=False)
    assert not (again / "statistics.pb").exists()
    was, now = shardkit.stats([str(built)]), shardkit.stats([str(again)], workers=1)
    assert now.source == f"{again} (computed from its shards)"
    assert now.labels == was.labels
    for split in ("train", "val"):
        before, after = was.splits[split], now.splits[split]
        assert after["records"] == before["records"]
        for key in ("image/height", "image/width", "mask/channels"):
            for field in ("count", "min", "max", "mean", "zeros"):
                assert after["features"][key][field] == before["features"][key][field], (split, key, field)
        assert after["features"]["source_id"]["top"] == before["features"]["source_id"]["top"]
        assert after["features"]["image"]["formats"] == before["features"]["image"]["formats"]


@needs_array_record
def test_arrayrecord_files_are_counted_as_their_tfrecord_twins(tf_files: tuple[list[Path], list[dict[str, Any]]], tmp_path: Path) -> None:
    files, _ = tf_files
    shardkit.reshard([str(f) for f in files], tmp_path / "ar", shards=2, shuffle=False, format="arrayrecord", workers=1, progress=False)
    shards = sorted((tmp_path / "ar").glob("*.array_record"))
    assert len(shards) == 2
    from_ar = shardkit.stats([str(s) for s in shards], workers=1).splits
    from_tf = shardkit.stats([str(f) for f in files], workers=1).splits
    assert from_ar.keys() == from_tf.keys() == {"all"}
    for key in ("n", "v", "word", "jpeg"):
        mine, theirs = from_ar["all"]["features"][key], from_tf["all"]["features"][key]
        mine.pop("deciles", None), theirs.pop("deciles", None)  # the sketch's, in another order of values
        mine.pop("median", None), theirs.pop("median", None)
        for field in mine:
            if isinstance(mine[field], float):
                np.testing.assert_allclose(mine[field], theirs[field], rtol=1e-9, err_msg=f"{key}.{field}")
            else:
                assert mine[field] == theirs[field], (key, field)


def _offsets(data: bytes) -> list[int]:
    """Where each TFRecord record begins (length, its CRC, payload, its CRC)."""
    found, at = [], 0
    while at < len(data):
        found.append(at)
        (length,) = struct.unpack("<Q", data[at : at + 8])
        at += 16 + length
    return found


@pytest.mark.slow
def test_a_damaged_file_is_one_line_naming_the_file_and_record(tf_files: tuple[list[Path], list[dict[str, Any]]], tmp_path: Path) -> None:
    data = tf_files[0][0].read_bytes()
    starts = _offsets(data)
    cut, flipped = tmp_path / "cut.tfrecord", tmp_path / "flipped.tfrecord"
    cut.write_bytes(data[: starts[3] + 40])  # mid-way through record 3's payload
    damaged = bytearray(data)
    damaged[starts[2] + 30] ^= 0xFF  # a byte of record 2's payload: its CRC no longer matches
    flipped.write_bytes(bytes(damaged))
    before = hostile.digests(tmp_path)
    for path, problem in ((cut, "truncated record"), (flipped, "data CRC mismatch")):
        line = hostile.one_line_error(hostile.run_cli(["stats", path.name, "-w", "1"], tmp_path))
        record = 3 if path is cut else 2
        assert line.startswith(f"Error: {path.name}: record {record} at byte {starts[record]}: {problem}"), line
    assert hostile.digests(tmp_path) == before


def test_a_feature_of_two_types_is_one_line_naming_the_file(tmp_path: Path) -> None:
    _write(tmp_path / "a.tfrecord", [{"x": 1}, {"x": 2}])
    _write(tmp_path / "b.tfrecord", [{"x": [2.5]}])
    _write(tmp_path / "mixed.tfrecord", [{"x": 1}, {"x": b"one"}])
    with pytest.raises(ShardkitError) as raised:
        shardkit.stats([str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")], workers=1)
    assert str(raised.value).startswith(f"{tmp_path / 'b.tfrecord'}: feature 'x' is float here and int64 in {tmp_path / 'a.tfrecord'}; ")
    with pytest.raises(ShardkitError) as raised:
        shardkit.stats([str(tmp_path / "mixed.tfrecord")], workers=1)
    offset = _offsets((tmp_path / "mixed.tfrecord").read_bytes())[1]
    assert str(raised.value).startswith(f"{tmp_path / 'mixed.tfrecord'}: record 1 at byte {offset}: feature 'x' is bytes here and int64 ")
    assert "\n" not in str(raised.value)


def test_text_in_one_file_and_opaque_bytes_in_another_are_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "text.tfrecord", [{"k": b"abc"}, {"k": b"de"}])
    _write(tmp_path / "blob.tfrecord", [{"k": b"\xff\xfe\x00"}])  # not UTF-8: this file takes it for bytes
    found = shardkit.stats([str(tmp_path / "text.tfrecord"), str(tmp_path / "blob.tfrecord")], workers=1)
    k = found.splits["all"]["features"]["k"]
    assert (k["type"], k["count"], k["bytes"]) == ("BYTES", 3, [2, pytest.approx(8 / 3), 3])


def test_normalize_refusals_are_one_line(seg_data: Path, tmp_path: Path) -> None:
    # Two pictures re-encoded (so measured): the photo and its mask file read as a picture.
    config = "features:\n  image: {kind: image, column: 0, encoding: png}\n  other: {kind: image, column: 1, encoding: jpeg}\n"
    (tmp_path / "config.yaml").write_text(config)
    out = tmp_path / "out"
    shardkit.build([seg_data], out, config=str(tmp_path / "config.yaml"), workers=1, progress=False)
    found = shardkit.stats([str(out)])
    with pytest.raises(UsageError, match=r"^no split 'test' in these statistics: train, val$"):
        found.normalize("test")
    with pytest.raises(UsageError, match=r"^name the image feature: image, other$"):
        found.normalize("train")  # two features with measured pixels
    with pytest.raises(UsageError, match=r"^'source_id' has no measured pixels in 'train': image, other$"):
        found.normalize("train", "source_id")
    mean, std = found.normalize("train", "image", scale=255)
    assert len(mean) == len(std) == 3 and all(0 < m < 255 for m in mean)
