"""``shardkit reshard`` over damaged shards and wrong arguments: one line naming the file and the
byte offset, nothing committed; with ``on_error="skip"`` the damage listed in errors.jsonl and
every other record written; a bad PATH or option one line, exit 2; an OUT in an input refused
before anything is written. Command-line runs go through ``tests/hostile.run_cli`` (a child under
a memory limit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import shardkit
from shardkit.errors import ShardkitError, UsageError
from tests.hostile import digests, one_line_error, run_cli
from tests.pipeline.reshard.foreign import examples, offsets, same_multiset, split_records, write_tfrecords

RECORDS = examples(range(40))
DAMAGED = 17  # the record each damaged file has its byte flipped in


def _damaged(folder: Path, where: str) -> tuple[Path, int]:
    """A TensorFlow-written file whose record ``DAMAGED`` has a byte flipped: in its payload
    (``payload``) or in its length field (``length``, the framing lost); (file, the record's offset)."""
    path = write_tfrecords(folder / "train-00000-of-00001.tfrecord", RECORDS)
    at = offsets(RECORDS)[DAMAGED]
    data = bytearray(path.read_bytes())
    data[at + (12 + 3 if where == "payload" else 1)] ^= 0x40
    path.write_bytes(bytes(data))
    return path, at


def _nothing_committed(out: Path) -> None:
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("*-of-*"))
    assert not list(out.glob(".shardkit/shards/*.json"))


@pytest.mark.slow
def test_a_damaged_record_is_one_line_with_its_file_and_offset_and_nothing_is_committed(tmp_path: Path) -> None:
    path, at = _damaged(tmp_path / "in", "payload")
    before = digests(tmp_path / "in")
    done = run_cli(["reshard", tmp_path / "in", "-o", tmp_path / "out", "--shards", "3", "-w", "1"], tmp_path)
    line = one_line_error(done)
    assert done.returncode == 1
    assert str(path) in line and f"byte {at}" in line
    _nothing_committed(tmp_path / "out")
    assert digests(tmp_path / "in") == before


def test_a_damaged_record_stops_the_api_too(tmp_path: Path) -> None:
    path, at = _damaged(tmp_path / "in", "payload")
    with pytest.raises(ShardkitError, match=f"{path}: record at byte {at}") as stopped:
        shardkit.reshard([tmp_path / "in"], tmp_path / "out", shards=3, workers=1, progress=False)
    assert not isinstance(stopped.value, UsageError)
    _nothing_committed(tmp_path / "out")


def _errors(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]


def test_skip_lists_the_damaged_record_and_writes_every_other(tmp_path: Path) -> None:
    path, at = _damaged(tmp_path / "in", "payload")
    out = tmp_path / "out"
    result = shardkit.reshard([tmp_path / "in"], out, shards=3, on_error="skip", workers=1, progress=False)
    assert result.skipped == 1 and result.records == len(RECORDS) - 1
    (entry,) = _errors(out)
    assert (entry["source"], entry["offset"], entry["split"]) == (str(path), at, "train") and entry["reason"]
    assert same_multiset(split_records(out, "train"), RECORDS[:DAMAGED] + RECORDS[DAMAGED + 1 :])
    assert shardkit.verify([str(out)]).ok


def test_skip_over_a_lost_frame_keeps_the_records_before_it_and_lists_the_rest_once(tmp_path: Path) -> None:
    path, at = _damaged(tmp_path / "in", "length")
    out = tmp_path / "out"
    result = shardkit.reshard([tmp_path / "in"], out, shards=2, on_error="skip", workers=1, progress=False)
    assert result.records == DAMAGED
    (entry,) = _errors(out)
    assert (entry["source"], entry["offset"]) == (str(path), at)
    assert same_multiset(split_records(out, "train"), RECORDS[:DAMAGED])


def _usage_line(args: list[str | Path], cwd: Path) -> str:
    done = run_cli(["reshard", *args], cwd)
    line = one_line_error(done)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [line], done.stderr  # no usage block around it
    return line


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jpeg", "text"])
def test_a_file_that_holds_no_shard_is_one_line_exit_2(tmp_path: Path, kind: str) -> None:
    from shardkit import demo

    folder = tmp_path / "in"
    if kind == "jpeg":
        demo.make_classification(folder, per_class=1, width=16, height=16)
        given = next(folder.rglob("*.jpg"))
    else:
        given = folder / "notes.txt"
        folder.mkdir()
        given.write_text("train-00000-of-00001.tfrecord\n")
    line = _usage_line([given, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert str(given) in line and "not a TFRecord or ArrayRecord file" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "options, says",
    [
        ([], "no shard files"),
        (["--shards", "0"], "--shards must be at least 1"),
        (["--multiple-of", "0"], "--multiple-of must be at least 1"),
        (["--shards", "2", "--records-per-shard", "5"], "give one of them"),
    ],
)
def test_an_empty_folder_or_a_bad_size_is_one_line_exit_2(tmp_path: Path, options: list[str], says: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    if options:
        write_tfrecords(folder / "train.tfrecord", RECORDS[:3])
    line = _usage_line([folder, "-o", tmp_path / "out", "-w", "1", *options], tmp_path)
    assert says in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["the input folder", "inside the input folder", "the folder of an input file"])
def test_an_out_in_an_input_is_refused_before_anything_is_written(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "in"
    path = write_tfrecords(folder / "train-00000-of-00001.tfrecord", RECORDS)
    given, out = {
        "the input folder": (folder, folder),
        "inside the input folder": (folder, folder / "resharded"),
        "the folder of an input file": (path, folder),
    }[where]
    before = digests(tmp_path)
    with pytest.raises(UsageError, match=str(folder)):
        shardkit.reshard([given], out, shards=2, workers=1, progress=False)
    assert digests(tmp_path) == before
    assert sorted(p.name for p in folder.iterdir()) == [path.name]  # no OUT, no .shardkit, no lock


def test_an_out_beside_the_input_files_it_was_given_is_fine(tmp_path: Path) -> None:
    """A file given by name, not its folder: a folder under that folder is no input (no PATH given reads it)."""
    path = write_tfrecords(tmp_path / "in" / "train-00000-of-00001.tfrecord", RECORDS)
    before = digests(path)
    result = shardkit.reshard([path], tmp_path / "in" / "resharded", shards=2, workers=1, progress=False)
    assert result.manifest.totals.records == len(RECORDS)
    assert digests(path) == before
