"""The tf.data reader and snapshot-materialize, against TensorFlow's own parsing and loading."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import ShardkitError
from shardkit.read.materialize import materialize_snapshot
from shardkit.tfdata import load
from tests.tfread import read_split

PREPROCESS = """
import tensorflow as tf

def prep(x):
    image = tf.image.resize(x["image"], [24, 32])
    return tf.cast(image, tf.float32) / 255.0, tf.cast(x["mask"], tf.int32)

def slow(x):
    import time
    return tf.py_function(lambda: time.sleep(0.05) or 0, [], tf.int32), x["image/height"]

def flip(x):
    return tf.image.random_flip_left_right(x["image"]), x["mask"]
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardkit import demo

    data = demo.make_segmentation(tmp_path_factory.mktemp("tfd"), train=24, val=8, width=64, height=48)
    out = tmp_path_factory.mktemp("tfd-out") / "out"
    shardkit.build([data], out, workers=1, records_per_shard=5, progress=False)
    return out


@pytest.fixture(scope="module")
def prep_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prep") / "prep.py"
    path.write_text(PREPROCESS)
    return path


def _key(record: dict) -> bytes:
    return bytes(record["image"]) if isinstance(record["image"], (bytes, np.bytes_)) else record["image"].tobytes()


def test_load_yields_every_record_parsed_and_decoded(out: Path) -> None:
    expected = read_split(str(out), "train")
    raw = [{k: v.numpy() for k, v in x.items()} for x in load(str(out), "train", decode_images=False)]
    assert sorted(_key(r) for r in raw) == sorted(_key(r) for r in expected)
    single = [{k: v.numpy() for k, v in x.items()} for x in load(str(out), "train", decode_images=False, parse="single")]
    assert [_key(r) for r in single] == [_key(r) for r in raw]
    decoded = list(load(str(out), "train", batch_size=8))
    assert [int(b["image"].shape[0]) for b in decoded] == [8, 8, 8]
    assert decoded[0]["image"].dtype.name == "uint8" and tuple(decoded[0]["image"].shape[1:]) == (48, 64, 3)
    assert tuple(decoded[0]["mask"].shape[1:]) == (48, 64, 1)


def test_load_shards_hosts_at_file_level_and_shuffles_reproducibly(out: Path) -> None:
    hosts = [[_key({k: v.numpy() for k, v in x.items()}) for x in load(str(out), "train", decode_images=False, num_hosts=2, host_index=i)]
             for i in range(2)]  # fmt: skip
    assert not set(hosts[0]) & set(hosts[1]) and len(hosts[0]) + len(hosts[1]) == 24
    first = [_key({"image": x["image"].numpy()}) for x in load(str(out), "train", decode_images=False, shuffle=64, seed=3)]
    again = [_key({"image": x["image"].numpy()}) for x in load(str(out), "train", decode_images=False, shuffle=64, seed=3)]
    assert first == again and sorted(first) == sorted(hosts[0] + hosts[1])
    assert first != sorted(first, key=lambda k: (hosts[0] + hosts[1]).index(k))  # actually shuffled
    with pytest.raises(ShardkitError, match="no split 'test'"):
        load(str(out), "test")


def test_load_reads_gzip_shards(tmp_path: Path, seg_data: Path) -> None:
    shardkit.build([seg_data / "val.txt"], tmp_path / "gz", workers=1, compression="gzip", progress=False)
    assert len(list(load(str(tmp_path / "gz"), "val"))) == 8


def test_snapshot_materializes_loads_and_guards_staleness(out: Path, prep_file: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    snap = tmp_path / "snap"
    result = materialize_snapshot(str(out), str(snap), f"{prep_file}:prep", num_shards=4, progress=False)
    assert (result.records, result.up_to_date) == (24, False)
    meta = json.loads((snap / "shardkit-snapshot.json").read_text())
    assert meta["records"] == 24 and meta["preprocess"] == "prep.py:prep" and len(meta["preprocess_sha256"]) == 64
    assert meta["tensorflow_version"] == tf.__version__ and "TensorSpec(shape=(24, 32, 3)" in meta["element_spec"]
    loaded = tf.data.Dataset.load(str(snap))  # plain TensorFlow, no shardkit
    got = sorted(float(tf.reduce_sum(img)) for img, _ in loaded)
    import importlib.util

    spec = importlib.util.spec_from_file_location("prep_direct", prep_file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    want = sorted(float(tf.reduce_sum(module.prep(x)[0])) for x in load(str(out), "train"))
    assert np.allclose(got, want)
    assert len([f for f in os.listdir(next(p for p in snap.iterdir() if p.is_dir())) if f.endswith(".shard")]) == 4

    again = materialize_snapshot(str(out), str(snap), f"{prep_file}:prep", num_shards=4, progress=False)
    assert again.up_to_date and again.records == 24
    with pytest.raises(ShardkitError, match="is stale: the preprocess code changed"):
        materialize_snapshot(str(out), str(snap), f"{prep_file}:slow", progress=False)
    with pytest.raises(ShardkitError, match=r"uses random ops \(RandomUniform"):
        materialize_snapshot(str(out), str(tmp_path / "random"), f"{prep_file}:flip", progress=False)
    assert not (tmp_path / "random").exists()
    rebuilt = materialize_snapshot(str(out), str(snap), f"{prep_file}:slow", overwrite=True, progress=False)
    assert not rebuilt.up_to_date and json.loads((snap / "shardkit-snapshot.json").read_text())["preprocess"] == "prep.py:slow"


def test_snapshot_cli(out: Path, prep_file: Path, tmp_path: Path) -> None:
    args = ["snapshot-materialize", str(out), "-o", str(tmp_path / "s"), "--preprocess", f"{prep_file}:prep", "--num-shards", "2"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0 and first.output.startswith("materialized 24 records")
    second = CliRunner().invoke(main, args)
    assert second.output == f"{tmp_path / 's'} is up to date (24 records, same source and preprocess code): nothing to do\n"
    bad = CliRunner().invoke(main, [*args[:4], "--preprocess", "nope"])
    assert bad.exit_code == 1 and "expected MODULE:FUNCTION or FILE.py:FUNCTION" in bad.output


@pytest.mark.slow
def test_a_killed_materialization_never_looks_complete(out: Path, prep_file: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    code = (
        "from shardkit.read.materialize import materialize_snapshot\n"
        f"materialize_snapshot({str(out)!r}, {str(snap)!r}, {f'{prep_file}:slow'!r}, progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("snap.incomplete-*/*/*.shard")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not snap.exists()  # the half-written save sits only under its temporary name
    result = materialize_snapshot(str(out), str(snap), f"{prep_file}:slow", progress=False)
    assert result.records == 24 and not list(tmp_path.glob("snap.incomplete-*"))


@pytest.mark.slow
def test_materialize_through_tf_data_service(out: Path, prep_file: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0, work_dir=str(tmp_path / "work"), fault_tolerant_mode=True))
    address = dispatcher.target.split("://")[1]
    workers = [
        service.WorkerServer(service.WorkerConfig(dispatcher_address=address, worker_address="127.0.0.1:%port%", port=0,
                                                  heartbeat_interval_ms=100))
        for _ in range(2)
    ]  # fmt: skip
    try:
        result = materialize_snapshot(str(out), str(tmp_path / "snap"), f"{prep_file}:prep", dispatcher=dispatcher.target, progress=False)
        assert result.records == 24
        meta = json.loads((tmp_path / "snap" / "shardkit-snapshot.json").read_text())
        assert meta["dispatcher"] == dispatcher.target
        assert sum(1 for _ in tf.data.Dataset.load(str(tmp_path / "snap"))) == 24
    finally:
        for worker in workers:
            worker.stop()
        dispatcher.stop()


def test_snapshot_from_a_script_without_a_main_guard_and_a_preprocess_that_prints(out: Path, tmp_path: Path) -> None:
    """TensorFlow runs in a child program: it re-runs nothing of the caller's script (multiprocessing's
    spawn would), and what the preprocess prints does not get in the way of the child's answer."""
    (tmp_path / "loud.py").write_text(
        "import tensorflow as tf\n\n\ndef prep(x):\n    print('tracing prep')\n    return tf.reduce_mean(tf.cast(x['image'], tf.float32))\n"
    )
    script = tmp_path / "make_snapshot.py"
    script.write_text(
        "import shardkit\n"
        f"result = shardkit.materialize_snapshot({str(out)!r}, 'snap', 'loud.py:prep', progress=True)\n"
        "print('records', result.records)\n"
    )
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["records 24"]  # printed once: the script ran once
    assert "tracing prep" in done.stderr


def test_lists_of_any_length_batch_raggedly_with_images_decoded_and_parsed_singly(cls_data: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    from shardkit.pipeline.config import parse_config

    images = sorted(cls_data.glob("train/*/*.jpg"))[:5]
    (tmp_path / "train.jsonl").write_text("".join(f'{{"image": "{p}", "x": {list(range(i))}}}\n' for i, p in enumerate(images)))
    config = parse_config({"features": {"image": {"kind": "image"}, "x": {"kind": "int64"}}})
    shardkit.build([tmp_path / "train.jsonl"], tmp_path / "out", config=config, workers=1, progress=False)
    want = sorted(list(range(i)) for i in range(5))
    for options in ({}, {"parse": "single"}, {"decode_images": False}, {"decode_images": False, "parse": "single"}):
        batch = next(iter(load(str(tmp_path / "out"), "train", batch_size=5, **options)))  # type: ignore[arg-type]
        assert isinstance(batch["x"], tf.RaggedTensor), options
        assert sorted(batch["x"].to_list()) == want, options
