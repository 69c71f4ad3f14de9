from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from shardkit.errors import ConfigError, EntryError, ShardkitError
from shardkit.pipeline.config import Config, parse_config
from shardkit.pipeline.inputs.entries import Entry, checked_rows, to_entry
from shardkit.pipeline.inputs.formats.image_folder import folder_rows
from shardkit.pipeline.inputs.formats.input_format import Row
from shardkit.pipeline.inputs.index_files import IndexFile, discover, split_of


@pytest.mark.parametrize(
    ("name", "split"),
    [("train_3.txt", "train"), ("val.csv", "val"), ("test-0.jsonl", "test"), ("train.part1.tsv", "train")],
)
def test_split_from_file_name(name: str, split: str) -> None:
    assert split_of(name) == split


def to_entries(rows: Iterable[Row | EntryError], config: Config, on_error: str, errors: list[EntryError]) -> Iterator[Entry]:
    """Checked entries, with paths resolved as a worker resolves them (against the index file's folder)."""
    for row in checked_rows(rows, config, on_error, errors, {}):
        yield to_entry(row, config, os.path.dirname(os.path.abspath(row.source)))


def test_discover_folders_ignore_and_split_override(tmp_path: Path) -> None:
    for name in ("train_0.txt", "train_1.txt", "val.txt", "test_old.txt", "notes.md"):
        (tmp_path / name).write_text("a.jpg 1\n")
    found = discover([tmp_path], ignore=["test_*"])
    assert [(f.name, f.split) for f in found] == [("train_0.txt", "train"), ("train_1.txt", "train"), ("val.txt", "val")]
    assert {f.split for f in discover([tmp_path / "val.txt"], split="holdout")} == {"holdout"}
    assert [f.name for f in discover([str(tmp_path / "t*_?.txt")])] == ["train_0.txt", "train_1.txt"]  # a pattern the shell left
    with pytest.raises(ShardkitError, match="no such file or folder"):
        discover([tmp_path / "missing.txt"])
    with pytest.raises(ShardkitError, match=r"unknown index format '\.md'"):
        discover([tmp_path / "notes.md"])
    with pytest.raises(ShardkitError, match="no index files left"):
        discover([tmp_path], ignore=["*"])


def rows(path: Path) -> list[Row | EntryError]:
    return list(IndexFile(path, "train").rows())


def test_txt_comments_blank_lines_and_column_count(tmp_path: Path) -> None:
    index = tmp_path / "train.txt"
    index.write_text("# header comment\n\na.jpg a.png\n  \nb.jpg b.png\nc.jpg\n")
    got = rows(index)
    assert [r.values for r in got if isinstance(r, Row)] == [("a.jpg", "a.png"), ("b.jpg", "b.png")]
    assert [r.line for r in got if isinstance(r, Row)] == [3, 5]
    bad = [r for r in got if isinstance(r, EntryError)]
    assert [str(b) for b in bad] == [f"{index}:6: 1 columns, but line 3 has 2"]


def test_csv_tsv_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("image,label\nx.jpg,cat\ny.jpg,dog,extra\n")
    got = rows(tmp_path / "a.csv")
    assert isinstance(got[0], Row) and got[0].get("label") == "cat" and got[0].line == 2
    assert isinstance(got[1], EntryError) and "3 columns, but the header has 2" in str(got[1])
    (tmp_path / "a.tsv").write_text("image\tlabel\nx y.jpg\tcat\n")
    (tsv_row,) = rows(tmp_path / "a.tsv")
    assert isinstance(tsv_row, Row) and tsv_row.get("image") == "x y.jpg"
    (tmp_path / "a.jsonl").write_text('{"image": "x.jpg", "ids": [1, 2]}\n\nnot json\n[1]\n')
    j = rows(tmp_path / "a.jsonl")
    assert isinstance(j[0], Row) and j[0].get("ids") == [1, 2]
    assert isinstance(j[1], EntryError) and j[1].line == 3 and "not valid JSON" in j[1].reason
    assert isinstance(j[2], EntryError) and j[2].reason == "expected a JSON object, got list"


def test_entries_type_and_resolve_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    index = tmp_path / "sub" / "train.jsonl"
    index.write_text(
        '{"img": "a.jpg", "n": 3, "x": [0.5, 1], "s": "héllo", "c": "dog"}\n'
        '{"img": "/abs/b.jpg", "n": "4", "x": 2, "s": "w", "c": "cat"}\n'
        '{"img": "c.jpg", "n": "four", "x": 1, "s": "w", "c": "cat"}\n'
    )
    config = parse_config(
        {
            "features": {
                "img": {"kind": "image"},
                "n": {"kind": "int64"},
                "x": {"kind": "float"},
                "s": {"kind": "string"},
                "c": {"kind": "class_name"},
            }
        }
    )
    errors: list[EntryError] = []
    entries = list(to_entries(rows(index), config, "skip", errors))
    assert entries[0].values == (str(tmp_path / "sub" / "a.jpg"), [3], [0.5, 1.0], "héllo".encode(), "dog")
    assert entries[1].values[:2] == ("/abs/b.jpg", [4])
    assert entries[0].identity == "train.jsonl:1"
    assert [str(e) for e in errors] == [f"{index}:3: n: 'four' is not a valid int64"]
    with pytest.raises(EntryError, match=r"train.jsonl:3: n: 'four' is not a valid int64"):
        list(to_entries(rows(index), config, "fail", []))


def test_named_txt_columns_need_names(tmp_path: Path) -> None:
    index = tmp_path / "train.txt"
    index.write_text("a.jpg 1\n")
    config = parse_config({"features": {"image": {"kind": "image", "column": "image"}}})
    with pytest.raises(ConfigError, match=r"features\.image\.column: column 'image' is named, .* 'columns:' list in the config in "):
        list(to_entries(rows(index), config, "skip", []))
    named = parse_config({"columns": ["image", "label"], "features": {"image": {"kind": "image", "column": "image"}}})
    assert len(list(to_entries(rows(index), named, "fail", []))) == 1


def test_unknown_column_is_a_config_error_even_with_skip(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("image,label\na.jpg,cat\n")
    config = parse_config({"features": {"image": {"kind": "image"}, "lbl": {"kind": "class_name", "column": "lable"}}}, "c.yaml")
    with pytest.raises(ConfigError) as info:
        list(to_entries(rows(tmp_path / "train.csv"), config, "skip", []))
    assert str(info.value) == f"c.yaml: features.lbl.column: no column 'lable' (columns: image, label) in {tmp_path / 'train.csv'}"
    (tmp_path / "train.txt").write_text("a.jpg\n")
    positional = parse_config({"features": {"image": {"kind": "image", "column": 0}, "label": {"kind": "int64", "column": 1}}})
    with pytest.raises(ConfigError, match=r"features\.label\.column: no column 1: the line has 1 columns"):
        list(to_entries(rows(tmp_path / "train.txt"), positional, "skip", []))


def test_folder_layouts(cls_data: Path, tmp_path: Path) -> None:
    got = list(folder_rows(cls_data))
    assert {split for split, _ in got} == {"train", "val"}
    _split, row = got[0]
    assert row.values[1] == "cat" and row.identity == "train/cat/cat_0000.jpg"
    flat = tmp_path / "flat" / "cat"
    flat.mkdir(parents=True)
    (flat / "x.jpg").write_bytes(b"")
    assert [(s, r.values[1]) for s, r in folder_rows(tmp_path / "flat")] == [("train", "cat")]


def test_spreadsheet_bom_and_hostile_jsonl_values(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_bytes("\ufeffimage,label\na.jpg,cat\n".encode())
    (row,) = rows(tmp_path / "train.csv")
    assert isinstance(row, Row) and row.names == ("image", "label")
    (tmp_path / "train.jsonl").write_text(
        '{"i": "a.jpg", "f": ' + "1" * 400 + ', "s": "x"}\n'
        '{"i": "a.jpg", "f": 1e39, "s": "x"}\n'
        '{"i": "a.jpg", "f": 1, "s": "\\ud800"}\n'
        '{"i": "a.jpg", "f": ' + "1" * 5000 + ', "s": "x"}\n'
    )
    config = parse_config({"features": {"i": {"kind": "image"}, "f": {"kind": "float"}, "s": {"kind": "string"}}})
    errors: list[EntryError] = []
    assert list(to_entries(rows(tmp_path / "train.jsonl"), config, "skip", errors)) == []
    reasons = [e.reason for e in errors]
    assert reasons[0].startswith("f: 111") and reasons[0].endswith("is not a valid float")
    assert reasons[1] == "f: value out of float32 range"
    assert reasons[2] == "s: \\ud800 is not UTF-8 text (a file name's bytes, most often): rename the file"
    assert reasons[3].startswith("not valid JSON")


def test_one_split_from_two_folders_is_refused_but_two_layouts_merge(tmp_path: Path) -> None:
    """Two ``train.txt`` in different folders would merge into one split silently: refused, with
    --split named. Two VOC folders (VOC2007 + VOC2012, the OD API's merged set) name their own
    splits: each split takes both datasets' images."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.txt").write_text("x.jpg 1\n")
    with pytest.raises(ShardkitError, match=r"b/train\.txt: its name puts it in split 'train', as .*a/train\.txt"):
        discover([tmp_path / "a" / "train.txt", tmp_path / "b" / "train.txt"])
    assert {f.split for f in discover([tmp_path / "a" / "train.txt", tmp_path / "b" / "train.txt"], split="all")} == {"all"}

    from tests.detection_sets import write_voc

    first, second = write_voc(tmp_path / "VOC2007"), write_voc(tmp_path / "VOC2012")
    found = discover([first, second])
    by_split: dict[str, set[str]] = {}
    for f in found:
        by_split.setdefault(f.split, set()).add(str(Path(f.path).relative_to(tmp_path)).split(os.sep)[0])
    assert by_split and all(roots == {"VOC2007", "VOC2012"} for roots in by_split.values())
