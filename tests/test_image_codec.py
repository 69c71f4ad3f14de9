"""The header fast path must agree with Pillow on every file it accepts."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from shardkit.formats import image_codec


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
        expected = image_codec.ImageInfo(im.format or "", im.mode, im.width, im.height)
    assert image_codec.probe(data) == expected


BROKEN = [b"", b"\xff\xd8", b"\x89PNG\r\n\x1a\n" + b"\x00" * 30, b"GIF89a garbage", b"\xff\xd8\xff\xe0\x00\x10JFIF"]


@pytest.mark.parametrize("data", BROKEN)
def test_probe_rejects_broken_headers(data: bytes) -> None:
    with pytest.raises(image_codec.ImageProblem, match="not an image Pillow can read"):
        image_codec.probe(data)
