"""The input format registry: which format reads which input, plan payloads that read back the rows
they were written from, state compatibility, and a new format added by one module and one line."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.formats.containers.tfrecord_io import read_records
from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.image_folder import IMAGE_FOLDER
from shardkit.pipeline.inputs.formats.input_format import InputFormat, Piece, Row
from shardkit.pipeline.inputs.index_files import IndexFile
from shardkit.pipeline.inputs.sources import PlanSource


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("train.txt", "txt"),
        ("val_2.csv", "csv"),
        ("TEST.TSV", "tsv"),  # suffixes match in any case
        ("data/train.jsonl", "jsonl"),
        ("s3://bucket/data/train_0.txt", "txt"),
        ("gs://bucket/val.csv", "csv"),
        ("train.txt.gz", None),
        ("notes.md", None),
        ("instances_val2017.json", None),  # no format reads it yet: .json is claimed by content
        (".txt", None),  # a hidden file with no suffix, as os.path.splitext sees it
        ("train", None),
    ],
)
def test_a_file_is_read_by_the_format_claiming_its_suffix(path: str, name: str | None) -> None:
    found = registry.file_format(path)
    assert (found.name if found else None) == name


def test_the_table_names_each_format_and_suffix_once() -> None:
    names = [f.name for f in registry.FORMATS]
    # The names build states keep: never renamed.
    assert names == [
        "txt",
        "csv",
        "tsv",
        "jsonl",
        "parquet",
        "label-studio",
        "unread",
        "coco",
        "od-csv",
        "yolo",
        "darknet",
        "voc",
        "cvat",
        "kitti",
        "labelme",
        "folder",
    ]
    assert registry.suffixes() == (".txt", ".csv", ".tsv", ".jsonl", ".parquet")  # the order messages list them in
    assert all(registry.named(name) is f for name, f in zip(names, registry.FORMATS, strict=True))
    known = r"\(known: " + ", ".join(names) + r"\)"
    with pytest.raises(ShardkitError, match=r"unknown input format 'arrow' in the build state " + known):
        registry.named("arrow")


@dataclasses.dataclass(frozen=True)
class Peeking(InputFormat):
    """A format that takes ``.csv`` files starting with ``#peek`` ahead of the csv format, counting its peeks."""

    claims_ahead: ClassVar[tuple[str, ...]] = (".csv",)
    peeks: list[str] = dataclasses.field(default_factory=list)

    def claims(self, path: str) -> bool:
        self.peeks.append(os.path.basename(path))
        return path.endswith(self.claims_ahead) and os.path.isfile(path) and Path(path).read_bytes().startswith(b"#peek")


def test_a_format_may_take_a_file_by_content_ahead_of_its_suffix_peeking_at_its_suffixes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    peeking = Peeking("peeking")
    monkeypatch.setattr(registry, "FORMATS", (peeking, *registry.FORMATS))
    for name, text in (("train.csv", "#peek\n"), ("val.csv", "image,label\n"), ("test.txt", "#peek\n"), ("notes.md", "#peek\n")):
        (tmp_path / name).write_text(text)
    found = {name: registry.file_format(str(tmp_path / name)) for name in ("train.csv", "val.csv", "test.txt")}
    assert found == {"train.csv": peeking, "val.csv": registry.named("csv"), "test.txt": registry.named("txt")}
    assert peeking.peeks == ["train.csv", "val.csv"]  # a .txt is the txt format's without a look inside
    assert registry.file_format(str(tmp_path / "notes.md")) is None  # a suffix no format claims: every format is asked


def test_a_folder_is_read_by_the_first_format_claiming_its_layout(cls_data: Path) -> None:
    assert registry.folder_format(str(cls_data)) is IMAGE_FOLDER
    assert registry.layout_format(str(cls_data)) is None  # a layout any folder has: for --from-folder alone
    assert [(split, piece.path, piece.context) for split, piece in IMAGE_FOLDER.folder_splits(str(cls_data))] == [
        ("train", str(cls_data / "train"), str(cls_data)),
        ("val", str(cls_data / "val"), str(cls_data)),
    ]


INPUTS = {
    "train.txt": "# image label\na.jpg cat\n\nsub/b.jpg dog\n",
    "train.csv": 'image,label\na.jpg,cat\n"sub/b.jpg",dog\n',
    "train.tsv": "image\tlabel\na.jpg\tcat\nsub/b.jpg\tdog\n",
    "train.jsonl": '{"image": "a.jpg", "label": "cat"}\n{"image": "sub/b.jpg", "ids": [1, 2]}\n',
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_a_plan_payload_reads_back_the_row_it_was_written_from(name: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text(INPUTS[name])
    index = IndexFile(str(tmp_path / name), "train")
    rows = [r for r in index.rows() if isinstance(r, Row)]
    assert len(rows) == 2
    fmt = index.format
    for row in rows:
        back = fmt.plan_row(row.source, rows[0].names if fmt.keeps_names else None, row.line, fmt.plan_payload(row))
        assert back == row
    if name.endswith((".txt", ".jsonl")):  # their payload is the line as read: plans from before keep reading back
        assert [fmt.plan_payload(r) for r in rows] == [r.text for r in rows]


def test_image_folder_payload_keeps_the_identity(cls_data: Path) -> None:
    (_, piece), *_ = IMAGE_FOLDER.folder_splits(str(cls_data))
    row = next(iter(IMAGE_FOLDER.read_rows(piece)))
    payload = IMAGE_FOLDER.plan_payload(row)
    assert json.loads(payload) == [*row.values, "train/cat/cat_0000.jpg"]
    assert IMAGE_FOLDER.plan_row(row.source, None, row.line, payload) == row


@pytest.mark.parametrize("fmt", registry.FORMATS, ids=lambda f: f.name)
def test_a_source_is_stored_by_its_format_name_and_resolved_back(fmt: InputFormat) -> None:
    stored = {"path": "data/train", "folder": "/abs/data", "format": fmt.name, "names": ["image", "label"]}
    source = PlanSource.from_dict(stored)
    assert source.format is fmt and source.to_dict() == stored
    assert pickle.loads(pickle.dumps(source)) == source  # a copy on a pool or Dask worker is the same source


@dataclasses.dataclass(frozen=True)
class JsonArray(InputFormat):
    """The whole module of a new format: a ``.json`` file holding one array of objects, told by
    its content; each object a row, numbered from 1, its keys naming the columns."""

    keeps_names: ClassVar[bool] = True  # rows go into the plan as value lists, the keys once

    def claims(self, path: str) -> bool:
        return path.endswith(".json") and os.path.isfile(path) and Path(path).read_bytes().lstrip()[:1] == b"["

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        for number, obj in enumerate(json.loads(Path(piece.path).read_text()), start=1):
            yield Row(piece.path, number, tuple(obj.values()), tuple(obj))


def shards(out: Path) -> list[bytes]:
    return sorted(record for path in sorted(out.glob("*.tfrecord")) for record in read_records(str(path)))


def test_a_format_registered_by_one_line_is_discovered_planned_built_and_resumed(
    seg_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [line.split() for line in (seg_copy / "train_0.txt").read_text().splitlines() if line and not line.startswith("#")]
    (seg_copy / "train.json").write_text(json.dumps([{"image": image, "mask": mask} for image, mask in lines]))
    (seg_copy / "config.json").write_text("{}")  # an object, not an array: no format's
    with pytest.raises(ShardkitError, match=r"unknown index format '\.json'"):
        shardkit.build([seg_copy / "train.json"], tmp_path / "refused", workers=1, progress=False)

    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, JsonArray("json-array")))  # the registry line
    assert registry.file_format(str(seg_copy / "config.json")) is None
    args: dict[str, Any] = {"records_per_shard": 4, "workers": 1, "seed": 2, "progress": False, "source_id": False}
    result = shardkit.build([seg_copy / "train.json"], tmp_path / "json", **args)
    assert result.records == len(lines) and result.skipped == 0
    state = json.loads((tmp_path / "json" / ".shardkit" / "build.json").read_text())
    assert [s["format"] for s in state["splits"]["train"]["sources"]] == ["json-array"]
    reference = shardkit.build([seg_copy / "train_0.txt"], tmp_path / "txt", **args)
    assert reference.records == result.records
    assert shards(tmp_path / "json") == shards(tmp_path / "txt")  # the same images and masks, shuffled by other identities

    first = sorted((tmp_path / "json").glob("*.tfrecord"))[0]
    first.unlink()
    resumed = shardkit.build([seg_copy / "train.json"], tmp_path / "json", **args)
    assert (resumed.shards_built, resumed.shards_reused) == (1, result.shards_built - 1)
    assert shards(tmp_path / "json") == shards(tmp_path / "txt")
