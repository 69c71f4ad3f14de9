"""Records made a batch at a time are the records made one by one: the same shard bytes, .idx
files and manifest, for tables, CSV and JSONL rows, small files passed through (with a broken one
skipped), Hub exports, and a classification set re-encoded; and which builds take the batch path."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.inputs.formats.image_folder import IMAGE_FOLDER
from shardkit.pipeline.inputs.formats.parquet import PARQUET
from shardkit.pipeline.inputs.formats.txt import TXT
from shardkit.pipeline.inputs.sources import PlanSource
from shardkit.pipeline.shard import batches, worker
from tests.table_sets import png, write_hub_export, write_table

ROWS_CONFIG = """
features:
  x: {kind: float}
  xs: {kind: float}
  n: {kind: int64}
  ns: {kind: int64}
  text: {kind: string}
  texts: {kind: string}
  cls: {kind: class_name}
  fixed: {kind: class_name, classes: [b, a, c]}
"""


def _rows(count: int) -> list[dict[str, Any]]:
    floats = [0.0, -0.0, 1e-30, 3.4e38, -math.inf, math.inf, 1 / 3, 2.5e-45]
    return [
        {
            "x": floats[i % len(floats)],
            "xs": [floats[(i + j) % len(floats)] for j in range(i % 4)],
            "n": [-(2**63), 2**63 - 1, -1, 0, 127, 128, 2**14, 300000][i % 8],
            "ns": list(range(i % 3, 2 * (i % 3))),
            "text": f"t{i} ünïcödé ✓" * (i % 3),
            "texts": [f"w{j}" * j for j in range(i % 4)],
            "cls": f"class-{i % 5}",
            "fixed": "abc"[i % 3],
        }
        for i in range(count)
    ]


def _inputs(kind: str, root: Path) -> tuple[list[Path], str | None]:
    rows = _rows(90)
    root.mkdir()
    if kind == "jsonl":
        (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (root / "c.yaml").write_text(ROWS_CONFIG)
        return [root / "train.jsonl"], str(root / "c.yaml")
    if kind == "csv":
        names = ["x", "n", "text", "cls", "fixed"]
        lines = [",".join(names)] + [",".join(json.dumps(r[k]) if k == "text" else str(r[k]) for k in names) for r in rows]
        (root / "train.csv").write_text("\n".join(lines) + "\n")
        kinds = {"x": "float", "n": "int64", "text": "string", "cls": "class_name", "fixed": "class_name, classes: [b, a, c]"}
        (root / "c.yaml").write_text("features:\n" + "".join(f"  {k}: {{kind: {v}}}\n" for k, v in kinds.items()))
        return [root / "train.csv"], str(root / "c.yaml")
    if kind == "parquet":
        columns = {k: [r[k] for r in rows] for k in rows[0]}
        columns["picture"] = [png(i) for i in range(90)]
        write_table(root / "train.parquet", columns, row_group_size=16)
        (root / "c.yaml").write_text(
            ROWS_CONFIG + "  picture: {kind: image, encoding: raw}\n  again: {kind: image, column: picture}\n"
            "  photo/encoded: {kind: encoded_image, column: picture}\n"
        )
        return [root / "train.parquet"], str(root / "c.yaml")
    if kind == "hub":
        write_hub_export(root, {"train": 30, "test": 7}, shards=2)
        return [root / "data"], None
    # small files passed through, one of them broken
    (root / "img").mkdir()
    lines = []
    for i in range(80):
        (root / "img" / f"{i}.png").write_bytes(png(i, size=4) if i != 17 else b"not a picture")
        lines.append(f"img/{i}.png {i % 3}")
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    return [root / "train.txt"], None


def _build(inputs: list[Path], config: str | None, out: Path, workers: int) -> None:
    shardkit.build(inputs, out, config=config, workers=workers, progress=False, records_per_shard=23, on_error="skip", seed=3)


def _output(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / "manifest.json").read_text())
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if ".tfrecord" in p.name}
    return {"files": files, **{k: manifest[k] for k in ("schema", "classes", "splits", "totals", "errors")}}


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet", "hub", "tiny"])
def test_batches_write_what_records_one_by_one_write(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs, config = _inputs(kind, tmp_path / "in")
    _build(inputs, config, tmp_path / "batched", workers=2)
    with monkeypatch.context() as patch:
        patch.setattr(worker, "batched", lambda config, sources: False)  # forked pool workers see it too
        _build(inputs, config, tmp_path / "one-by-one", workers=1)
    batched, one_by_one = _output(tmp_path / "batched"), _output(tmp_path / "one-by-one")
    assert batched["files"] and batched == one_by_one
    if kind == "tiny":
        assert batched["errors"]["skipped"] == 1
        errors = [json.loads(line) for line in (tmp_path / "batched" / "errors.jsonl").read_text().splitlines()]
        assert [(Path(e["source"]).name, e["line"]) for e in errors] == [("train.txt", 18)]
        assert (tmp_path / "batched" / "errors.jsonl").read_bytes() == (tmp_path / "one-by-one" / "errors.jsonl").read_bytes()


def test_which_builds_take_the_batch_path(tmp_path: Path) -> None:
    table = PlanSource(str(tmp_path / "t.parquet"), str(tmp_path), PARQUET)
    text = PlanSource(str(tmp_path / "t.txt"), str(tmp_path), TXT)
    plain = parse_config({"features": {"image": {"kind": "image"}, "label": {"kind": "int64"}}})
    folder = PlanSource(str(tmp_path / "train"), str(tmp_path), IMAGE_FOLDER)
    assert batches.applies(plain, [table]) and batches.applies(plain, [text, text]) and batches.applies(plain, [folder])
    assert batches.applies(plain, [table, text])  # a .txt index file is read as a table too
    assert not batches.applies(plain, [table, folder])  # tables and rows of other inputs are read apart
    with_mask = parse_config({"features": {"image": {"kind": "image"}, "mask": {"kind": "mask"}}})
    assert not batches.applies(with_mask, [text])  # a mask is checked against its image record by record
    augmented = parse_config(
        {"features": {"image": {"kind": "image"}}, "augment": {"copies": 1, "pipeline": [{"__class_fullname__": "HorizontalFlip"}]}}
    )
    assert not batches.applies(augmented, [text])


def test_lists_empty_in_every_record_are_typed_by_their_feature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"xs": [], "texts": [], "ns": []}) + "\n" for _ in range(5)))
    (tmp_path / "c.yaml").write_text("features:\n  xs: {kind: float}\n  texts: {kind: string}\n  ns: {kind: int64}\n")
    _build([tmp_path / "train.jsonl"], str(tmp_path / "c.yaml"), tmp_path / "batched", workers=1)
    with monkeypatch.context() as patch:
        patch.setattr(worker, "batched", lambda config, sources: False)
        _build([tmp_path / "train.jsonl"], str(tmp_path / "c.yaml"), tmp_path / "one-by-one", workers=1)
    assert _output(tmp_path / "batched") == _output(tmp_path / "one-by-one")


def _edge_inputs(case: str, root: Path) -> tuple[list[Path], str]:
    """Inputs where batches once went their own way (a review's findings): the per-record path is the reference."""
    import datetime

    import pyarrow as pa

    root.mkdir()
    config = root / "c.yaml"
    if case == "ids-as-text":  # class ids in a text column, and names that are digits themselves
        write_table(root / "train.parquet", {"c": ["0", "1", "0", "1", "1"]}, 2)
        config.write_text("features:\n  c: {kind: class_id, classes: ['1', '0']}\n")
        return [root / "train.parquet"], str(config)
    if case == "types-differ":  # one split, two files, the same column typed differently
        write_table(root / "train-0.parquet", {"n": [1.0, 2.0], "s": [1, 2], "l": [3, 4]}, 2)
        write_table(root / "train-1.parquet", {"n": [2**60 + 1, 5], "s": ["abc", "d"], "l": [[1, 2], []]}, 2)
        config.write_text("features:\n  n: {kind: int64}\n  s: {kind: string}\n  l: {kind: int64}\n")
        return [root / "train-0.parquet", root / "train-1.parquet"], str(config)
    if case == "defaults":  # nulls in list and scalar columns, defaults of another shape or type
        columns = {"l": pa.array([[1], None, [2, 3]]), "n": pa.array([1, None, 3]), "t": pa.array([["a"], None, []])}
        write_table(root / "train.parquet", columns, 2)
        config.write_text("features:\n  l: {kind: int64, default: 0}\n  n: {kind: int64, default: '5'}\n  t: {kind: string, default: x}\n")
        return [root / "train.parquet"], str(config)
    if case == "dates":  # class names that are not text
        write_table(root / "train.parquet", {"d": [datetime.date(2020, 1, i) for i in (1, 2, 1)]}, 2)
        config.write_text("features:\n  d: {kind: class_name}\n")
        return [root / "train.parquet"], str(config)
    if case == "mixed-json":  # a text and a list of texts in one column
        (root / "train.jsonl").write_text('{"s": "a", "n": 1}\n{"s": ["b", "c"], "n": [2, 3]}\n{"s": [], "n": 4}\n')
        config.write_text("features:\n  s: {kind: string}\n  n: {kind: int64}\n")
        return [root / "train.jsonl"], str(config)
    # every record of a shard skipped: its label counts and list lengths must not count it
    (root / "img").mkdir()
    for i in range(6):
        (root / "img" / f"{i}.png").write_bytes(png(i, size=4) if i != 2 else b"junk")
    (root / "train.jsonl").write_text("".join(json.dumps({"image": f"img/{i}.png", "label": i % 2}) + "\n" for i in range(6)))
    config.write_text("features:\n  image: {kind: image, encoding: raw}\n  label: {kind: int64}\n")
    return [root / "train.jsonl"], str(config)


@pytest.mark.parametrize("case", ["ids-as-text", "types-differ", "defaults", "dates", "mixed-json", "all-skipped"])
def test_batches_agree_where_values_are_unusual(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs, config = _edge_inputs(case, tmp_path / "in")
    per_shard = 1 if case == "all-skipped" else 10  # one shard of the junk image alone; else one block of every row
    args = {"config": config, "progress": False, "records_per_shard": per_shard, "on_error": "skip", "seed": 3, "workers": 1}
    shardkit.build(inputs, tmp_path / "batched", **args)  # type: ignore[arg-type]
    with monkeypatch.context() as patch:
        patch.setattr(worker, "batched", lambda config, sources: False)
        shardkit.build(inputs, tmp_path / "one-by-one", **args)  # type: ignore[arg-type]
    assert _output(tmp_path / "batched") == _output(tmp_path / "one-by-one")
