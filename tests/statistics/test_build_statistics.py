"""A build's OUT/statistics.pb holds what TensorFlow reads back from its shards: counts, extremes,
moments, zeros, top values, quantiles within the sketch's bound, and the pixels' mean and std."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from tests import tfread

AUGMENTED = """\
columns: [image, mask]
features:
  image: {kind: image, column: image, encoding: ENCODING}
  mask: {kind: mask, column: mask}
augment:
  copies: 2
  keep_original: true
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.9}
"""


def _proto(out: Path) -> Any:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    proto = statistics_pb2.DatasetFeatureStatisticsList()
    proto.ParseFromString((out / "statistics.pb").read_bytes())
    return proto


def _feature(proto: Any, split: str, key: str) -> Any:
    dataset = next(d for d in proto.datasets if d.name == split)
    return next(f for f in dataset.features if "/".join(f.path.step) == key)


def _custom(feature: Any) -> dict[str, Any]:
    return {c.name: c for c in feature.custom_stats}


def _pixels(records: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.concatenate([tfread.decode(bytes(r[key]), 3).reshape(-1, 3) for r in records]).astype(np.float64)


@pytest.mark.parametrize("encoding", ["png", "jpeg"])
def test_pixel_mean_and_std_are_those_of_every_written_picture(seg_data: Path, tmp_path: Path, encoding: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(AUGMENTED.replace("ENCODING", encoding))
    out = tmp_path / "out"
    shardkit.build([seg_data], out, config=str(config), seed=4, records_per_shard=10, workers=2, progress=False)
    proto = _proto(out)
    for split in ("train", "val"):
        records = tfread.read_split(str(out), split)
        image = _feature(proto, split, "image")
        custom = _custom(image)
        assert custom["pixels_measured"].num == len(records)  # originals (passed through) and copies alike
        pixels = _pixels(records, "image")
        mean = [custom[f"pixel_mean/3ch/{c}"].num for c in "RGB"]
        std = [custom[f"pixel_std/3ch/{c}"].num for c in "RGB"]
        # PNG holds the arrays handed to the encoder exactly; JPEG q95 moves them by its rounding
        # and chroma subsampling: up to 1 % of std on these small synthetic pictures with sharp edges.
        tolerance = 1e-9 if encoding == "png" else 1.0
        np.testing.assert_allclose(mean, pixels.mean(axis=0), atol=tolerance)
        np.testing.assert_allclose(std, pixels.std(axis=0), atol=tolerance)
        formats = {b.label: b.sample_count for b in custom["image_format_histogram"].rank_histogram.buckets}
        assert formats == {encoding.upper(): len(records)}
        assert image.bytes_stats.max_num_bytes == max(len(r["image"]) for r in records)
    stats = shardkit.stats([str(out)])
    mean01, std01 = stats.normalize("train", "image")
    train = _pixels(tfread.read_split(str(out), "train"), "image")
    np.testing.assert_allclose(mean01, train.mean(axis=0) / 255, atol=0.003)
    np.testing.assert_allclose(std01, train.std(axis=0) / 255, atol=0.003)


TABLE = """\
features:
  n: {kind: int64}
  x: {kind: float}
  s: {kind: string}
  c: {kind: class_name, classes: [zebra, dog, cat]}
  v: {kind: float, column: v}
"""


def _table(root: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    n = rng.integers(-50, 50, rows)
    x = rng.normal(1e6, 3.0, rows).astype(np.float32)  # large and close together: no cancellation allowed
    s = [f"w{int(i)}" for i in rng.zipf(1.6, rows) % 300]
    c = [["zebra", "dog", "cat"][i % 3] for i in range(rows)]
    v = [list(rng.random(int(k)).astype(np.float32)) for k in rng.integers(0, 5, rows)]
    path = root / "train.parquet"
    pq.write_table(pa.table({"n": n, "x": x, "s": s, "c": c, "v": pa.array(v, pa.list_(pa.float32()))}), path)
    (root / "config.yaml").write_text(TABLE)
    return path


def test_table_statistics_equal_numpy_over_what_tensorflow_reads(tmp_path: Path) -> None:
    table = _table(tmp_path, 3000)
    out = tmp_path / "out"
    shardkit.build([table], out, config=str(tmp_path / "config.yaml"), records_per_shard=700, workers=2, progress=False)
    proto = _proto(out)
    records = tfread.read_each(str(out), "train")
    assert next(d for d in proto.datasets if d.name == "train").num_examples == len(records) == 3000
    for key in ("n", "x"):
        values = np.array([r[key] for r in records], dtype=np.float64)
        num = _feature(proto, "train", key).num_stats
        assert num.common_stats.num_non_missing == len(values)
        assert (num.min, num.max, num.num_zeros) == (values.min(), values.max(), int((values == 0).sum()))
        np.testing.assert_allclose(num.mean, values.mean(), rtol=1e-12)
        np.testing.assert_allclose(num.std_dev, values.std(), rtol=1e-9)
        quantiles = next(h for h in num.histograms if h.type == h.QUANTILES)
        error = _custom(_feature(proto, "train", key))["quantiles_rank_error"].num
        ordered = np.sort(values)
        for i, bucket in enumerate(quantiles.buckets):  # each boundary's rank (ties: a range of them) within the sketch's bound
            low, high = (np.searchsorted(ordered, bucket.low_value, side=side) / len(values) for side in ("left", "right"))
            assert low - error - 1 / len(values) <= i / 10 <= high + error + 1 / len(values), (key, i, low, high)
    lists = [np.asarray(r["v"]) for r in records]
    v = _feature(proto, "train", "v").num_stats
    flat = np.concatenate(lists).astype(np.float64)
    assert (v.common_stats.min_num_values, v.common_stats.max_num_values) == (min(map(len, lists)), max(map(len, lists)))
    assert v.common_stats.tot_num_values == len(flat)
    np.testing.assert_allclose(v.mean, flat.mean(), rtol=1e-9)
    s = _feature(proto, "train", "s").string_stats
    words = [r["s"].decode() for r in records]
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    assert s.unique == len(counts)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert [(t.value, t.frequency) for t in s.top_values] == top
    np.testing.assert_allclose(s.avg_length, np.mean([len(w.encode()) for w in words]))
    summary = shardkit.stats([str(out)]).to_dict()
    assert summary["labels"]["train"]["c"] == {"zebra": 1000, "dog": 1000, "cat": 1000}  # the manifest's counts, one source


def test_finalize_rewrites_the_same_statistics_from_the_shard_records(seg_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(AUGMENTED.replace("ENCODING", "png"))
    out = tmp_path / "out"
    shardkit.build([seg_data], out, config=str(config), seed=1, records_per_shard=12, workers=2, progress=False)
    written = (out / "statistics.pb").read_bytes()
    (out / "statistics.pb").unlink()
    shardkit.finalize(out)
    assert (out / "statistics.pb").read_bytes() == written  # each shard's part is kept with it: a resume reuses it


def test_stats_json_and_text_from_the_cli(seg_data: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from shardkit.cli.main import main

    out = tmp_path / "out"
    config = tmp_path / "config.yaml"
    config.write_text(AUGMENTED.replace("ENCODING", "jpeg"))
    shardkit.build([seg_data], out, config=str(config), seed=1, workers=1, progress=False)
    text = CliRunner().invoke(main, ["stats", str(out)])
    assert text.exit_code == 0, text.output
    assert "RGB pixels of 72 images: Normalize(mean=(" in text.output
    as_json = CliRunner().invoke(main, ["stats", "--json", str(out)])
    data = json.loads(as_json.output)
    assert data["splits"]["train"]["features"]["image"]["pixels_measured"] == 72
    assert data["splits"]["train"]["features"]["image/height"]["max"] == 48
    assert data["splits"]["train"]["features"]["image"]["type"] == "IMAGE"


def test_objects_per_image_and_coco_size_ranges_equal_what_tensorflow_reads(tmp_path: Path) -> None:
    from shardkit import demo

    root = demo.make_detection(tmp_path / "det", train=30, val=6)
    out = tmp_path / "out"
    shardkit.build([root / "annotations" / "instances_train2017.json"], out, workers=1, progress=False)
    proto = _proto(out)
    records = tfread.read_each(str(out), "train")
    areas = np.concatenate([np.asarray(r["image/object/area"]) for r in records])
    custom = _custom(_feature(proto, "train", "image/object/area"))
    expected = [int((areas < 32**2).sum()), int(((areas >= 32**2) & (areas < 96**2)).sum()), int((areas >= 96**2).sum())]
    assert [custom[f"coco_area_{n}"].num for n in ("small", "medium", "large")] == expected
    per_image = [len(r["image/object/bbox/xmin"]) for r in records]
    common = _feature(proto, "train", "image/object/bbox/xmin").num_stats.common_stats
    assert (common.min_num_values, common.max_num_values, common.tot_num_values) == (min(per_image), max(per_image), sum(per_image))


def test_pixels_of_pictures_passed_through_are_measured_on_request(cls_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build(out=out, from_folder=cls_data, workers=1, progress=False)
    assert not shardkit.stats([str(out)]).splits["train"]["features"]["image"]["pixels"]  # never decoded by the build
    measured = shardkit.stats([str(out)], pixels=True, workers=2)
    assert "computed from its shards" in measured.source
    mean, std = measured.normalize("train", scale=255)
    pixels = _pixels(tfread.read_split(str(out), "train"), "image")
    np.testing.assert_allclose(mean, pixels.mean(axis=0), atol=0.05)  # Pillow's decode and TensorFlow's INTEGER_ACCURATE
    np.testing.assert_allclose(std, pixels.std(axis=0), atol=0.05)


def test_stats_output_never_lands_inside_the_output_folder_it_reads(cls_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build(out=out, from_folder=cls_data, workers=1, progress=False)
    manifest = (out / "manifest.json").read_bytes()
    for target in (out / "manifest.json", out / "extra.pb"):
        with pytest.raises(shardkit.errors.UsageError, match="whose files are the build's"):
            shardkit.stats([str(out)], output=str(target))
    assert (out / "manifest.json").read_bytes() == manifest and not (out / "extra.pb").exists()
    shardkit.stats([str(out)], output=str(tmp_path / "stats.pb"))
    assert (tmp_path / "stats.pb").stat().st_size > 0
