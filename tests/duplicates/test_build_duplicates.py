"""``build --duplicates report`` on a set with planted twins (re-encoded, resized, brighter, cropped),
across and within splits: every planted group in OUT/duplicates.jsonl, no other, leaks counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from tests.duplicates.planted import planted_records

STRAYS = {"brick+cropped-2"}  # a texture a 2 % crop moves 12 bits: apart at the default threshold (tests/duplicates/test_groups.py)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Index files train/val/test.txt of the planted pictures (PNG: each as its change left it); and
    each record's source id (``SPLIT.txt:LINE``) -> the base it was made from."""
    root = tmp_path_factory.mktemp("planted")
    (root / "images").mkdir()
    lines: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    base_of: dict[str, str] = {}
    for i, record in enumerate(planted_records(synthetic=6, seed=3)):
        if record.source_id in STRAYS:
            continue
        picture = record.picture if record.picture.ndim == 2 else record.picture[..., :3]  # grey photos stay grey
        Image.fromarray(np.ascontiguousarray(picture)).save(root / "images" / f"{i:03d}.png")
        lines[record.split].append(f"images/{i:03d}.png {i % 2}")
        base_of[f"{record.split}.txt:{len(lines[record.split])}"] = record.base
    for split, rows in lines.items():
        (root / f"{split}.txt").write_text("".join(row + "\n" for row in rows))
    return root, base_of


def test_every_planted_group_is_reported_with_its_leaks(planted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, base_of = planted
    out = tmp_path / "out"
    result = shardkit.build([root], out, duplicates="report", workers=2, records_per_shard=16, progress=False)
    groups = [json.loads(line) for line in (out / "duplicates.jsonl").read_text().splitlines()]
    found = {frozenset(m["source_id"] for m in g["members"]) for g in groups}
    expected: dict[str, set[str]] = {}
    for source_id, base in base_of.items():
        expected.setdefault(base, set()).add(source_id)
    assert found == {frozenset(ids) for ids in expected.values() if len(ids) > 1}
    assert all(g["distance"] <= 8 for g in groups)
    manifest = json.loads((out / "manifest.json").read_text())
    split_of = {sid: sid.split(".txt")[0] for sid in base_of}
    rank = {"train": 0, "val": 1, "test": 2}
    leaks: dict[str, int] = {}
    for ids in expected.values():
        for sid in ids:
            for other in {split_of[o] for o in ids}:
                if rank[other] < rank[split_of[sid]]:
                    leaks[f"{split_of[sid]} in {other}"] = leaks.get(f"{split_of[sid]} in {other}", 0) + 1
    assert manifest["duplicates"]["leaks"] == dict(sorted(leaks.items()))
    assert manifest["duplicates"]["groups"] == len(groups)
    assert any("have a twin in train" in note for note in result.notes)


def test_records_without_pictures_are_compared_by_their_bytes(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("n,s\n1,a\n2,b\n1,a\n")
    (tmp_path / "test.csv").write_text("n,s\n2,b\n3,c\n")
    (tmp_path / "config.yaml").write_text("features:\n  n: {kind: int64}\n  s: {kind: string}\n")
    out = tmp_path / "out"
    shardkit.build(
        [tmp_path / "train.csv", tmp_path / "test.csv"], out, config=str(tmp_path / "config.yaml"),
        duplicates="report", source_id=False, progress=False,
    )  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["duplicates"]["compared"] == "records by their bytes (no pictures)"
    groups = [json.loads(line) for line in (out / "duplicates.jsonl").read_text().splitlines()]
    assert sorted(sorted(m["source_id"] for m in g["members"]) for g in groups) == [
        ["test.csv:2", "train.csv:3"],  # a CSV's line numbers count its header
        ["train.csv:2", "train.csv:4"],
    ]
    assert manifest["duplicates"]["leaks"] == {"test in train": 1}


def test_a_threshold_outside_0_to_64_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from shardkit.cli.main import main

    result = CliRunner().invoke(
        main, ["build", str(tmp_path), "-o", str(tmp_path / "out"), "--duplicates", "report", "--duplicate-threshold", "65"]
    )
    assert result.exit_code == 2 and "0<=x<=64" in result.output.replace(" ", "")
    with pytest.raises(shardkit.errors.UsageError, match="from 0 to 64"):
        shardkit.build([tmp_path], tmp_path / "out", duplicates="report", duplicate_threshold=-1)


def test_drop_keeps_one_input_of_each_group_on_its_evaluation_side(planted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from tests import tfread

    root, base_of = planted
    out = tmp_path / "out"
    shardkit.build([root], out, duplicates="drop", workers=2, records_per_shard=16, progress=False)
    written = {s: [r["source_id"].decode() for r in tfread.read_split(str(out), s)] for s in ("train", "val", "test")}
    rank = {"train": 0, "val": 1, "test": 2}
    by_base: dict[str, list[str]] = {}
    for source_id, base in base_of.items():
        by_base.setdefault(base, []).append(source_id)
    kept = [sid for ids in written.values() for sid in ids]
    assert sorted(base_of[sid] for sid in kept) == sorted(by_base)  # one input of each group, none lost
    for sid in kept:  # ... on the highest split its group reaches
        assert rank[sid.split(".txt")[0]] == max(rank[o.split(".txt")[0]] for o in by_base[base_of[sid]])
    manifest = json.loads((out / "manifest.json").read_text())
    dropped = manifest["duplicates"]["dropped"]
    assert sum(dropped.values()) == len(base_of) - len(kept) == manifest["duplicates"]["dropped_written"]
    groups = [json.loads(line) for line in (out / "duplicates.jsonl").read_text().splitlines()]
    assert sorted(m["source_id"] for g in groups for m in g["members"] if m["dropped"]) == sorted(set(base_of) - set(kept))
    again = shardkit.build([root], out, duplicates="drop", workers=2, records_per_shard=16, progress=False)
    assert again.shards_built == 0  # resumed: the same inputs dropped, nothing to do


def test_finalize_after_nodes_that_searched_reports_as_they_did(planted: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, _ = planted
    out = tmp_path / "out"
    for node in (0, 1):
        shardkit.build([root], out, duplicates="report", num_nodes=2, node_index=node, records_per_shard=16, workers=1, progress=False)
    written = (out / "duplicates.jsonl").read_text()
    assert written
    (out / "duplicates.jsonl").unlink()
    shardkit.finalize(out)
    assert (out / "duplicates.jsonl").read_text() == written
