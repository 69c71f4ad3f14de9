from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Quiet TensorFlow's C++ start-up chatter in test output (tests only; the library never sets env vars).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import shardkit
from shardkit import demo
from tests import object_stores


@pytest.fixture(scope="session")
def seg_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small segmentation set: 24 train (two index files) + 8 val, 64x48 JPEG + PNG masks."""
    return demo.make_segmentation(tmp_path_factory.mktemp("seg"), train=24, val=8, width=64, height=48)


@pytest.fixture(scope="session")
def cls_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo.make_classification(tmp_path_factory.mktemp("cls"), per_class=6, width=40, height=32)


@pytest.fixture()
def seg_copy(seg_data: Path, tmp_path: Path) -> Path:
    """A private copy of the segmentation set that a test may damage."""
    import shutil

    dst = tmp_path / "data"
    shutil.copytree(seg_data, dst)
    return dst


AUGMENTED_CONFIG = """\
features:
  image: {kind: image, column: 0, encoding: jpeg, quality: 90}
  mask: {kind: mask, column: 1}
augment:
  copies: 3
  keep_original: true
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.9}
"""


@pytest.fixture(scope="session")
def augmented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """160 train and 40 val entries of 160x120, four records each: a build long enough to stop mid-way."""
    root = demo.make_segmentation(tmp_path_factory.mktemp("augmented"), train=160, val=40, width=160, height=120)
    (root / "config.yaml").write_text(AUGMENTED_CONFIG)
    return root


@pytest.fixture(scope="session")
def augmented_reference(augmented: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted build of ``augmented`` that stopped and resumed builds must equal: 25 shards of 8 entries."""
    out = tmp_path_factory.mktemp("augmented-reference") / "out"
    shardkit.build([augmented], out, config=str(augmented / "config.yaml"), records_per_shard=8, workers=2, seed=11, progress=False)
    return out


@pytest.fixture(scope="session")
def augmented_reference_both(augmented: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``augmented_reference`` built with ``--format tfrecord,arrayrecord``: the ArrayRecord files a stopped build must end with."""
    out = tmp_path_factory.mktemp("augmented-reference-both") / "out"
    config = str(augmented / "config.yaml")
    shardkit.build([augmented], out, config=config, records_per_shard=8, workers=2, seed=11, progress=False, format="tfrecord,arrayrecord")
    return out


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a local object store server is a bucket test, however it asks for one."""
    for item in items:
        if {"store", "s3_store", "gcs_store"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.bucket)


# Object stores: real local servers, one of each per session, started only by tests that ask.
ALL_STORE_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "STORAGE_EMULATOR_HOST")


@pytest.fixture(scope="session")
def s3_store() -> Iterator[object_stores.Store]:
    with object_stores.s3_server() as store:
        yield store


@pytest.fixture(scope="session")
def gcs_store() -> Iterator[object_stores.Store]:
    with object_stores.gcs_server() as store:
        yield store


@pytest.fixture(params=["s3", "gs"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[object_stores.Store]:
    """Each object store in turn, its variables (and only its) in os.environ for the test."""
    chosen: object_stores.Store = request.getfixturevalue("s3_store" if request.param == "s3" else "gcs_store")
    for name in ALL_STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with object_stores.environment(chosen.env):
        yield chosen


@pytest.fixture()
def bucket(store: object_stores.Store) -> str:
    """A fresh empty bucket on ``store``: its URL."""
    return store.new_bucket()


@pytest.fixture(scope="session")
def coco_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small COCO set in the standard layout (``tests.detection_sets``); its annotation file."""
    from tests.detection_sets import write_coco

    return write_coco(tmp_path_factory.mktemp("coco-set"))


@pytest.fixture(scope="session")
def coco_shards(coco_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``coco_set`` built with configs/coco-instance-masks.yaml: one val shard of 6 records with
    boxes, classes, masks and keypoints. Shared by the read, check and view tests: never damage it."""
    from tests.paths import REPO

    out = tmp_path_factory.mktemp("coco-shards") / "out"
    shardkit.build([coco_set], out, config=REPO / "configs" / "coco-instance-masks.yaml", workers=1, progress=False)
    return out
