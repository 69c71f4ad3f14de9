"""The front half a build and the augmentation preview share: rows by split, the config, the inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

import shardkit
from shardkit.errors import ConfigError, UsageError
from shardkit.pipeline.prepare import prepare
from shardkit.view.augmentations import augmentation_records

OWN_SOURCE_ID = "features:\n  image: {kind: image, column: 0}\n  source_id: {kind: string, column: 1}\n"


def keys(config: object) -> list[str]:
    return [spec.key for spec in config.features]  # type: ignore[attr-defined]


def test_rows_by_split_the_config_and_the_inputs(seg_data: Path) -> None:
    prepared = prepare([seg_data])
    assert sorted(prepared.splits) == ["train", "val"]
    assert keys(prepared.config) == ["image", "mask", "source_id"]  # inferred from the first entry, then source_id
    assert sorted(f["split"] for f in prepared.inputs["index_files"]) == ["train", "train", "val"]
    assert sum(1 for _ in prepared.splits["val"].rows) == 8


def test_split_renames_every_input_and_only_split_keeps_one(seg_data: Path) -> None:
    renamed = prepare([seg_data], split="all", source_id=False)
    assert list(renamed.splits) == ["all"] and keys(renamed.config) == ["image", "mask"]
    only = prepare([seg_data], only_split="val")
    assert list(only.splits) == ["val"]
    with pytest.raises(UsageError, match=r"no split 'test' in the inputs \(they have train, val\)"):
        prepare([seg_data], only_split="test")


def test_a_configs_own_source_id_is_refused_by_the_build_and_kept_by_the_preview(seg_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "own.yaml"
    config.write_text(OWN_SOURCE_ID)
    with pytest.raises(ConfigError, match=r"features\.source_id: shardkit adds a source_id feature"):
        prepare([seg_data], config=config)
    with pytest.raises(ConfigError, match=r"features\.source_id"):
        shardkit.build([seg_data], tmp_path / "out", config=config, workers=1, progress=False)
    kept = augmentation_records([seg_data], config=config, entries=1, copies=0)
    assert keys(kept.config) == ["image", "source_id"]
    assert kept.config.features[1].column == 1  # the config's own column, not the input's identity
