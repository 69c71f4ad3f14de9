"""The typed contract of OUT: the manifest, build state and shard records read back what the build
wrote, key for key and in order; older manifests load with defaults; every name in OUT comes from
``output.layout``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import ShardkitError
from shardkit.output import layout
from shardkit.output.build_state import STATE_VERSION, BuildState, difference, read_state
from shardkit.output.found import load_output
from shardkit.output.manifest import Manifest, ManifestError
from shardkit.output.shard_record import ShardResult, load_shard_records
from shardkit.reader import ShardReader


@pytest.fixture(scope="module")
def built(seg_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("contract") / "out"
    shardkit.build([seg_data], out, workers=1, records_per_shard=10, progress=False)
    return out


def test_each_file_reads_back_to_the_same_document(built: Path) -> None:
    for path, load in (
        (built / layout.MANIFEST, Manifest.from_dict),
        (built / layout.STATE_DIR / layout.BUILD_STATE, BuildState.from_dict),
    ):
        text = path.read_text()
        again = json.dumps(load(json.loads(text)).to_dict(), indent=2) + "\n"
        assert again == text, path  # the same keys, values and order: users diff these files
    records = load_shard_records(str(built))
    assert len(records) == 4
    for name, record in records.items():
        text = (built / layout.STATE_DIR / layout.SHARD_RECORDS / layout.shard_record_name(name)).read_text()
        assert ShardResult.from_dict(json.loads(text)) == record and json.dumps(record.to_dict(), indent=2) + "\n" == text


def test_the_build_state_is_the_one_a_rerun_resumes(built: Path) -> None:
    state = read_state(str(built))
    assert state.version == STATE_VERSION and state.planned and set(state.splits) == {"train", "val"}
    assert sum(plan.num_shards for plan in state.splits.values()) == len(load_output(str(built)).manifest.shards())
    assert difference(state, state) == "a different shardkit state version"


def test_a_manifest_from_before_labels_inputs_and_index_still_reads(built: Path, tmp_path: Path) -> None:
    """The first manifests had no inputs, run, entries_per_shard, label counts or .idx names."""
    doc = json.loads((built / layout.MANIFEST).read_text())
    for key in ("inputs", "run"):
        del doc[key]
    for key in ("index", "shuffle"):
        del doc["parameters"][key]
    for split in doc["splits"].values():
        del split["entries_per_shard"], split["labels"]
        for shard in split["shards"]:
            del shard["index"], shard["labels"], shard["covers"]
    old = tmp_path / "old"
    old.mkdir()
    for path in built.iterdir():
        if path.is_file():
            (old / path.name).write_bytes(path.read_bytes())
    (old / layout.MANIFEST).write_text(json.dumps(doc))

    manifest = load_output(str(old)).manifest
    train = manifest.splits["train"]
    assert (manifest.inputs, manifest.run, train.entries_per_shard, train.labels) == ({}, {}, None, None)
    assert manifest.parameters.index and manifest.parameters.shuffle
    assert all(s.index is None and s.labels == {} and s.covers == () for s in train.shards)
    assert manifest.totals == load_output(str(built)).manifest.totals
    assert shardkit.verify([str(old)]).ok  # the .idx files beside the shards are still checked by name
    assert len(ShardReader(str(old), "train")) == train.records  # and found by name
    assert shardkit.inspect([str(old)])["outputs"][0]["label_balance"] == []


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda m: m.update(format="other"), "not a shardkit manifest"),
        (lambda m: m.update(splits=[]), "damaged manifest: splits is not a mapping"),
        (lambda m: m["splits"]["val"].pop("bytes"), "damaged manifest: split 'val' has no bytes count"),
        (lambda m: m["splits"]["val"]["shards"][0].update(name="../x"), "damaged manifest: shard name '../x' is not a file name"),
        (lambda m: m.update(schema=[{"key": "x"}]), "damaged manifest: schema is not a list of features with key and dtype"),
        (lambda m: m.update(parameters=None), "damaged manifest: parameters is not a mapping"),
        (lambda m: m.update(version="1"), "damaged manifest: version '1' is not a number"),
        (lambda m: m.update(version=3), "manifest version 3 is newer than this shardkit reads (2): upgrade shardkit to read it"),
    ],
)
def test_a_damaged_manifest_says_what_is_wrong(built: Path, damage: Callable[[dict[str, Any]], object], problem: str) -> None:
    doc = json.loads((built / layout.MANIFEST).read_text())
    damage(doc)
    with pytest.raises(ManifestError, match="^" + re.escape(problem) + "$"):
        Manifest.from_dict(doc)


def test_a_damaged_manifest_on_disk_is_one_line_naming_it(built: Path, tmp_path: Path) -> None:
    (tmp_path / layout.MANIFEST).write_text(json.dumps({"format": "shardkit.manifest", "splits": {"train": {}}}))
    with pytest.raises(ShardkitError, match=r"manifest\.json: damaged manifest: split 'train' has no shard list$"):
        load_output(str(tmp_path))


def test_layout_names_what_a_build_writes(built: Path) -> None:
    top = sorted(p.name for p in built.iterdir() if p.is_file())
    assert top and all(layout.is_built_name(name) for name in top)
    assert not layout.is_built_name(".train-00000-of-00003.tfrecord.incomplete-1a2b3c4d") and not layout.is_built_name("notes.txt")
    assert layout.is_temp_name(".train-00000-of-00003.tfrecord.incomplete-1a2b3c4d")
    manifest = load_output(str(built)).manifest
    assert {s.index for _, s in manifest.shards()} == {s.name + ".idx" for _, s in manifest.shards()}
    assert (built / layout.STATE_DIR / layout.lock_name()).exists()
    assert layout.lock_name(3) == "lock.node-3" and layout.is_node_lock(layout.lock_name(3)) and not layout.is_node_lock(layout.lock_name())
    state = read_state(str(built))
    assert state.plan == layout.plan_name(state.fingerprint) and {p.file for p in state.splits.values()} == {"train.plan", "val.plan"}


def test_temp_files_are_the_temp_names_a_build_writes_wherever_it_writes_them(tmp_path: Path) -> None:
    """The sweep a stopped build and its rerun make: shards, .idx, spread records, metadata at the
    top, the state beside it, shard records in theirs; a node's own shards alone when asked."""
    ours = [
        ".train-00001-of-00004.tfrecord.incomplete-1a2b3c4d",
        ".train-00001-of-00004.tfrecord.idx.incomplete-1a2b3c4d",
        ".train-00001-of-00004.tfrecord.records.incomplete-1a2b3c4d",
        ".val-00000-of-00001.tfrecord.gz.incomplete-00000000",
        ".manifest.json.incomplete-1a2b3c4d",
        ".image.labels.txt.incomplete-1a2b3c4d",
        ".shardkit/.build.json.incomplete-1a2b3c4d",
        ".shardkit/shards/.train-00001-of-00004.tfrecord.json.incomplete-1a2b3c4d",
        ".shardkit/shards/.val-00000-of-00001.tfrecord.gz.json.incomplete-ffffffff",
    ]
    not_ours = [
        ".notes.txt.incomplete-1a2b3c4d",  # not a name a build writes
        "train-00001-of-00004.tfrecord.incomplete-1a2b3c4d",  # not hidden
        ".train-00001-of-00004.tfrecord.incomplete-mine",  # not the 8 hex digits a writer adds
        ".shardkit/.notes.json.incomplete-1a2b3c4d",
        ".shardkit/shards/.notes.incomplete-1a2b3c4d",
        ".shardkit/plan-0123456789abcdef/.train.plan.incomplete-1a2b3c4d",  # a plan is renamed in whole, never written here
    ]
    for name in ours + not_ours:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert layout.temp_files(str(tmp_path)) == sorted(str(tmp_path / n) for n in ours)
    mine = [n for n in ours if "train-00001" in n]
    assert layout.temp_files(str(tmp_path), ["train-00001-of-00004.tfrecord"]) == sorted(str(tmp_path / n) for n in mine)
    assert layout.temp_files(str(tmp_path / "nowhere")) == []
