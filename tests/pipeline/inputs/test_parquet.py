"""Parquet inputs: a Hub export built with no config, tables mapped by a config (lists, strings,
struct fields, image bytes or paths), splits from the Hub's file names, nulls as one line or a
default, and TensorFlow reading back every value as the table holds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import ConfigError
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.parquet import PARQUET
from shardkit.pipeline.inputs.index_files import discover
from shardkit.pipeline.plan import planner
from tests.object_stores import Store
from tests.table_sets import HUB_CLASSES, png, write_hub_export, write_table
from tests.tfread import raw_records, read_split


def _table_columns(n: int) -> dict[str, list[object]]:
    rng = np.random.default_rng(7)
    return {
        "f0": [float(v) for v in rng.normal(size=n)],
        "f1": [1e-30, -0.0, float("inf"), 3.3, *rng.normal(size=n - 4).tolist()],
        "label": [int(v) for v in rng.integers(-5, 2**40, n)],
        "name": [f"näme {i} ✓" for i in range(n)],
        "ids": [list(range(i % 4)) for i in range(n)],  # ragged, with empty lists
        "tags": [[f"t{j}" for j in range(i % 3)] for i in range(n)],
        "meta": [{"score": i / 7, "who": f"w{i}"} for i in range(n)],
        "picture": [png(i) for i in range(n)],
    }


TABLE_CONFIG = """
features:
  f0: {kind: float}
  f1: {kind: float}
  label: {kind: int64}
  name: {kind: string}
  ids: {kind: int64}
  tags: {kind: string}
  score: {kind: float, column: meta.score}
  picture: {kind: image, encoding: raw}
"""


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[object]]]:
    root = tmp_path_factory.mktemp("table")
    columns = _table_columns(300)
    write_table(root / "train.parquet", columns, row_group_size=64)
    (root / "table.yaml").write_text(TABLE_CONFIG)
    return root, columns


def test_hub_splits_are_told_by_the_hubs_file_names(tmp_path: Path) -> None:
    write_hub_export(tmp_path / "set", {"train": 4, "validation": 2}, shards=2)
    found = discover([tmp_path / "set" / "data"])
    assert [(f.split, Path(f.path).name) for f in found] == [
        ("train", "train-00000-of-00002.parquet"),
        ("train", "train-00001-of-00002.parquet"),
        ("validation", "validation-00000-of-00002.parquet"),
        ("validation", "validation-00001-of-00002.parquet"),
    ]
    converted = tmp_path / "default" / "test" / "0000.parquet"  # the Hub's refs/convert/parquet layout
    write_table(converted, {"x": [1]}, 8)
    assert [f.split for f in discover([converted])] == ["test"]
    assert registry.file_format(str(converted)) is PARQUET


def test_a_hub_export_builds_with_no_config_and_tensorflow_reads_it_back(tmp_path: Path) -> None:
    written = write_hub_export(tmp_path / "set", {"train": 40, "validation": 9}, shards=2)
    out = tmp_path / "out"
    result = shardkit.build([tmp_path / "set" / "data"], out, workers=2, progress=False, records_per_shard=16)
    assert result.records == 49
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["classes"] == {"label": HUB_CLASSES}
    for split, rows in written.items():
        records = read_split(str(out), split)
        got = sorted((r["image"], int(r["label"])) for r in records)
        assert got == sorted(rows)  # the image bytes untouched, the ClassLabel ids as they are
    assert (out / "label.labels.txt").read_text().split() == HUB_CLASSES  # TFDS's ClassLabel names


def test_a_configured_table_gives_every_value_as_the_table_holds_it(table: tuple[Path, dict[str, list[object]]], tmp_path: Path) -> None:
    root, columns = table
    out = tmp_path / "out"
    shardkit.build([root / "train.parquet"], out, config=root / "table.yaml", workers=2, progress=False, records_per_shard=70)
    records = read_split(str(out), "train")
    assert len(records) == 300
    by_row = {int(r["source_id"].decode().rsplit(":", 1)[1]): r for r in records}
    assert sorted(by_row) == list(range(1, 301))  # rows count from 1, each once
    for i, record in by_row.items():
        k = i - 1
        assert record["f0"] == np.float32(columns["f0"][k]) and np.array_equal(record["f1"], np.float32(columns["f1"][k]), equal_nan=True)
        assert int(record["label"]) == columns["label"][k]
        assert record["name"] == str(columns["name"][k]).encode()
        ids = columns["ids"][k]
        assert list(record["ids"][: len(ids)]) == ids  # type: ignore[arg-type]
        tags = columns["tags"][k]
        assert [t for t in record["tags"] if t] == [t.encode() for t in tags]  # type: ignore[union-attr]
        assert record["score"] == np.float32(columns["meta"][k]["score"])  # type: ignore[index]
        assert record["picture"] == columns["picture"][k]
    schema = {e["key"]: e for e in json.loads((out / "manifest.json").read_text())["schema"]}
    assert schema["ids"]["ragged"] and (schema["ids"]["min_length"], schema["ids"]["max_length"]) == (0, 3)


def test_workers_1_and_2_write_the_same_bytes(table: tuple[Path, dict[str, list[object]]], tmp_path: Path) -> None:
    root, _ = table
    args = {"config": root / "table.yaml", "progress": False, "records_per_shard": 70}
    shardkit.build([root / "train.parquet"], tmp_path / "one", workers=1, **args)  # type: ignore[arg-type]
    shardkit.build([root / "train.parquet"], tmp_path / "two", workers=2, **args)  # type: ignore[arg-type]
    assert raw_records(str(tmp_path / "one"), "train") == raw_records(str(tmp_path / "two"), "train")


def test_image_paths_in_a_table_resolve_against_its_folder(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    for i in range(3):
        (tmp_path / "images" / f"{i}.png").write_bytes(png(100 + i))
    write_table(tmp_path / "train.parquet", {"file": [f"images/{i}.png" for i in range(3)], "label": [0, 1, 0]}, 2)
    out = tmp_path / "out"
    shardkit.build([tmp_path / "train.parquet"], out, workers=1, progress=False)
    assert sorted(r["image"] for r in read_split(str(out), "train")) == sorted(png(100 + i) for i in range(3))


def _nulls(tmp_path: Path) -> Path:
    write_table(tmp_path / "train.parquet", {"x": [1.0, None, 3.0, 4.0], "label": [0, 1, None, 1]}, 2)
    return tmp_path / "train.parquet"


def test_a_null_is_one_line_naming_the_file_row_and_column(tmp_path: Path) -> None:
    data = _nulls(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  x: {kind: float}\n  label: {kind: int64}\n")
    result = CliRunner().invoke(main, ["build", str(data), "-o", str(tmp_path / "out"), "-c", str(config), "-w", "1"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {data}:2: x: column 'x' is null: give the feature a 'default:' in the config, or build with --on-error skip"
    )
    skip = ["build", str(data), "-o", str(tmp_path / "skip"), "-c", str(config), "-w", "1", "--on-error", "skip"]
    result = CliRunner().invoke(main, skip)
    assert result.exit_code == 0, result.output
    errors = [json.loads(line) for line in (tmp_path / "skip" / "errors.jsonl").read_text().splitlines()]
    assert [(e["line"], e["reason"].split(":")[0]) for e in errors] == [(2, "x"), (3, "label")]
    assert sorted(float(r["x"]) for r in read_split(str(tmp_path / "skip"), "train")) == [1.0, 4.0]


def test_a_default_stands_for_a_null(tmp_path: Path) -> None:
    data = _nulls(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  x: {kind: float, default: -1}\n  label: {kind: int64, default: 9}\n")
    shardkit.build([data], tmp_path / "out", config=config, workers=1, progress=False)
    got = sorted((float(r["x"]), int(r["label"])) for r in read_split(str(tmp_path / "out"), "train"))
    assert got == [(-1.0, 1), (1.0, 0), (3.0, 9), (4.0, 1)]
    config.write_text("features:\n  x: {kind: float, default: nope}\n")
    with pytest.raises(ConfigError, match=r"features\.x\.default: 'nope' is not a valid float"):
        shardkit.build([data], tmp_path / "bad", config=config, workers=1, progress=False)


def test_a_missing_column_and_a_file_that_is_not_parquet_are_one_line(tmp_path: Path) -> None:
    write_table(tmp_path / "train.parquet", {"x": [1.0]}, 2)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  y: {kind: float}\n")
    result = CliRunner().invoke(main, ["build", str(tmp_path / "train.parquet"), "-o", str(tmp_path / "out"), "-c", str(config)])
    assert result.exit_code == 1 and "no column 'y'" in result.output and "Traceback" not in result.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train.parquet").write_bytes(b"not parquet at all")
    result = CliRunner().invoke(main, ["build", str(tmp_path / "bad" / "train.parquet"), "-o", str(tmp_path / "out2"), "-c", str(config)])
    assert result.exit_code == 1 and "cannot read as Parquet" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_large_table_is_planned_in_row_group_pieces_on_processes(
    table: tuple[Path, dict[str, list[object]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = table
    whole = tmp_path / "whole"
    shardkit.build([root / "train.parquet"], whole, config=root / "table.yaml", workers=1, progress=False, records_per_shard=70)
    monkeypatch.setattr(planner, "PARALLEL_BYTES", 100)  # pieces of a few row groups each, planned by two processes
    monkeypatch.setattr(planner, "PIECE_BYTES", (20_000, 20_000))
    assert len(PARQUET.cut(str(root / "train.parquet"), 20_000)) > 2
    pieces = tmp_path / "pieces"
    shardkit.build([root / "train.parquet"], pieces, config=root / "table.yaml", workers=2, progress=False, records_per_shard=70)
    assert raw_records(str(pieces), "train") == raw_records(str(whole), "train")


def test_hub_images_stored_by_path_resolve_against_the_files_folder(tmp_path: Path) -> None:
    import pyarrow as pa

    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(png(1))
    struct = pa.array([{"bytes": None, "path": "pics/a.png"}, {"bytes": png(2), "path": "elsewhere.png"}])
    write_table(tmp_path / "train.parquet", {"image": struct, "label": [0, 1]}, 8)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  image: {kind: image, encoding: raw}\n  label: {kind: class_id, classes: [a, b]}\n")
    shardkit.build([tmp_path / "train.parquet"], tmp_path / "out", config=config, workers=1, progress=False)
    got = sorted((int(r["label"]), r["image"]) for r in read_split(str(tmp_path / "out"), "train"))
    assert got == [(0, png(1)), (1, png(2))]  # the bytes where the struct has them, else the file its path names


def test_an_unlabelled_hub_row_is_bad_input_named_as_such(tmp_path: Path) -> None:
    write_hub_export(tmp_path / "set", {"test": 3})
    data = tmp_path / "set" / "data" / "test-00000-of-00001.parquet"
    import pyarrow.parquet as pq

    table = pq.read_table(data)
    pq.write_table(table.set_column(1, "label", pa_array([0, -1, 2])), data)  # the metadata kept: a test split without labels
    result = CliRunner().invoke(main, ["build", str(data), "-o", str(tmp_path / "out"), "-w", "1"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {data}:2: label: class id -1 is not one of the 3 classes (0 to 2) (-1: Hugging Face's mark of an unlabelled row)"
    )


def pa_array(values: list[int]) -> object:
    import pyarrow as pa

    return pa.array(values, pa.int64())


def test_a_table_in_a_bucket_builds_as_it_does_locally(store: Store, bucket: str, tmp_path: Path) -> None:
    written = write_hub_export(tmp_path / "set", {"train": 12}, shards=2)
    store.fs().put(str(tmp_path / "set"), f"{bucket}/set".split("://", 1)[1], recursive=True)
    shardkit.build([f"{bucket}/set/data"], tmp_path / "remote", workers=2, progress=False, seed=1)
    shardkit.build([tmp_path / "set" / "data"], tmp_path / "local", workers=2, progress=False, seed=1)
    assert len(raw_records(str(tmp_path / "remote"), "train")) == len(written["train"])
    assert [r["image"] for r in read_split(str(tmp_path / "remote"), "train")] == [
        r["image"] for r in read_split(str(tmp_path / "local"), "train")
    ]


def test_pandas_categoricals_and_decimals_are_read_as_their_values(tmp_path: Path) -> None:
    import decimal

    import pyarrow as pa

    names = pa.array(["b", "a", "b", None]).dictionary_encode()  # how pandas writes a categorical
    prices = pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3"), decimal.Decimal("0.1"), decimal.Decimal("7")], pa.decimal128(5, 2))
    write_table(tmp_path / "train.parquet", {"cls": names, "price": prices}, 2)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  cls: {kind: class_name, default: a}\n  price: {kind: float}\n")
    shardkit.build([tmp_path / "train.parquet"], tmp_path / "out", config=config, workers=1, progress=False)
    got = sorted((int(r["cls"]), float(r["price"])) for r in read_split(str(tmp_path / "out"), "train"))
    assert got == [(0, -3.0), (0, 7.0), (1, np.float32(0.1)), (1, 1.25)]  # classes a, b; decimals as float32


def test_shards_take_a_tables_images_from_rows_staged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = write_hub_export(tmp_path / "set", {"train": 40}, shards=2)
    reference = tmp_path / "reference"
    shardkit.build([tmp_path / "set" / "data"], reference, workers=1, progress=False, records_per_shard=8)
    assert not list((reference / ".shardkit").glob("plan-*/*.rows"))  # removed with the manifest

    def unread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a shard read its rows from the Parquet file")

    monkeypatch.setattr(PARQUET.__class__, "table_at", unread)  # 5 shuffled shards: each would read both files whole
    out = tmp_path / "out"
    shardkit.build([tmp_path / "set" / "data"], out, workers=2, progress=False, records_per_shard=8)
    assert raw_records(str(out), "train") == raw_records(str(reference), "train")
    augmenting = tmp_path / "flip.yaml"  # records made one by one read the staged rows too
    augmenting.write_text(
        "features:\n  image: {kind: image, encoding: png}\n  label: {kind: class_id, classes: [cat, dog, fish]}\n"
        "augment:\n  copies: 1\n  keep_original: true\n  pipeline:\n    - {__class_fullname__: HorizontalFlip, p: 1.0}\n"
    )
    flipped = shardkit.build([tmp_path / "set" / "data"], tmp_path / "flipped", config=augmenting, workers=1, progress=False)
    assert flipped.records == 2 * len(written["train"])


def test_a_rewritten_table_is_read_anew_by_the_next_build_in_the_same_process(tmp_path: Path) -> None:
    write_table(tmp_path / "train.parquet", {"x": [1, 2, 3]}, 2)
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  x: {kind: int64}\n")
    shardkit.build([tmp_path / "train.parquet"], tmp_path / "first", config=config, workers=1, progress=False)
    write_table(tmp_path / "new.parquet", {"x": [10, 20, 30, 40]}, 2)
    os.replace(tmp_path / "new.parquet", tmp_path / "train.parquet")  # as a notebook's next cell rewrites it
    shardkit.build([tmp_path / "train.parquet"], tmp_path / "second", config=config, workers=1, progress=False)
    assert sorted(int(r["x"]) for r in read_split(str(tmp_path / "second"), "train")) == [10, 20, 30, 40]
