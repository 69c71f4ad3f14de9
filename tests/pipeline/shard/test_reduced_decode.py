"""Reduced decoding: a pipeline that begins by shrinking decodes JPEGs shrunk, faithfully.

Photos are scikit-image's, enlarged to 12 megapixels with sensor-like noise (real high-frequency
content); each pipeline is built twice, ``decode: reduced`` (the default) and ``decode: exact``,
and TensorFlow reads both back: every image within 38 dB PSNR, every mask identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shardkit
from shardkit import demo
from shardkit.formats import image_headers
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.shard.augment import normalize_pipeline
from shardkit.pipeline.shard.reduced_decode import Downscale, split_leading_downscale
from tests import tfread

WIDTH, HEIGHT = 4032, 3024
AREA, LINEAR, CUBIC, NEAREST = 3, 1, 2, 0  # OpenCV's interpolation flags
AFTER = [
    {"__class_fullname__": "HorizontalFlip", "p": 0.5},
    {"__class_fullname__": "RandomCrop", "height": 120, "width": 120, "p": 1.0},
    {"__class_fullname__": "RandomBrightnessContrast", "contrast_limit": 0.0, "p": 0.8},  # brightness: moves both alike
]
# (leading downscale, the DCT scale a landscape photo should get)
PIPELINES = {
    "smallest-linear": ({"__class_fullname__": "SmallestMaxSize", "max_size": 512, "p": 1.0}, 2),
    "smallest-linear-half-scale-at-most": ({"__class_fullname__": "SmallestMaxSize", "max_size": 300, "p": 1.0}, 2),
    "longest-area": ({"__class_fullname__": "LongestMaxSize", "max_size": 480, "interpolation": AREA, "p": 1.0}, 4),
    "resize-area-for-downscale": (
        {"__class_fullname__": "Resize", "height": 128, "width": 160, "area_for_downscale": "image", "p": 1.0},
        8,
    ),
    "smallest-cubic": ({"__class_fullname__": "SmallestMaxSize", "max_size": 300, "interpolation": CUBIC, "p": 1.0}, 1),
    "smallest-nearest": ({"__class_fullname__": "SmallestMaxSize", "max_size": 256, "interpolation": NEAREST, "p": 1.0}, 1),
}


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight 12-megapixel noisy photos (every scikit-image photo once, half of them upright) with masks."""
    return demo.make_photos(tmp_path_factory.mktemp("photos"), 8, WIDTH, HEIGHT)


def build(photos: Path, out: Path, leading: dict[str, Any], decode: str, workers: int = 1) -> list[dict[str, Any]]:
    config = parse_config(
        {
            "features": {"image": {"kind": "image", "column": 0, "encoding": "png"}, "mask": {"kind": "mask", "column": 1}},
            "augment": {"copies": 2, "decode": decode, "pipeline": [leading, *AFTER]},
        }
    )
    shardkit.build([photos / "train.txt"], out, config=config, workers=workers, seed=3, progress=False)
    return tfread.read_split(str(out), "train")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_reduced_decode_stays_within_38_db_and_masks_are_identical(photos: Path, tmp_path: Path, name: str) -> None:
    leading, scale = PIPELINES[name]
    data = (photos / "images" / "00000.jpg").read_bytes()
    downscale = Downscale(split_leading_downscale(normalize_pipeline([leading, *AFTER]))[0])  # type: ignore[index]
    assert downscale.decode_scale(image_headers.probe(data)) == scale

    reduced = build(photos, tmp_path / "reduced", leading, "reduced")
    exact = build(photos, tmp_path / "exact", leading, "exact")
    assert len(reduced) == len(exact) == 16
    worst = float("inf")
    for r, e in zip(reduced, exact, strict=True):
        r_image, e_image = tfread.decode(r["image"]), tfread.decode(e["image"])
        assert r_image.shape == e_image.shape  # the same geometry: same size, same random crop
        worst = min(worst, psnr(r_image, e_image))
        assert np.array_equal(tfread.decode(r["mask"]), tfread.decode(e["mask"]))
    assert worst >= 38.0, f"{name}: worst PSNR {worst:.1f} dB"
    if scale == 1:
        assert worst == float("inf")  # nothing reduced: bit for bit the exact build


def test_reduced_build_is_the_same_bytes_at_any_worker_count(photos: Path, tmp_path: Path) -> None:
    leading = PIPELINES["longest-area"][0]
    build(photos, tmp_path / "one", leading, "reduced", workers=1)
    build(photos, tmp_path / "two", leading, "reduced", workers=2)
    assert tfread.raw_records(str(tmp_path / "one"), "train") == tfread.raw_records(str(tmp_path / "two"), "train")
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert manifest["config"]["augment"]["decode"] == "reduced"


def test_the_downscale_applied_on_its_own_is_albumentations_own_result() -> None:
    """Whatever is not decoded shrunk gets the leading transform exactly as the whole pipeline would."""
    import albumentations as A

    rng = np.random.default_rng(0)
    for leading, _ in PIPELINES.values():
        pipeline = normalize_pipeline([leading])
        downscale = Downscale(pipeline)
        for height, width in ((480, 640), (641, 479), (37, 1000), (300, 300)):
            for image in (rng.integers(0, 256, (height, width, 3), dtype=np.uint8), rng.integers(0, 256, (height, width), dtype=np.uint8)):
                mask = rng.integers(0, 5, (height, width), dtype=np.uint8)
                want = A.from_dict(pipeline)(image=image, mask=mask)
                assert np.array_equal(downscale.image(image), want["image"].reshape(downscale.image(image).shape))
                assert np.array_equal(downscale.mask(mask), want["mask"])
                th, tw, _ = downscale.target(height, width)
                assert want["image"].shape[:2] == (th, tw)


def test_which_pipelines_begin_with_a_deterministic_downscale() -> None:
    def leads(*transforms: dict[str, Any]) -> bool:
        return split_leading_downscale(normalize_pipeline(list(transforms))) is not None

    flip = {"__class_fullname__": "HorizontalFlip", "p": 0.5}
    assert leads({"__class_fullname__": "SmallestMaxSize", "max_size": 512, "p": 1.0}, flip)
    assert leads({"__class_fullname__": "LongestMaxSize", "max_size_hw": [300, None], "p": 1.0})
    assert leads({"__class_fullname__": "Resize", "height": 64, "width": 64, "p": 1.0})
    assert not leads(flip, {"__class_fullname__": "SmallestMaxSize", "max_size": 512})  # not first
    assert not leads({"__class_fullname__": "SmallestMaxSize", "max_size": 512, "p": 0.5})  # not always applied
    assert not leads({"__class_fullname__": "SmallestMaxSize", "max_size": [256, 512]})  # a random size
    assert not leads({"__class_fullname__": "RandomResizedCrop", "size": [64, 64]})
    leading, rest = split_leading_downscale(normalize_pipeline([{"__class_fullname__": "Resize", "height": 8, "width": 8, "p": 1.0}, flip]))  # type: ignore[misc]
    assert [t["__class_fullname__"] for t in rest["transform"]["transforms"]] == ["HorizontalFlip"]
    assert [t["__class_fullname__"] for t in leading["transform"]["transforms"]] == ["Resize"]


def test_upscaling_and_small_images_are_decoded_whole() -> None:
    downscale = Downscale(normalize_pipeline([{"__class_fullname__": "SmallestMaxSize", "max_size": 512, "p": 1.0}]))
    for width, height in ((640, 480), (800, 600), (1536, 1023)):
        assert downscale.decode_scale(image_headers.ImageInfo("JPEG", "RGB", width, height)) == 1
    assert downscale.decode_scale(image_headers.ImageInfo("JPEG", "RGB", 4096, 3072)) == 2  # 1536 rows: twice 512
    assert downscale.decode_scale(image_headers.ImageInfo("PNG", "RGB", 4032, 3024)) == 1  # only JPEG scales


def test_config_decode_switch() -> None:
    pipeline = [{"__class_fullname__": "HorizontalFlip", "p": 0.5}]
    features = {"image": {"kind": "image", "column": 0}}
    assert parse_config({"features": features, "augment": {"pipeline": pipeline}}).augment.decode == "reduced"  # type: ignore[union-attr]
    exact = parse_config({"features": features, "augment": {"pipeline": pipeline, "decode": "exact"}})
    assert exact.to_dict()["augment"]["decode"] == "exact"
    assert parse_config(exact.to_dict()) == exact
    with pytest.raises(Exception, match=r"augment\.decode.*reduced or exact"):
        parse_config({"features": features, "augment": {"pipeline": pipeline, "decode": "fast"}})


def test_a_pipeline_that_only_downscales_leaves_the_rest_empty() -> None:
    from shardkit.pipeline.shard.augment import Augmenter

    pipeline = normalize_pipeline([{"__class_fullname__": "LongestMaxSize", "max_size": 64, "p": 1.0}])
    augmenter = Augmenter(pipeline, [("image", "image"), ("mask", "mask")], "reduced")
    assert augmenter.downscale is not None
    image, mask = np.full((48, 64, 3), 9, np.uint8), np.ones((48, 64), np.uint8)
    out = augmenter({"image": image, "mask": mask}, seed=1)
    assert np.array_equal(out["image"], image) and np.array_equal(out["mask"], mask)
    assert Augmenter(pipeline, [("image", "image"), ("mask", "mask")], "exact").downscale is None
