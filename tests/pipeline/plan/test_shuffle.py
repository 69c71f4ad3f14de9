"""Shards a model trains well on: shuffled by default from --seed, each record naming its input,
the label mix of every shard counted, and a plan whose memory does not grow with the entries."""

from __future__ import annotations

import itertools
import os
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import shardkit
from shardkit.cli import main
from shardkit.errors import ConfigError, EntryError, OutputError
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.inputs.splits import resolve_config, rows_by_split
from shardkit.pipeline.plan.arithmetic import ShuffleKeys, identity_keys
from shardkit.pipeline.plan.planner import make_plan
from tests.tfread import by_source, read_split, shard_files

CLASSES = ("ant", "bee", "cat", "dog", "elk")
PER_CLASS = 200


@pytest.fixture(scope="module")
def sorted_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5 classes x 200 tiny images as an ImageFolder tree, and the same as an index file sorted by class."""
    root = tmp_path_factory.mktemp("sorted")
    lines = []
    for c, name in enumerate(CLASSES):
        folder = root / "photos" / name
        folder.mkdir(parents=True)
        for i in range(PER_CLASS):
            Image.fromarray(np.full((4, 4, 3), (c * 40 + i) % 256, np.uint8)).save(folder / f"{i:03d}.png")
            lines.append(f"photos/{name}/{i:03d}.png {name}\n")
    (root / "train.txt").write_text("".join(lines))  # what `find photos -name '*.png'` would give, class by class
    return root


def total_variation(counts: Counter[str], whole: Counter[str]) -> float:
    n, total = sum(counts.values()), sum(whole.values())
    return 0.5 * sum(abs(counts[k] / n - whole[k] / total) for k in whole)


def longest_run(labels: list[Any]) -> int:
    return max(len(list(group)) for _, group in itertools.groupby(labels))


def shards_labels(out: Path) -> list[list[int]]:
    import tensorflow as tf

    shards = []
    for path in shard_files(str(out), "train"):
        spec = {"label": tf.io.FixedLenFeature([], tf.int64)}
        shards.append([int(tf.io.parse_single_example(r, spec)["label"]) for r in tf.data.TFRecordDataset(path)])
    return shards


@pytest.mark.parametrize("source", ["folder", "index"])
def test_class_sorted_inputs_give_shards_with_the_split_mix(sorted_data: Path, tmp_path: Path, source: str) -> None:
    inputs: dict[str, Any] = {"from_folder": sorted_data / "photos"} if source == "folder" else {"indexes": [sorted_data / "train.txt"]}
    config = (
        None
        if source == "folder"
        else parse_config(
            {"features": {"image": {"kind": "image", "column": 0, "encoding": "raw"}, "label": {"kind": "class_name", "column": 1}}}
        )
    )
    shuffled = shardkit.build(out=tmp_path / "shuffled", config=config, records_per_shard=250, workers=2, seed=5, progress=False, **inputs)
    plain = shardkit.build(out=tmp_path / "plain", config=config, records_per_shard=250, workers=2, shuffle=False, progress=False, **inputs)
    whole = Counter({str(c): PER_CLASS for c in range(len(CLASSES))})
    table = []
    for name, out in (("shuffled", tmp_path / "shuffled"), ("plain", tmp_path / "plain")):
        shards = shards_labels(out)
        assert sorted(itertools.chain(*shards)) == sorted(c for c in range(len(CLASSES)) for _ in range(PER_CLASS))  # nothing lost
        table.append((name, max(total_variation(Counter(map(str, s)), whole) for s in shards), max(map(longest_run, shards))))
    (_, tv_shuffled, run_shuffled), (_, tv_plain, run_plain) = table
    # Random shards of 250 from 5 even classes deviate by about 0.05 on average; input order by 0.6.
    assert tv_shuffled < 0.15 and run_shuffled <= 8, table
    assert tv_plain > 0.59 and run_plain >= PER_CLASS, table
    # The manifest counts every shard's labels, and inspect reports the largest deviation.
    for result in (shuffled, plain):
        assert result.manifest is not None
        split = result.manifest.splits["train"]
        assert split.labels is not None and split.labels["label"] == {name: PER_CLASS for name in CLASSES}
        assert sum(sum(s.labels["label"].values()) for s in split.shards) == len(CLASSES) * PER_CLASS
    [balance] = shardkit.inspect([str(tmp_path / "shuffled")])["outputs"][0]["label_balance"]
    assert balance["key"] == "label" and balance["largest_deviation"] == pytest.approx(tv_shuffled, abs=1e-3)
    assert balance["by_chance"] == pytest.approx(0.05, abs=0.01)
    text = CliRunner().invoke(main, ["inspect", str(tmp_path / "plain")]).output
    assert "label balance" in text and "  label  train       5" in text


def test_no_shuffle_keeps_the_input_order_and_names_the_lines(seg_data: Path, tmp_path: Path) -> None:
    result = shardkit.build(
        [seg_data / "train_0.txt", seg_data / "train_1.txt"],
        tmp_path / "out",
        records_per_shard=5,
        shuffle=False,
        workers=1,
        progress=False,
    )
    expected = [
        f"{name}:{n}"
        for name in ("train_0.txt", "train_1.txt")
        for n, line in enumerate((seg_data / name).read_text().splitlines(), 1)
        if line.strip() and not line.startswith("#")
    ]
    assert [r["source_id"].decode() for r in read_split(str(tmp_path / "out"), "train")] == expected
    assert result.manifest is not None
    assert result.manifest.splits["train"].shards[0].covers == ((str(seg_data / "train_0.txt"), 2, 6),)
    assert result.manifest.to_dict()["splits"]["train"]["shards"][0]["covers"] == [[str(seg_data / "train_0.txt"), 2, 6]]
    assert result.manifest.parameters.shuffle is False


def test_the_records_of_one_input_are_spread_over_its_shard(augmented: Path, tmp_path: Path) -> None:
    """Four records per input (original + 3 copies): shuffled, a pair of neighbours shares its input about
    as often as chance says (2 pairs a shard); unshuffled, every input's records sit together."""
    common: dict[str, Any] = {"config": str(augmented / "config.yaml"), "records_per_shard": 20, "workers": 2, "progress": False}
    shardkit.build([augmented / "val.txt"], tmp_path / "spread", **common)
    shardkit.build([augmented / "val.txt"], tmp_path / "together", shuffle=False, **common)
    # 2 shards of 80 records: by chance 79 * 3/79 = 3 neighbour pairs a shard; in input order 3 per input.
    for out, low, high in ((tmp_path / "spread", 0, 15), (tmp_path / "together", 120, 120)):
        records = read_split(str(out), "val")
        assert len(records) == 160 and all(len(group) == 4 for group in by_source(records).values())
        neighbours = sum(a["source_id"] == b["source_id"] for a, b in itertools.pairwise(records))
        assert low <= neighbours <= high, (out.name, neighbours)


def test_the_seed_changes_the_order_and_nothing_else(sorted_data: Path, tmp_path: Path) -> None:
    args: dict[str, Any] = {"from_folder": sorted_data / "photos", "records_per_shard": 500, "workers": 1, "progress": False}
    shardkit.build(out=tmp_path / "a", seed=1, **args)
    shardkit.build(out=tmp_path / "b", seed=2, **args)
    a, b = (read_split(str(tmp_path / name), "train") for name in ("a", "b"))
    assert [r["source_id"] for r in a] != [r["source_id"] for r in b]
    assert sorted(r["image"] for r in a) == sorted(r["image"] for r in b)


def test_source_id_can_be_left_out_and_must_not_clash(seg_data: Path, tmp_path: Path) -> None:
    result = shardkit.build([seg_data / "val.txt"], tmp_path / "out", source_id=False, workers=1, progress=False)
    assert result.manifest is not None and "source_id" not in {f["key"] for f in result.manifest.schema}
    assert "source_id" not in read_split(str(tmp_path / "out"), "val")[0]
    clashing = parse_config({"features": {"image": {"kind": "image", "column": 0}, "source_id": {"kind": "string", "column": 1}}})
    with pytest.raises(ConfigError, match=r"features.source_id: shardkit adds a source_id feature .* --no-source-id"):
        shardkit.build([seg_data / "val.txt"], tmp_path / "clash", config=clashing, workers=1, progress=False)
    assert (
        shardkit.build([seg_data / "val.txt"], tmp_path / "clash", config=clashing, source_id=False, workers=1, progress=False).records == 8
    )


def test_shuffling_is_part_of_the_build_fingerprint(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([seg_data / "val.txt"], out, workers=1, progress=False)
    with pytest.raises(OutputError, match="already holds a different build \\(different parameters\\)"):
        shardkit.build([seg_data / "val.txt"], out, shuffle=False, workers=1, progress=False)
    with pytest.raises(OutputError, match="already holds a different build \\(different config\\)"):
        shardkit.build([seg_data / "val.txt"], out, source_id=False, workers=1, progress=False)


def _plan_peak(tmp_path: Path, entries: int) -> tuple[int, int]:
    """Peak Python allocations while planning an index of ``entries`` lines (a 1 MB spool buffer)."""
    index = tmp_path / f"n{entries}" / "train.txt"
    index.parent.mkdir()
    with index.open("w") as f:
        for start in range(0, entries, 10_000):
            f.writelines(
                f"images/{i % 300:03d}.jpg {CLASSES[i * len(CLASSES) // entries]}\n" for i in range(start, min(entries, start + 10_000))
            )
    folder = tmp_path / f"plan{entries}"
    folder.mkdir()
    splits, _ = rows_by_split([index], None, None, ())
    config = resolve_config(
        parse_config(
            {"features": {"image": {"kind": "image", "column": 0, "encoding": "raw"}, "label": {"kind": "class_name", "column": 1}}}
        ),
        splits,
    ).with_source_id()
    tracemalloc.start()
    try:
        plan = make_plan(
            splits, config, str(folder), seed=0, shuffle=True, records_per_shard=None, on_error="fail", durable=False, buffer_bytes=1 << 20
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan.splits["train"].entries == entries
    return peak, os.path.getsize(folder / "train.plan")


@pytest.mark.slow
def test_planning_memory_does_not_grow_with_the_entries(tmp_path: Path) -> None:
    small, _ = _plan_peak(tmp_path, 50_000)
    large, plan_bytes = _plan_peak(tmp_path, 1_000_000)
    # The plan file holds ~27 MB of lines (a .txt row's plan line names it by line, with no payload);
    # planning keeps the spool's buffer and one bucket (1/256) in memory.
    assert plan_bytes > 20_000_000
    assert large < 12_000_000 and large < 2 * small, (small, large)


def test_a_worker_reads_its_plan_lines_a_block_at_a_time(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shardkit.pipeline.plan.plan_file as plan_file

    shardkit.build([seg_data], tmp_path / "whole", records_per_shard=10, workers=1, seed=4, progress=False)
    monkeypatch.setattr(plan_file, "BLOCK_BYTES", 37)  # lines cut across blocks, many blocks a shard
    shardkit.build([seg_data], tmp_path / "blocks", records_per_shard=10, workers=1, seed=4, progress=False)
    shards = sorted(p.name for p in (tmp_path / "whole").glob("*.tfrecord"))
    assert len(shards) == 4
    assert all((tmp_path / "blocks" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes() for name in shards)


def _index_text(lines: int, bad: tuple[int, ...] = ()) -> str:
    """A .txt index with a BOM, comments, blank lines, CRLF and lone-CR line ends, and bad rows."""
    out = ["\ufeff# images and classes\r\n"]
    for i in range(lines):
        end = ("\n", "\r\n", "\r")[i % 3]
        if i in bad:
            out.append(f"only-one-column{end}")
        elif i % 50 == 7:
            out.append(f"# a comment{end}\n")
        else:
            out.append(f"images/{i % 300:03d}.jpg {CLASSES[i % len(CLASSES)]}{end}")
    return "".join(out)


def _plan_with(tmp_path: Path, name: str, index: Path, processes: int, on_error: str = "skip") -> tuple[Any, bytes]:
    folder = tmp_path / name
    folder.mkdir()
    splits, _ = rows_by_split([index], None, None, ())
    raw = {"features": {"image": {"kind": "image", "column": 0, "encoding": "raw"}, "label": {"kind": "class_name", "column": 1}}}
    config = resolve_config(parse_config(raw), splits).with_source_id()
    plan = make_plan(splits, config, str(folder), seed=3, shuffle=True, records_per_shard=1000, on_error=on_error, processes=processes)
    return plan, (folder / f"{index.stem}.plan").read_bytes()


def test_planning_in_pieces_on_processes_gives_the_same_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shardkit.pipeline.plan.planner as planner
    from shardkit.pipeline.inputs.index_files import IndexFile

    index = tmp_path / "train.txt"
    index.write_text(_index_text(20_000, bad=(3, 9_000, 17_500)), newline="")
    monkeypatch.setattr(planner, "PARALLEL_BYTES", 1000)
    monkeypatch.setattr(planner, "PIECE_BYTES", (50_000, 50_000))
    pieces = IndexFile(index, "train").pieces(50_000)
    assert len(pieces) > 5
    whole = [(r.line, r.values) if not isinstance(r, Exception) else str(r) for r in IndexFile(index, "train").rows()]
    cut = [(r.line, r.values) if not isinstance(r, Exception) else str(r) for p in pieces for r in IndexFile(index, "train").rows(p)]
    assert cut == whole  # same line numbers (CRLF, lone CR, BOM, comments), same width errors
    one, one_bytes = _plan_with(tmp_path, "one", index, 1)
    two, two_bytes = _plan_with(tmp_path, "two", index, 2)
    assert two_bytes == one_bytes and two.splits == one.splits and two.config == one.config
    assert [e.line for e in two.skipped] == [e.line for e in one.skipped] and len(one.skipped) == 3
    with pytest.raises(EntryError, match=r"train.txt:5: 1 columns, but line 2 has 2"):
        _plan_with(tmp_path, "fail", index, 2, on_error="fail")  # the first bad line, whichever process met one first


def test_a_split_with_no_entries_and_a_run_killed_before_its_state(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shardkit.pipeline.builder as builder

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("".join(f"{seg_data}/images/train_{i:05d}.jpg {seg_data}/masks/train_{i:05d}.png\n" for i in range(3)))
    (data / "val.txt").write_text("# nothing yet\n")
    published = builder._publish_state

    def killed(*args: Any) -> Any:
        raise KeyboardInterrupt  # after the plan folder is in place, before the state names it

    monkeypatch.setattr(builder, "_publish_state", killed)
    with pytest.raises(KeyboardInterrupt):
        shardkit.build([data], tmp_path / "out", workers=1, progress=False)
    assert list((tmp_path / "out" / ".shardkit").glob("plan-*")) and not (tmp_path / "out" / ".shardkit" / "build.json").exists()
    monkeypatch.setattr(builder, "_publish_state", published)
    result = shardkit.build([data], tmp_path / "out", workers=1, progress=False)  # resumes: the plan alone is not a foreign build
    assert result.manifest is not None
    val = result.manifest.splits["val"]
    assert (val.records, val.num_shards, val.shards) == (0, 0, ())
    assert result.records == 3


def test_labels_count_only_the_records_written(cls_data: Path, tmp_path: Path) -> None:
    photos = tmp_path / "photos"
    for name in ("cat", "dog"):
        (photos / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (8, 8), (i * 90, 0, 0)).save(photos / name / f"{i}.png")
    (photos / "dog" / "1.png").write_bytes((photos / "dog" / "1.png").read_bytes()[:45])  # the header is whole, the pixels are not
    config = parse_config(
        {"features": {"label": {"kind": "class_name", "column": 1}, "image": {"kind": "image", "column": 0, "encoding": "jpeg"}}}
    )
    result = shardkit.build(out=tmp_path / "out", from_folder=photos, config=config, on_error="skip", workers=1, progress=False)
    assert result.records == 3 and result.skipped == 1
    assert result.manifest is not None and result.manifest.splits["train"].labels == {"label": {"cat": 2, "dog": 1}}


def test_planning_has_its_own_progress_line(seg_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shardkit.build([seg_data], tmp_path / "out", workers=1, progress=True)
    err = capsys.readouterr().err
    assert "planning: 32.0 entries" in err and "building: 100%" in err  # counts scale: 1.00M entries


@pytest.mark.parametrize("name", ["train.csv", "répertoire-été.txt"])
def test_a_tables_keys_are_the_keys_its_rows_had_one_by_one(name: str) -> None:
    """A CSV, TSV, .txt or .jsonl row keeps the shuffle key it had when such files were planned
    row by row (the hash of ``FILE:LINE``): the same build, the same order, whichever path planned it."""
    rows = np.array([1, 2, 17, 999_999_999_999], dtype=np.int64)
    one_by_one = [int.from_bytes(ShuffleKeys(7, 3)(f"{name}:{n}"), "big") for n in rows.tolist()]
    assert identity_keys(7, 3, name, rows).tolist() == one_by_one
