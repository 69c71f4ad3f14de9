from __future__ import annotations

from pathlib import Path

import pytest

from shardkit.errors import ConfigError
from shardkit.pipeline.config import load_config, parse_config
from tests.paths import REPO

FLIP = {"__class_fullname__": "HorizontalFlip", "p": 0.5}
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_load(path: Path) -> None:
    config = load_config(path)
    assert config.features and config.source == str(path)


def test_at_least_three_shipped_configs() -> None:
    assert {p.name for p in CONFIGS} >= {"camvid-segmentation.yaml", "imagefolder-classification.yaml", "passthrough.yaml"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"features": {"image": {"kind": "picture"}}}, "features.image.kind: unknown feature kind 'picture'"),
        ({"features": {"image": {"kind": "image", "encoding": "gif"}}}, "features.image.encoding: unknown encoding 'gif'"),
        ({"features": {"image": {"kind": "image", "colour": 3}}}, "features.image.colour: unknown key"),
        ({"features": {"m": {"kind": "mask"}}}, "features: a mask feature needs an image feature"),
        ({"features": {"l": {"kind": "int64", "classes": ["a"]}}}, "features.l.classes: only class_name features"),
        ({"features": {"i": {"kind": "image", "quality": 0}}}, "features.i.quality: expected an integer from 1 to 100"),
        ({"features": {}}, "features: at least one feature is needed"),
        ({"feature": {}}, "feature: unknown key"),
        (
            {
                "features": {"i": {"kind": "image"}},
                "augment": {"pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 0.5}, {"__class_fullname__": "NoSuchFlip", "p": 1}]},
            },
            "augment.pipeline.transforms[1]: NoSuchFlip:",
        ),
        ({"features": {"i": {"kind": "image"}}, "augment": {"copies": 1}}, "augment.pipeline: missing"),
    ],
)
def test_config_errors_name_the_key_path(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "c.yaml")
    assert str(info.value).startswith(f"c.yaml: {message}")


def test_pipeline_forms_normalise_to_albumentations_serialization() -> None:
    flip = {"__class_fullname__": "HorizontalFlip", "p": 0.5}
    as_list = parse_config({"features": {"i": {"kind": "image"}}, "augment": {"pipeline": [flip]}})
    import albumentations as A

    full = A.to_dict(A.Compose([A.HorizontalFlip(p=0.5)]))
    as_dict = parse_config({"features": {"i": {"kind": "image"}}, "augment": {"pipeline": full}})
    assert as_list.augment is not None and as_dict.augment is not None
    assert as_list.augment.pipeline == as_dict.augment.pipeline
    assert as_list.to_dict() == as_dict.to_dict()


def test_yaml_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("features: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_png_level_is_for_png_features_only_and_defaults_to_one() -> None:
    features = {"image": {"kind": "image", "column": 0, "encoding": "png", "png_level": 6}, "mask": {"kind": "mask", "column": 1}}
    config = parse_config({"features": features})
    assert config.feature("image").zlib_level == 6 and config.feature("mask").zlib_level == 1
    assert config.to_dict()["features"]["image"]["png_level"] == 6 and "png_level" not in config.to_dict()["features"]["mask"]
    with pytest.raises(ConfigError, match=r"features\.image\.png_level.*png-encoded"):
        parse_config({"features": {"image": {"kind": "image", "column": 0, "encoding": "jpeg", "png_level": 6}}})
    with pytest.raises(ConfigError, match=r"features\.mask\.png_level.*0 to 9"):
        parse_config({"features": {"image": {"kind": "image", "column": 0}, "mask": {"kind": "mask", "column": 1, "png_level": 10}}})
