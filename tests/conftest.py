from __future__ import annotations

import os
from pathlib import Path

import pytest

# Quiet TensorFlow's C++ start-up chatter in test output (tests only; the library never sets env vars).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from shardkit import demo


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
