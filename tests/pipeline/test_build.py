"""End-to-end builds, with TensorFlow reading every record back as the oracle."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.errors import EntryError, OutputError, WorkerError
from shardkit.executors import PoolExecutor
from shardkit.formats import image_codec
from shardkit.formats.containers.tfrecord_io import file_crc32c
from shardkit.output.manifest import Manifest
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.plan.arithmetic import record_seed
from shardkit.pipeline.shard.augment import Augmenter
from shardkit.pipeline.state.lock import OutputLock
from tests.arread import array_records, assert_twins, case, needs_array_record, read_array_split, shard_bytes
from tests.leftovers import temp_names
from tests.tfread import by_source, decode, raw_records, read_split

SEG_CONFIG: dict[str, Any] = {
    "columns": ["image", "mask"],
    "features": {
        "image": {"kind": "image", "column": "image", "encoding": "jpeg", "quality": 90},
        "mask": {"kind": "mask", "column": "mask"},
    },
    "augment": {
        "copies": 2,
        "keep_original": True,
        "pipeline": [
            {"__class_fullname__": "HorizontalFlip", "p": 0.5},
            {"__class_fullname__": "RandomSizedCrop", "min_max_height": [24, 48], "size": [48, 64], "p": 0.7},
            {"__class_fullname__": "RandomBrightnessContrast", "p": 0.8},
        ],
    },
}


def index_lines(path: Path) -> list[tuple[int, list[str]]]:
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip() and not line.startswith("#"):
            out.append((number, line.split()))
    return out


@pytest.mark.parametrize("formats", [case("tfrecord"), case("arrayrecord")])
def test_segmentation_records_equal_their_inputs(seg_data: Path, tmp_path: Path, formats: str) -> None:
    """Shuffled from the seed, augmented copies, each naming its input (source_id): in either container."""
    config = parse_config(SEG_CONFIG)
    result = shardkit.build([seg_data], tmp_path / "out", config=config, workers=2, seed=7, progress=False, format=formats)
    assert result.records == (24 + 8) * 3 and result.skipped == 0
    augmenter = Augmenter(config.augment.pipeline, [("image", "image"), ("mask", "mask")])  # type: ignore[union-attr]
    for split, files in (("train", ["train_0.txt", "train_1.txt"]), ("val", ["val.txt"])):
        records = (read_split if formats == "tfrecord" else read_array_split)(str(tmp_path / "out"), split)
        expected_inputs = [(name, number, cols) for name in files for number, cols in index_lines(seg_data / name)]
        assert len(records) == 3 * len(expected_inputs)
        groups = by_source(records)  # shuffled: each record names its input
        assert sorted(groups) == sorted(f"{name}:{number}" for name, number, _ in expected_inputs)
        for name, number, (image_path, mask_path) in expected_inputs:
            original_bytes = (seg_data / image_path).read_bytes()
            image = np.asarray(Image.open(io.BytesIO(original_bytes)).convert("RGB"))
            mask = np.asarray(Image.open(seg_data / mask_path))
            # keep_original + same format: the JPEG bytes pass through untouched
            [original] = [r for r in groups[f"{name}:{number}"] if r["image"] == original_bytes]
            assert np.array_equal(decode(original["mask"])[..., 0], mask)
            assert (original["image/height"], original["image/width"], original["image/channels"]) == (48, 64, 3)
            copies = [r for r in groups[f"{name}:{number}"] if r is not original]
            wanted = [augmenter({"image": image, "mask": mask}, record_seed(7, f"{name}:{number}", copy)) for copy in range(2)]
            for want in wanted:  # each augmented copy is one of the records, in whatever order the shuffle gave
                want_image = np.asarray(Image.open(io.BytesIO(image_codec.encode(want["image"], "jpeg", 90))))
                record = next(  # two copies may be alike (every transform skipped by its p)
                    r
                    for r in copies
                    if np.array_equal(decode(r["mask"])[..., 0], want["mask"]) and np.array_equal(decode(r["image"]), want_image)
                )
                assert (record["image/height"], record["image/width"]) == want["image"].shape[:2]
                copies.remove(record)


def test_manifest_describes_the_shards(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([seg_data], out, config=parse_config(SEG_CONFIG), workers=1, records_per_shard=5, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert result.manifest is not None and manifest == result.manifest.to_dict()
    assert list(manifest) == list(result.manifest.to_dict())  # the key order too: users diff these files
    assert Manifest.from_dict(manifest) == result.manifest
    assert manifest["format"] == "shardkit.manifest" and manifest["version"] == 2
    train = manifest["splits"]["train"]
    assert [s["name"] for s in train["shards"]] == [f"train-{i:05d}-of-00005.tfrecord" for i in range(5)]
    assert [s["entries"] for s in train["shards"]] == [5, 5, 5, 5, 4]
    for shard in train["shards"] + manifest["splits"]["val"]["shards"]:
        path = out / shard["name"]
        assert path.stat().st_size == shard["bytes"]
        assert f"{file_crc32c(str(path)):08x}" == shard["crc32c"]
        assert shard["records"] == 3 * shard["entries"]
    assert train["shards"][0]["covers"] == []  # shuffled: each record's source_id names its input instead
    keys = {f["key"]: f for f in manifest["schema"]}
    assert keys["image"]["encoding"] == "jpeg" and keys["mask"]["encoding"] == "png"
    assert keys["mask"]["channels"] == [1] and keys["image/height"]["dtype"] == "int64"
    assert keys["image"]["height"][1] == 48
    assert manifest["totals"]["records"] == 96 and manifest["errors"] == {"skipped": 0, "file": None}
    assert len(manifest["fingerprint"]) == 32 and manifest["parameters"]["records_per_shard"] == 5


@needs_array_record
def test_an_arrayrecord_build_is_its_tfrecord_twin_and_the_manifest_describes_every_file(seg_data: Path, tmp_path: Path) -> None:
    """``--format arrayrecord`` alone (one worker) writes, byte for byte, the ArrayRecord files a
    ``tfrecord,arrayrecord`` build (two workers) writes beside its TFRecord shards; the manifest
    gives each file's record count, size and checksum, and the TFDS metadata names the containers."""
    common: dict[str, Any] = {"config": parse_config(SEG_CONFIG), "records_per_shard": 5, "seed": 3, "progress": False}
    alone, both = tmp_path / "alone", tmp_path / "both"
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    shardkit.build([seg_data], alone, workers=1, format="arrayrecord", **common)
    shardkit.build([seg_data], both, workers=2, format="tfrecord,arrayrecord", **common)
    names = [f"train-{i:05d}-of-00005.array_record" for i in range(5)] + [f"val-{i:05d}-of-00002.array_record" for i in range(2)]
    assert list(shard_bytes(str(alone))) == names  # nothing else: no .idx, no .tfrecord
    assert shard_bytes(str(alone)) == {n: b for n, b in shard_bytes(str(both)).items() if n.endswith(".array_record")}
    assert_twins(str(both))
    for split in ("train", "val"):
        assert array_records(str(alone), split) == raw_records(str(both), split)

    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (alone, both))
    assert ma["parameters"]["formats"] == ["arrayrecord"] and mb["parameters"]["formats"] == ["tfrecord", "arrayrecord"]
    for split in ("train", "val"):
        sa, sb = ma["splits"][split], mb["splits"][split]
        assert sa["formats"] == ["arrayrecord"] and sb["formats"] == ["tfrecord", "arrayrecord"]
        assert sa["writer_options"] == sb["writer_options"] == {"arrayrecord": "group_size:1,uncompressed"}
        same = ("records", "entries", "skipped", "num_shards", "entries_per_shard", "labels")
        assert {k: sa[k] for k in same} == {k: sb[k] for k in same}
        for shard, twinned in zip(sa["shards"], sb["shards"], strict=True):
            path = alone / shard["name"]
            assert (shard["index"], shard["twins"]) == (None, [])
            assert shard["records"] == len(ArrayRecordDataSource([str(path)])) == twinned["records"] > 0
            assert shard["bytes"] == path.stat().st_size and shard["crc32c"] == f"{crc32c.crc32c(path.read_bytes()):08x}"
            assert {k: shard[k] for k in ("entries", "covers", "labels")} == {k: twinned[k] for k in ("entries", "covers", "labels")}
            [twin] = twinned["twins"]  # the ArrayRecord file beside the TFRecord shard: the same file as alone's
            assert (twin["format"], twin["name"], twin["bytes"], twin["crc32c"]) == (
                "arrayrecord",
                shard["name"],
                shard["bytes"],
                shard["crc32c"],
            )
    assert ma["totals"]["records"] == mb["totals"]["records"] == 96
    ia, ib = (json.loads((p / "dataset_info.json").read_text()) for p in (alone, both))
    assert ia["fileFormat"] == "array_record" and "alternativeFileFormats" not in ia
    assert ib["fileFormat"] == "tfrecord" and ib["alternativeFileFormats"] == ["array_record"]
    assert [s["shardLengths"] for s in ia["splits"]] == [s["shardLengths"] for s in ib["splits"]]
    assert not temp_names(alone) and not temp_names(both)


def builds_equal(a: Path, b: Path) -> None:
    for split in ("train", "val"):
        assert raw_records(str(a), split) == raw_records(str(b), split)
    assert shard_bytes(str(a)) == shard_bytes(str(b))  # every file of every container, and the .idx files
    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (a, b))
    assert ma["splits"] == mb["splits"]


@pytest.mark.parametrize(
    "start_method, formats", [case("fork", "tfrecord"), case("spawn", "tfrecord"), case("fork", "tfrecord,arrayrecord")]
)
def test_worker_count_and_start_method_do_not_change_records(seg_data: Path, tmp_path: Path, start_method: str, formats: str) -> None:
    config = parse_config(SEG_CONFIG)
    common: dict[str, Any] = {"config": config, "records_per_shard": 6, "seed": 3, "progress": False, "format": formats}
    shardkit.build([seg_data], tmp_path / "one", workers=1, **common)
    shardkit.build([seg_data], tmp_path / "pool", workers=2, executor=PoolExecutor(2, start_method), **common)
    builds_equal(tmp_path / "one", tmp_path / "pool")
    if "arrayrecord" in formats:
        assert_twins(str(tmp_path / "pool"))


@pytest.mark.parametrize("formats, damaged", [case("tfrecord", ".tfrecord"), case("tfrecord,arrayrecord", ".array_record")])
def test_resume_keeps_finished_shards_and_rebuilds_the_rest(seg_data: Path, tmp_path: Path, formats: str, damaged: str) -> None:
    """With both containers, a shard whose ArrayRecord file is lost or damaged is rebuilt, its TFRecord file whole or not."""
    out = tmp_path / "out"
    args: dict[str, Any] = {"config": parse_config(SEG_CONFIG), "records_per_shard": 4, "progress": False, "workers": 1, "format": formats}
    first = shardkit.build([seg_data], out, **args)
    assert (first.shards_built, first.shards_reused) == (8, 0)
    reference = {s: raw_records(str(out), s) for s in ("train", "val")}
    files = shard_bytes(str(out))
    (out / f"train-00002-of-00006{damaged}").unlink()  # lost shard
    with open(out / f"val-00001-of-00002{damaged}", "ab") as f:
        f.write(b"junk")  # wrong size: rebuilt
    (out / f".train-00004-of-00006{damaged}.incomplete-deadbeef").write_bytes(b"half")  # a crashed writer's temp file
    (out / "manifest.json").unlink()
    again = shardkit.build([seg_data], out, **args)
    assert (again.shards_built, again.shards_reused) == (2, 6)
    assert {s: raw_records(str(out), s) for s in ("train", "val")} == reference
    assert shard_bytes(str(out)) == files
    assert not list(out.glob(".*incomplete*"))
    assert again.manifest is not None and first.manifest is not None and again.manifest.splits == first.manifest.splits
    third = shardkit.build([seg_data], out, **args)
    assert (third.shards_built, third.shards_reused) == (0, 8)


def test_a_different_build_is_refused_unless_overwrite(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([seg_data], out, workers=1, progress=False)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"already holds a different build \(different parameters\); use --overwrite"):
        shardkit.build([seg_data], out, workers=1, seed=1, progress=False, records_per_shard=100)
    with pytest.raises(OutputError, match=r"different config"):
        shardkit.build([seg_data], out, workers=1, config=parse_config(SEG_CONFIG), progress=False)
    result = shardkit.build([seg_data], out, workers=1, config=parse_config(SEG_CONFIG), overwrite=True, progress=False)
    assert result.shards_reused == 0 and result.records == 96
    assert (out / "notes.txt").read_text() == "mine"  # --overwrite deletes only what a build wrote
    assert result.manifest is not None
    assert sorted(p.name for p in out.glob("*.tfrecord")) == [s.name for _, s in result.manifest.shards()]


def test_second_build_into_the_same_folder_is_refused(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputLock(str(out / ".shardkit" / "lock")), pytest.raises(OutputError, match=r"another build is writing here \(pid \d+ on host"):
        shardkit.build([seg_data], out, workers=1, progress=False)


def test_a_folder_without_flock_or_hard_links_is_one_clear_error(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import fcntl

    def no_lock(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    def no_link(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    with monkeypatch.context() as patched:
        patched.setattr(fcntl, "flock", no_lock)  # NFS without lockd
        with pytest.raises(OutputError, match=r"lock: cannot lock the output folder \(No locks available\); shardkit needs flock"):
            shardkit.build([seg_data], tmp_path / "nfs", workers=1, progress=False)
    monkeypatch.setattr(os, "link", no_link)  # gcsfuse, s3fs: no hard links to publish the nodes' plan
    with pytest.raises(OutputError, match=r"cannot publish the build's plan for the other nodes, hard links fail here"):
        shardkit.build([seg_data], tmp_path / "gcs", workers=1, num_nodes=2, node_index=0, progress=False)
    assert not list((tmp_path / "gcs" / ".shardkit").glob(".build.json*"))  # no temp file left behind

    def disk_full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", disk_full)  # any other failure is said as it is
    with pytest.raises(OutputError, match=r"build.json: cannot publish the build's plan \(No space left on device\)$"):
        shardkit.build([seg_data], tmp_path / "full", workers=1, num_nodes=2, node_index=0, progress=False)


def test_a_build_refused_by_running_nodes_names_them_not_an_earlier_holder(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([seg_data], out, workers=1, progress=False)  # leaves its pid and host in the lock file
    with OutputLock(str(out / ".shardkit" / "lock"), shared=True), pytest.raises(OutputError) as refused:
        shardkit.build([seg_data], out, workers=1, progress=False)
    assert str(refused.value) == (
        f"{out}: another build is writing here (a multi-node build's nodes); wait for it to finish, or choose another output folder"
    )


def test_missing_image_fails_naming_file_and_line_then_skip_finishes(seg_copy: Path, tmp_path: Path) -> None:
    number, (image_path, _) = index_lines(seg_copy / "train_1.txt")[3]
    (seg_copy / image_path).unlink()
    out = tmp_path / "out"
    with pytest.raises(EntryError) as info:
        shardkit.build([seg_copy], out, workers=2, records_per_shard=4, progress=False)
    assert str(info.value) == f"{seg_copy / 'train_1.txt'}:{number}: image: {seg_copy / image_path}: file not found"
    assert not list(out.glob(".*incomplete*")) and not (out / "manifest.json").exists()
    result = shardkit.build([seg_copy], out, workers=2, records_per_shard=4, on_error="skip", progress=False)
    assert result.skipped == 1 and result.records == 31 and result.shards_reused >= 1
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert errors == [
        {
            "split": "train",
            "source": str(seg_copy / "train_1.txt"),
            "line": number,
            "reason": f"image: {seg_copy / image_path}: file not found",
        }
    ]
    assert result.manifest is not None and result.manifest.to_dict()["errors"] == {"skipped": 1, "file": "errors.jsonl"}
    assert result.manifest.skipped == result.manifest.splits["train"].skipped == 1
    assert len(read_split(str(out), "train")) == 23


def test_bad_entries_of_every_kind(seg_copy: Path, tmp_path: Path) -> None:
    lines = index_lines(seg_copy / "val.txt")
    (seg_copy / lines[0][1][0]).write_bytes(b"not an image at all")
    Image.new("L", (10, 10)).save(seg_copy / lines[1][1][1])
    with open(seg_copy / "val.txt", "a") as f:
        f.write("only-one-column.jpg\n")
    out = tmp_path / "out"
    with pytest.raises(EntryError, match=r"val.txt:10: 1 columns, but line 2 has 2"):
        shardkit.build([seg_copy / "val.txt"], out, workers=1, progress=False)
    result = shardkit.build([seg_copy / "val.txt"], out, workers=1, progress=False, on_error="skip")
    reasons = sorted(json.loads(line)["reason"] for line in (out / "errors.jsonl").read_text().splitlines())
    assert reasons == [
        "1 columns, but line 2 has 2",
        f"image: {seg_copy / lines[0][1][0]}: not an image Pillow can read (unknown or damaged image format)",
        "mask 'mask' is 10x10 but image 'image' is 64x48",
    ]
    assert result.records == 6 and result.skipped == 3


def test_from_folder_classification(cls_data: Path, tmp_path: Path) -> None:
    result = shardkit.build(out=tmp_path / "out", from_folder=cls_data, workers=1, progress=False)
    assert result.manifest is not None and result.manifest.classes == {"label": ("cat", "dog", "fox")}
    for split, per_class in (("train", 6), ("val", 1)):
        records = by_source(read_split(str(tmp_path / "out"), split))
        files = sorted((cls_data / split).glob("*/*.jpg"))
        assert sorted(records) == [path.relative_to(cls_data).as_posix() for path in files]
        assert len(files) == 3 * per_class
        for path in files:
            [record] = records[path.relative_to(cls_data).as_posix()]
            assert record["image"] == path.read_bytes()
            assert record["label"] == ["cat", "dog", "fox"].index(path.parent.name)


def test_from_folder_given_relative_to_the_working_directory(cls_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder's images were joined to a relative ROOT twice (photos/train/photos/train/cat/x.jpg)."""
    absolute = shardkit.build(out=tmp_path / "abs", from_folder=cls_data, workers=1, progress=False)
    monkeypatch.chdir(cls_data.parent)
    relative = shardkit.build(out=tmp_path / "rel", from_folder=cls_data.name, workers=1, progress=False)
    assert relative.records == absolute.records > 0
    for split in ("train", "val"):
        assert read_split(str(tmp_path / "rel"), split) == read_split(str(tmp_path / "abs"), split)


def test_every_feature_kind_from_csv(tmp_path: Path) -> None:
    Image.fromarray(np.full((6, 5), 200, np.uint8)).save(tmp_path / "g.png")
    Image.fromarray(np.arange(6 * 5 * 4, dtype=np.uint8).reshape(6, 5, 4)).save(tmp_path / "rgba.png")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01raw")
    (tmp_path / "train.csv").write_text("img,n,x,s,c,blob\ng.png,5,0.25,héllo,dog,blob.bin\nrgba.png,-7,1e3,w,cat,blob.bin\n")
    config = parse_config(
        {
            "features": {
                "img": {"kind": "image", "encoding": "png", "channels": 3},
                "n": {"kind": "int64"},
                "x": {"kind": "float"},
                "s": {"kind": "string"},
                "c": {"kind": "class_name", "classes": ["zebra", "dog", "cat"]},
                "blob": {"kind": "bytes"},
            }
        }
    )
    shardkit.build([tmp_path / "train.csv"], tmp_path / "out", config=config, workers=1, progress=False)
    first, second = sorted(read_split(str(tmp_path / "out"), "train"), key=lambda r: r["source_id"])
    assert (first["n"], first["x"], first["s"], first["c"], first["blob"]) == (5, np.float32(0.25), "héllo".encode(), 1, b"\x00\x01raw")
    assert (second["n"], second["x"], second["c"]) == (-7, np.float32(1000.0), 2)
    assert np.array_equal(decode(first["img"]), np.full((6, 5, 3), 200, np.uint8))
    rgba = np.asarray(Image.open(tmp_path / "rgba.png").convert("RGB"))
    assert np.array_equal(decode(second["img"]), rgba) and second["img/channels"] == 3


def test_jsonl_ragged_lists(tmp_path: Path) -> None:
    Image.new("RGB", (4, 4)).save(tmp_path / "a.jpg")
    (tmp_path / "train.jsonl").write_text('{"image": "a.jpg", "boxes": [1, 2, 3]}\n{"image": "a.jpg", "boxes": []}\n')
    config = parse_config({"features": {"image": {"kind": "image", "encoding": "raw"}, "boxes": {"kind": "int64"}}})
    result = shardkit.build([tmp_path / "train.jsonl"], tmp_path / "out", config=config, workers=1, progress=False)
    assert result.manifest is not None
    boxes = next(f for f in result.manifest.schema if f["key"] == "boxes")
    assert boxes == {"key": "boxes", "dtype": "int64", "kind": "int64", "shape": None, "ragged": True, "min_length": 0, "max_length": 3}
    first, second = sorted(read_split(str(tmp_path / "out"), "train"), key=lambda r: r["source_id"])
    assert list(first["boxes"]) == [1, 2, 3] and list(second["boxes"]) == [0, 0, 0]  # dense padding of the empty list


def test_gzip_shards(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shardkit.build([seg_data / "val.txt"], out, workers=1, compression="gzip", progress=False)
    assert result.manifest is not None
    (shard,) = result.manifest.splits["val"].shards[:1]
    assert shard.name.endswith(".tfrecord.gz")
    assert f"{file_crc32c(str(out / shard.name)):08x}" == shard.crc32c
    assert len(read_split(str(out), "val", compression="GZIP")) == 8


def _die(*args: Any, **kwargs: Any) -> Any:
    os._exit(3)


def test_a_dead_worker_raises_instead_of_hanging(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shardkit.pipeline.executors.local_executors

    for route in ("run_task", "write"):  # a pool worker's two routes (committing at once, or while writing the next)
        monkeypatch.setattr(shardkit.pipeline.executors.local_executors, route, _die)  # inherited by forked workers
    with pytest.raises(WorkerError, match="died without reporting an error"):
        shardkit.build([seg_data], tmp_path / "out", executor=PoolExecutor(2, "fork"), workers=2, progress=False)
    assert not list((tmp_path / "out").glob(".*incomplete*"))


@pytest.mark.parametrize("mask_kind", ["palette", "uint16"])
def test_masks_keep_their_class_values(tmp_path: Path, mask_kind: str) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 255, size=(12, 10, 3), dtype=np.uint8)).save(tmp_path / "a.jpg")
    if mask_kind == "palette":
        values = rng.integers(0, 20, size=(12, 10), dtype=np.uint8)
        mask = Image.fromarray(values, "L").convert("P")
        mask.putpalette([c for i in range(256) for c in (i * 7 % 256, i * 13 % 256, i * 29 % 256)])
    else:
        values = rng.integers(0, 60000, size=(12, 10), dtype=np.uint16)
        mask = Image.fromarray(values)
    mask.save(tmp_path / "a.png")
    (tmp_path / "train.txt").write_text("a.jpg a.png\n")
    config = parse_config(
        {
            "features": {"image": {"kind": "image", "column": 0}, "mask": {"kind": "mask", "column": 1}},
            "augment": {"copies": 1, "keep_original": True, "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 1.0}]},
        }
    )
    shardkit.build([tmp_path / "train.txt"], tmp_path / "out", config=config, workers=1, progress=False)
    original, flipped = read_split(str(tmp_path / "out"), "train")
    dtype = tf.uint16 if mask_kind == "uint16" else tf.uint8
    assert np.array_equal(tf.io.decode_png(original["mask"], dtype=dtype).numpy()[..., 0], values)
    assert np.array_equal(tf.io.decode_png(flipped["mask"], dtype=dtype).numpy()[..., 0], values[:, ::-1])


def test_a_decompression_bomb_is_a_bad_entry(tmp_path: Path) -> None:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    (tmp_path / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 100)))
    Image.new("RGB", (4, 4)).save(tmp_path / "ok.png")
    (tmp_path / "train.txt").write_text("ok.png 1\nbomb.png 2\n")
    config = parse_config(
        {"features": {"image": {"kind": "image", "column": 0, "encoding": "jpeg"}, "label": {"kind": "int64", "column": 1}}}
    )
    with pytest.raises(EntryError, match=r"train.txt:2: image: .*bomb.png: 20000x20000 pixels: over Pillow's decompression-bomb limit"):
        shardkit.build([tmp_path / "train.txt"], tmp_path / "out", config=config, workers=1, progress=False)
    result = shardkit.build([tmp_path / "train.txt"], tmp_path / "out", config=config, workers=1, on_error="skip", progress=False)
    assert (result.records, result.skipped) == (1, 1)


def test_the_same_index_text_in_another_folder_is_another_build(seg_data: Path, tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "copy"
    shutil.copytree(seg_data, other)
    out = tmp_path / "out"
    shardkit.build([seg_data / "val.txt"], out, workers=1, progress=False)
    with pytest.raises(OutputError, match="different inputs"):
        shardkit.build([other / "val.txt"], out, workers=1, progress=False)


class _TakenOverMidway:
    """Runs the tasks inline after another build (another fingerprint) took OUT over, as a
    --overwrite build may while a Dask task of a failed or killed build still runs."""

    def run(self, tasks: Any, on_progress: Any, on_shard: Any) -> Any:
        from shardkit.executors import InlineExecutor

        state_path = Path(tasks[0].settings.out_dir) / ".shardkit" / "build.json"
        state = json.loads(state_path.read_text())
        state_path.write_text(json.dumps({**state, "fingerprint": "another build"}))
        return InlineExecutor().run(tasks, on_progress, on_shard)


def test_a_task_does_not_commit_into_a_folder_another_build_took_over(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(OutputError, match=r"now holds another build .* this task's shard was discarded"):
        shardkit.build([seg_data], out, workers=1, progress=False, executor=_TakenOverMidway())
    assert not list(out.glob("*.tfrecord")) and not list(out.glob(".*incomplete*"))
    assert not list((out / ".shardkit" / "shards").glob("*.json"))


def _shards_per_split(out: Path) -> dict[str, int]:
    state = json.loads((out / ".shardkit" / "build.json").read_text())
    return {name: plan["num_shards"] for name, plan in state["splits"].items()}


def test_the_default_plan_is_the_same_on_every_machine(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shardkit.pipeline.builder

    monkeypatch.setattr(shardkit.pipeline.builder, "default_workers", lambda: 3)
    shardkit.build([seg_data], tmp_path / "default", progress=False)
    shardkit.build([seg_data], tmp_path / "one", workers=1, progress=False)
    shardkit.build([seg_data], tmp_path / "nodes", workers=2, num_nodes=3, node_index=0, progress=False)
    # 24 train and 8 val entries: one shard each, since the default never cuts shards below 64 entries
    assert _shards_per_split(tmp_path / "default") == _shards_per_split(tmp_path / "one") == {"train": 1, "val": 1}
    assert _shards_per_split(tmp_path / "nodes") == {"train": 1, "val": 1}
    builds_equal(tmp_path / "default", tmp_path / "one")


def test_a_mask_listed_before_its_image(seg_data: Path, tmp_path: Path) -> None:
    config = parse_config({"features": {"mask": {"kind": "mask", "column": 1}, "image": {"kind": "image", "column": 0, "encoding": "raw"}}})
    result = shardkit.build([seg_data / "val.txt"], tmp_path / "out", config=config, workers=1, progress=False)
    assert result.records == 8 and {"image", "mask"} <= set(read_split(str(tmp_path / "out"), "val")[0])
