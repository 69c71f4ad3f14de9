"""``shardkit.reshard`` over shards other tools wrote and over a shardkit output: every record once,
its bytes unchanged (TensorFlow and array_record read them back), shard counts as asked and
balanced, the global shuffle global and deterministic, splits from names, resume and refusal."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import StateError
from tests.arread import array_records, case, needs_array_record
from tests.hostile import digests
from tests.pipeline.reshard.foreign import (
    examples,
    ids,
    same_multiset,
    sha256s,
    shard_records,
    split_records,
    write_array_records,
    write_tfrecords,
)
from tests.tfread import raw_records

FIRST, SECOND = range(0, 60), range(1000, 1060)


@pytest.fixture()
def two_files(tmp_path: Path) -> Path:
    """A folder of two TFRecord files TensorFlow wrote, 60 records each, of distinct ids."""
    folder = tmp_path / "in"
    write_tfrecords(folder / "train-00000-of-00002.tfrecord", examples(FIRST))
    write_tfrecords(folder / "train-00001-of-00002.tfrecord", examples(SECOND))
    return folder


def _inputs(folder: Path) -> list[bytes]:
    return [r for path in sorted(folder.glob("*.tfrecord")) for r in raw_records_of(path)]


def raw_records_of(path: Path, compression: str = "") -> list[bytes]:
    import tensorflow as tf

    return [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def _counts(out: Path) -> list[int]:
    return [len(records) for records in shard_records(out).values()]


def test_a_folder_of_foreign_tfrecords_is_globally_shuffled_into_balanced_shards(two_files: Path, tmp_path: Path) -> None:
    before = digests(two_files)
    out = tmp_path / "out"
    result = shardkit.reshard([two_files], out, shards=3, workers=1, progress=False)
    assert (result.records, result.shards_written, result.skipped) == (120, 3, 0)
    written = split_records(out, "train")
    assert same_multiset(written, _inputs(two_files))  # each record once, its bytes unchanged
    assert ids(written) != [*FIRST, *SECOND]
    shards = shard_records(out)
    assert list(shards) == [f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    for records in shards.values():
        got = set(ids(records))
        assert len(records) == 40 and got & set(FIRST) and got & set(SECOND)  # every shard a sample of both files
    assert shardkit.verify([str(out)]).ok
    described = shardkit.inspect([str(out)])
    assert described["outputs"] and described["files"] is None
    manifest = json.loads((out / "manifest.json").read_text())
    assert {f["key"]: f["dtype"] for f in manifest["schema"]} == {"id": "int64", "text": "bytes"}
    assert digests(two_files) == before


def test_a_glob_and_a_split_named_for_all(two_files: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.reshard([str(two_files / "*-00001-*.tfrecord")], out, split="validation", shards=2, workers=1, progress=False)
    assert list(json.loads((out / "manifest.json").read_text())["splits"]) == ["validation"]
    assert same_multiset(split_records(out, "validation"), examples(SECOND))


def test_gzip_input_is_known_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    path = write_tfrecords(tmp_path / "in" / "train.tfrecord", examples(range(50)), gzip=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    out = tmp_path / "out"
    shardkit.reshard([path], out, shards=2, workers=1, progress=False)
    assert same_multiset(split_records(out, "train"), examples(range(50)))
    assert not list((out / ".shardkit").rglob("input-*"))  # the inflated copy is gone once the shards are written


@needs_array_record
def test_array_record_files_array_record_wrote(tmp_path: Path) -> None:
    path = write_array_records(tmp_path / "in" / "train-00000-of-00001.array_record", examples(range(70)))
    out = tmp_path / "out"
    shardkit.reshard([path], out, shards=3, workers=1, progress=False)
    assert same_multiset(split_records(out, "train"), examples(range(70)))
    assert _counts(out) == [24, 23, 23]


@pytest.mark.parametrize("formats", [case("arrayrecord"), case("tfrecord,arrayrecord")])
def test_converted_to_array_record_for_grain(two_files: Path, tmp_path: Path, formats: str) -> None:
    out = tmp_path / "out"
    shardkit.reshard([two_files], out, shards=4, format=formats, workers=1, progress=False)
    arrays = array_records(str(out), "train")  # array_record's ArrayRecordDataSource
    assert same_multiset(arrays, _inputs(two_files))
    if formats == "tfrecord,arrayrecord":
        assert arrays == split_records(out, "train")  # the twins hold the same records in the same order
    assert shardkit.verify([str(out)]).ok


def test_a_shardkit_output_keeps_its_schema_config_and_classes(cls_data: Path, tmp_path: Path) -> None:
    built = tmp_path / "built"
    shardkit.build(out=built, from_folder=cls_data, workers=1, progress=False)
    before = digests(built)
    out = tmp_path / "out"
    shardkit.reshard([built], out, shards=3, seed=5, workers=1, progress=False)
    source, made = (json.loads((p / "manifest.json").read_text()) for p in (built, out))
    for key in ("schema", "config", "classes"):
        assert made[key] == source[key], key
    assert source["classes"]
    assert list(made["splits"]) == list(source["splits"])
    for split in source["splits"]:
        assert same_multiset(split_records(out, split), raw_records(str(built), split))
        assert made["splits"][split]["num_shards"] == 3
    assert shardkit.verify([str(out)]).ok
    assert digests(built) == before


def _payload(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.tfrecord"))  # framing included: what --shard-size counts


@pytest.mark.parametrize(
    "sizing, expected",
    [
        ({"shards": 7}, 7),
        ({"records_per_shard": 25}, 5),
        ({"shard_size": "2kB"}, None),  # ceil(bytes / 2000)
        ({"shards": 5, "multiple_of": 4}, 8),
        ({"records_per_shard": 100, "multiple_of": 3}, 3),
        ({"shards": 1, "multiple_of": 6}, 6),  # never under H
    ],
)
def test_shard_counts_as_asked_and_no_two_shards_differ_by_more_than_one(
    two_files: Path, tmp_path: Path, sizing: dict[str, object], expected: int | None
) -> None:
    out = tmp_path / "out"
    shardkit.reshard([two_files], out, workers=1, progress=False, **sizing)  # type: ignore[arg-type]
    counts = _counts(out)
    assert len(counts) == (expected or -(-_payload(two_files) // 2000))
    assert sum(counts) == 120 and max(counts) - min(counts) <= 1


@pytest.mark.parametrize("formats", [case("tfrecord"), case("tfrecord,arrayrecord")])
def test_more_hosts_than_records_gives_every_host_a_shard_that_verify_passes(tmp_path: Path, formats: str) -> None:
    path = write_tfrecords(tmp_path / "in" / "train.tfrecord", examples(range(5)))
    out = tmp_path / "out"
    shardkit.reshard([path], out, multiple_of=8, format=formats, workers=1, progress=False)
    counts = _counts(out)
    assert sorted(counts) == [0, 0, 0, 1, 1, 1, 1, 1]
    assert same_multiset(split_records(out, "train"), examples(range(5)))
    if "arrayrecord" in formats:
        assert array_records(str(out), "train") == split_records(out, "train")
    report = shardkit.verify([str(out)])
    assert report.ok, report


def test_no_shuffle_keeps_the_inputs_order_exactly(two_files: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.reshard([two_files], out, shards=7, shuffle=False, workers=1, progress=False)
    assert split_records(out, "train") == _inputs(two_files)


def test_the_shuffle_is_the_seed_s_alone(two_files: Path, tmp_path: Path) -> None:
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        shardkit.reshard([two_files], tmp_path / name, shards=3, seed=seed, workers=1 if name == "a" else 2, progress=False)
    assert sha256s(tmp_path / "a") == sha256s(tmp_path / "b")  # workers do not change a byte
    a, c = split_records(tmp_path / "a", "train"), split_records(tmp_path / "c", "train")
    assert same_multiset(a, c) and a != c


def test_splits_from_file_names_or_one_split_for_all(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    write_tfrecords(folder / "train-00003-of-00010.tfrecord", examples(range(30)))
    write_tfrecords(folder / "mnist-validation.tfrecord-00000-of-00001", examples(range(100, 110)))
    out = tmp_path / "out"
    shardkit.reshard([folder], out, shards=2, workers=1, progress=False)
    splits = json.loads((out / "manifest.json").read_text())["splits"]
    assert {name: s["records"] for name, s in splits.items()} == {"train": 30, "validation": 10}
    assert same_multiset(split_records(out, "validation"), examples(range(100, 110)))
    together = tmp_path / "together"
    shardkit.reshard([folder], together, split="train", shards=2, workers=1, progress=False)
    assert Counter(ids(split_records(together, "train"))) == Counter([*range(30), *range(100, 110)])


def test_a_second_run_keeps_every_shard_and_another_option_is_refused(two_files: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.reshard([two_files], out, shards=4, workers=1, progress=False)
    first = sha256s(out)
    stamps = {name: (out / name).stat().st_mtime_ns for name in first}
    again = shardkit.reshard([two_files], out, shards=4, workers=1, progress=False)
    assert (again.shards_written, again.shards_reused, again.records) == (0, 4, 120)
    assert {name: (out / name).stat().st_mtime_ns for name in first} == stamps
    with pytest.raises(StateError):
        shardkit.reshard([two_files], out, shards=5, workers=1, progress=False)
    assert sha256s(out) == first  # the refusal wrote nothing
    replaced = shardkit.reshard([two_files], out, shards=5, overwrite=True, workers=1, progress=False)
    assert replaced.shards_written == 5 and len(_counts(out)) == 5
    assert shardkit.verify([str(out)]).ok
