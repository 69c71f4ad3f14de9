"""Every path argument of every command works given relative to the working directory, from
another working directory: ``./x``, ``../x``, and names with spaces."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import shardkit
from shardkit import demo
from tests.paths import REPO
from tests.tfread import raw_records

ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
SEGMENTATION = """\
columns: [image, mask]
features:
  image: {kind: image, column: image, encoding: jpeg, quality: 90}
  mask: {kind: mask, column: mask}
augment:
  copies: 1
  keep_original: true
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
"""
CLASSIFICATION = "features:\n  image: {kind: image, column: 0}\n  label: {kind: class_name, column: 1}\n"
PREPROCESS = "import tensorflow as tf\n\n\ndef prep(x):\n    return tf.reduce_mean(tf.cast(x['image'], tf.float32))\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``my data/`` (index files), ``my photos/`` (ImageFolder), configs with spaces, and ``work dir/`` to run from."""
    root = tmp_path_factory.mktemp("relative")
    demo.make_segmentation(root / "my data", train=12, val=4, width=48, height=32)
    demo.make_classification(root / "my photos", per_class=3, width=32, height=32)
    (root / "my data" / "seg config.yaml").write_text(SEGMENTATION)
    (root / "my data" / "cls config.yaml").write_text(CLASSIFICATION)
    (root / "work dir").mkdir()
    (root / "work dir" / "prep step.py").write_text(PREPROCESS)
    return root


def shardkit_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardkit.cli", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("indexes", "out"),
    [
        (["../my data"], "./out a"),  # a folder of index files, an output under ./
        (["../my data/train_0.txt", "../my data/train_1.txt", "./../my data/val.txt"], "out b"),  # index files
        (["../my data/"], "../work dir/out c"),  # OUT through ..
    ],
)
def test_build_from_relative_index_files_and_folders(root: Path, indexes: list[str], out: str, tmp_path: Path) -> None:
    reference = shardkit.build([root / "my data"], tmp_path / "ref", config=str(root / "my data" / "seg config.yaml"), workers=1,
                               progress=False)  # fmt: skip
    done = shardkit_in(root / "work dir", "build", *indexes, "-o", out, "-c", "../my data/seg config.yaml", "-w", "1", "-q")
    assert done.returncode == 0, done.stderr
    built = (root / "work dir" / out).resolve()
    for split in ("train", "val"):
        assert raw_records(str(built), split) == raw_records(str(reference.out_dir), split)


def test_build_from_a_relative_folder(root: Path, tmp_path: Path) -> None:
    reference = shardkit.build(out=tmp_path / "ref", from_folder=root / "my photos", config=str(root / "my data" / "cls config.yaml"),
                               workers=1, progress=False)  # fmt: skip
    for folder, out in (("../my photos", "./photo out"), ("./../my photos/", "../photo out 2")):
        done = shardkit_in(root / "work dir", "build", "--from-folder", folder, "-o", out, "-c", "../my data/cls config.yaml", "-q")
        assert done.returncode == 0, done.stderr
        built = (root / "work dir" / out).resolve()
        for split in ("train", "val"):
            assert raw_records(str(built), split) == raw_records(str(reference.out_dir), split)


@pytest.mark.slow
def test_every_other_command_takes_relative_paths(root: Path) -> None:
    work = root / "work dir"
    built = shardkit_in(
        work, "build", "../my data", "-o", "./shards here", "-c", "../my data/seg config.yaml", "--records-per-shard", "6", "-q"
    )
    assert built.returncode == 0, built.stderr
    verified = shardkit_in(work, "verify", "./shards here", "--deep", "-w", "2")
    assert verified.returncode == 0 and "OK      ./shards here/train-00000-of-" in verified.stdout, verified.stderr
    inspected = shardkit_in(root, "inspect", "work dir/shards here", "work dir/./shards here/val-00000-of-00001.tfrecord")
    assert inspected.returncode == 0 and "work dir/shards here: shardkit output" in inspected.stdout, inspected.stderr
    counted = shardkit_in(work / "shards here", "inspect", "--count", ".")
    assert counted.returncode == 0 and counted.stdout.strip().endswith("records in 3 files"), counted.stderr
    indexed = shardkit_in(work, "index", "../work dir/shards here/train-00001-of-00002.tfrecord")
    assert indexed.returncode == 0 and indexed.stdout.startswith("OK      ../work dir/shards here/train-00001-of-00002.tfrecord.idx")
    finalized = shardkit_in(work, "finalize", "shards here/")
    assert finalized.returncode == 0 and finalized.stdout.startswith("finalized 3 shards"), finalized.stderr
    snapshot = shardkit_in(work, "snapshot-materialize", "./shards here", "-o", "../snap shot", "--preprocess", "prep step.py:prep", "-q")
    assert snapshot.returncode == 0, snapshot.stderr
    assert (root / "snap shot" / "shardkit-snapshot.json").is_file() and not list(root.glob("snap shot.incomplete-*"))
    again = shardkit_in(root, "snapshot-materialize", "work dir/shards here", "-o", "./snap shot", "--preprocess",
                        "work dir/prep step.py:prep")  # fmt: skip
    assert again.returncode == 0 and "is up to date (24 records" in again.stdout, again.stderr
