"""Refactoring guard: the shipped configs build byte-identical shards and manifests at a fixed seed.

The digests were taken from commit 8ddd41e (before features became classes and the pipeline
moved into phase folders). A change that alters a record, a shard boundary, the fingerprint
(which decides whether an old OUT resumes) or the manifest's content shows up here. Digests
depend on the installed codecs (libjpeg-turbo, zlib), pinned by the test extras' install.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit import demo
from tests.paths import REPO

CONFIGS = REPO / "configs"

EVERY_KIND = """\
features:
  img: {kind: image, encoding: png, channels: 3}
  n: {kind: int64}
  x: {kind: float}
  s: {kind: string}
  c: {kind: class_name, classes: [zebra, dog, cat]}
  open: {kind: class_name}
  blob: {kind: bytes}
"""


def _digests(out: Path, inputs_root: Path) -> dict[str, str]:
    """sha256 of every file a user reads in OUT, the manifest without what depends on this run alone."""
    found = {}
    for path in sorted(out.iterdir()):
        if not path.is_file() or path.name == "statistics.pb":  # a report, held to TensorFlow's reading in tests/statistics
            continue
        data = path.read_bytes()
        if path.name == "manifest.json":
            manifest = json.loads(data)
            # What depends on this run alone: the clock, the version, the worker count, where the inputs lie
            # (the fingerprint hashes their paths; the config and parameters it hashes are pinned below).
            del manifest["created"], manifest["shardkit_version"], manifest["run"]["workers"], manifest["fingerprint"]
            manifest["inputs"] = json.loads(json.dumps(manifest["inputs"]).replace(str(inputs_root), "ROOT"))
            data = json.dumps(manifest, sort_keys=True).encode()
        found[path.name] = hashlib.sha256(data).hexdigest()[:16]
    return found


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("golden")
    seg = demo.make_segmentation(root / "seg", train=14, val=5, width=64, height=48)
    cls = demo.make_classification(root / "cls", per_class=4, width=40, height=32)
    (seg / "labels").mkdir()
    (seg / "labels" / "train.txt").write_text("".join(f"../images/train_{i:05d}.jpg {i % 3}\n" for i in range(14)))
    kinds = root / "kinds"
    kinds.mkdir()
    Image.fromarray(np.full((6, 5), 200, np.uint8)).save(kinds / "g.png")
    Image.fromarray(np.arange(6 * 5 * 4, dtype=np.uint8).reshape(6, 5, 4)).save(kinds / "rgba.png")
    (kinds / "blob.bin").write_bytes(b"\x00\x01raw")
    (kinds / "train.csv").write_text("img,n,x,s,c,open,blob\ng.png,5,0.25,héllo,dog,b,blob.bin\nrgba.png,-7,1e3,w,cat,a,blob.bin\n")
    (kinds / "config.yaml").write_text(EVERY_KIND)
    return {"seg": seg, "cls": cls, "labels": seg / "labels", "kinds": kinds}


# (inputs, from_folder, config) -> {file: digest}, from commit 8ddd41e; manifest.json from manifest version 2
# (each split names its containers, each shard its twins), shards, .idx and TFDS files unchanged.
GOLDEN: dict[str, dict[str, str]] = {
    "segmentation": {
        "dataset_info.json": "32663d15e6300813",
        "features.json": "8b45c0d5783835b5",
        "manifest.json": "f0c6cfd57dba7861",
        "train-00000-of-00003.tfrecord": "b961b6e4377cc5af",
        "train-00000-of-00003.tfrecord.idx": "e17c649faa4edb6b",
        "train-00001-of-00003.tfrecord": "a52b52fb4d75249c",
        "train-00001-of-00003.tfrecord.idx": "9e4d96664728d441",
        "train-00002-of-00003.tfrecord": "56a6a51a932123f1",
        "train-00002-of-00003.tfrecord.idx": "00f84d05febd5c14",
        "val-00000-of-00001.tfrecord": "7d6626d251d8bc63",
        "val-00000-of-00001.tfrecord.idx": "aa6977e121013e70",
    },
    "classification": {
        "dataset_info.json": "800303bfadefe799",
        "features.json": "2210075b1a7c68fb",
        "label.labels.txt": "8e76b6a6605f605c",
        "manifest.json": "a6cf9158cd1be8aa",
        "train-00000-of-00002.tfrecord": "d68fd46f93a67aac",
        "train-00000-of-00002.tfrecord.idx": "56af9e41336b0ace",
        "train-00001-of-00002.tfrecord": "3241827ff84af74b",
        "train-00001-of-00002.tfrecord.idx": "8ea80a67690e1725",
        "val-00000-of-00001.tfrecord": "26fef20d7ee38077",
        "val-00000-of-00001.tfrecord.idx": "ead5695ed2eec30f",
    },
    "passthrough": {
        "dataset_info.json": "c95e0d1cc6289831",
        "features.json": "81455fbfec195859",
        "manifest.json": "9377f0159ccb151a",
        "train-00000-of-00003.tfrecord": "63d50c8f27ec6960",
        "train-00000-of-00003.tfrecord.idx": "1e2f04cb8c744900",
        "train-00001-of-00003.tfrecord": "7e3ed50214b94669",
        "train-00001-of-00003.tfrecord.idx": "2b32248c91b37cfb",
        "train-00002-of-00003.tfrecord": "afc0b2f443a0597d",
        "train-00002-of-00003.tfrecord.idx": "7b0d2cfdc68dfe7a",
    },
    "every-kind": {
        "c.labels.txt": "52cef1f89e3a527f",
        "dataset_info.json": "959609ffe81c8f7c",
        "features.json": "a691a077c475bca1",
        "manifest.json": "02730fe6c7719110",
        "open.labels.txt": "911169ddaaf146af",
        "train-00000-of-00001.tfrecord": "0508a459b5663aa0",
        "train-00000-of-00001.tfrecord.idx": "935a85699a06505d",
    },
}


def _build(inputs: dict[str, Path], case: str, out: Path, workers: int) -> dict[str, str]:
    common = {"seed": 7, "records_per_shard": 6, "workers": workers, "progress": False}
    if case == "segmentation":
        shardkit.build([inputs["seg"]], out, config=str(CONFIGS / "camvid-segmentation.yaml"), **common)  # type: ignore[arg-type]
    elif case == "classification":
        shardkit.build(out=out, from_folder=inputs["cls"], config=str(CONFIGS / "imagefolder-classification.yaml"), **common)  # type: ignore[arg-type]
    elif case == "passthrough":
        shardkit.build([inputs["labels"]], out, config=str(CONFIGS / "passthrough.yaml"), **common)  # type: ignore[arg-type]
    else:
        shardkit.build([inputs["kinds"] / "train.csv"], out, config=str(inputs["kinds"] / "config.yaml"), **common)  # type: ignore[arg-type]
    return _digests(out, inputs["seg"].parent)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", ["segmentation", "classification", "passthrough", "every-kind"])
def test_shipped_configs_build_the_pinned_bytes(inputs: dict[str, Path], tmp_path: Path, case: str, workers: int) -> None:
    got = _build(inputs, case, tmp_path / "out", workers)
    assert got == GOLDEN[case]
