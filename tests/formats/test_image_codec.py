"""The header fast path and the fast decoders must agree with Pillow on every file they accept."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from shardkit.formats import image_codec, image_headers


def _encoded(mode: str, fmt: str, **kwargs: object) -> bytes:
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, size=(13, 17, 4), dtype=np.uint8), "RGBA").convert(mode)
    buf = io.BytesIO()
    image.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


CASES = [
    ("L", "JPEG", {}),
    ("RGB", "JPEG", {}),
    ("RGB", "JPEG", {"progressive": True}),
    ("CMYK", "JPEG", {}),
    ("L", "PNG", {}),
    ("RGB", "PNG", {}),
    ("RGBA", "PNG", {}),
    ("LA", "PNG", {}),
    ("P", "PNG", {}),
    ("1", "PNG", {}),
    ("I;16", "PNG", {}),
    ("RGB", "BMP", {}),
    ("RGB", "WEBP", {}),
]


@pytest.mark.parametrize(("mode", "fmt", "kwargs"), CASES, ids=[f"{m}-{f}-{k}" for m, f, k in CASES])
def test_probe_matches_pillow(mode: str, fmt: str, kwargs: dict) -> None:
    data = _encoded(mode, fmt, **kwargs)
    with Image.open(io.BytesIO(data)) as im:
        expected = image_headers.ImageInfo(im.format or "", im.mode, im.width, im.height)
    assert image_headers.probe(data) == expected


BROKEN = [b"", b"\xff\xd8", b"\x89PNG\r\n\x1a\n" + b"\x00" * 30, b"GIF89a garbage", b"\xff\xd8\xff\xe0\x00\x10JFIF"]


@pytest.mark.parametrize("data", BROKEN)
def test_probe_rejects_broken_headers(data: bytes) -> None:
    with pytest.raises(image_headers.ImageProblem, match="not an image Pillow can read"):
        image_headers.probe(data)


def _jpeg(array: np.ndarray, **options: Any) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="JPEG", **options)
    return buf.getvalue()


def _png(image: Image.Image, **options: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG", **options)
    return buf.getvalue()


def test_fast_decoders_give_exactly_pillows_pixels() -> None:
    rng = np.random.default_rng(1)
    rgb = np.clip(rng.normal(128, 40, (61, 83, 3)), 0, 255).astype(np.uint8)
    grey = rgb[:, :, 0].copy()
    files = {
        "jpeg 4:2:0": (_jpeg(rgb, quality=90), "RGB"),
        "jpeg 4:4:4": (_jpeg(rgb, quality=95, subsampling=0), "RGB"),
        "jpeg progressive": (_jpeg(rgb, quality=80, progressive=True), "RGB"),
        "jpeg grey": (_jpeg(grey, quality=90), "L"),
        "jpeg grey as RGB (Pillow converts)": (_jpeg(grey, quality=90), "RGB"),
        "png L": (_png(Image.fromarray(grey)), "L"),
        "png RGB": (_png(Image.fromarray(rgb), compress_level=1), "RGB"),
        "png RGBA": (_png(Image.fromarray(np.dstack([rgb, grey]))), "RGBA"),
        "png L with transparency": (_png(Image.fromarray(grey), transparency=7), "L"),
        "png palette": (_png(Image.fromarray(grey).convert("P")), "RGB"),
    }
    for name, (data, mode) in files.items():
        with Image.open(io.BytesIO(data)) as im:
            want = np.asarray(im.convert(mode))
        got = image_codec.decode(data, mode)
        assert got.dtype == np.uint8 and np.array_equal(got, want), name


def test_a_damaged_jpeg_still_gets_pillows_error() -> None:
    data = _jpeg(np.zeros((64, 64, 3), np.uint8) + 90)
    with pytest.raises(image_headers.ImageProblem, match="cannot decode image"):
        image_codec.decode(data[: len(data) // 3], "RGB")


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_masks_are_written_losslessly_and_tensorflow_reads_them(channels: int) -> None:
    from tests import tfread

    rng = np.random.default_rng(2)
    shape = (37, 53) if channels == 1 else (37, 53, channels)
    mask = (rng.integers(0, 4, shape) * 60).astype(np.uint8)
    mask[5:20] = 7  # runs, as class maps have
    sizes = []
    for level in (0, 1, 9):
        data = image_codec.encode(mask, "png", 95, png_level=level, mask=True)
        assert np.array_equal(tfread.decode(data, channels).reshape(mask.shape), mask)
        assert np.array_equal(image_codec.decode(data, {1: "L", 3: "RGB", 4: "RGBA"}[channels]), mask)
        sizes.append(len(data))
    assert sizes[0] > sizes[1] >= sizes[2]  # level 0 stores, higher levels compress harder
