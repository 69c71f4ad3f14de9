"""Images stored as they are (``encoding: raw``) that TensorFlow cannot decode: a TIFF named
``.jpg`` (a scanner's or a careless converter's), a palette BMP. Pillow reads them, so a build and
``verify --deep`` once took them, and ``shardkit.tfdata.load`` then failed inside DecodeImage.
The build refuses such an image as one bad entry naming it and the fix; ``verify --deep`` finds
one in shards built before; and the table of what TensorFlow reads is checked against it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.formats import image_codec
from shardkit.formats.image_headers import probe, tf_problem
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # the shardkit command in child processes, a few seconds a test

RAW = "features:\n  image: {kind: image, column: 0, encoding: raw}\n  label: {kind: int64, column: 1}\n"
PNG = RAW.replace("encoding: raw", "encoding: png")
TIFF_REFUSED = (
    "a TIFF file, which TensorFlow's image decoders cannot read, stored as it is (encoding: raw): "
    "set the feature's encoding: png or jpeg to re-encode it"
)


def _picture(fmt: str, mode: str = "RGB") -> bytes:
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (12, 16, 3), dtype=np.uint8)).convert(mode)
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """``data/train.txt`` listing a JPEG and a TIFF named ``scan.jpg``, with raw and png configs."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "photo.jpg").write_bytes(_picture("JPEG"))
    (root / "scan.jpg").write_bytes(_picture("TIFF"))
    (root / "train.txt").write_text("photo.jpg 0\nscan.jpg 1\n")
    (tmp_path / "raw.yaml").write_text(RAW)
    (tmp_path / "png.yaml").write_text(PNG)
    return root


def test_a_tiff_named_jpg_stored_raw_is_refused_naming_the_file_and_the_fix(data: Path, tmp_path: Path) -> None:
    before = digests(data, tmp_path / "raw.yaml", tmp_path / "png.yaml")
    failed = run_cli(["build", data, "-o", tmp_path / "out", "-c", tmp_path / "raw.yaml", "-w", "1"], tmp_path)
    assert one_line_error(failed) == f"Error: {data}/train.txt:2: image: {data}/scan.jpg: {TIFF_REFUSED}"
    skipped = run_cli(["build", data, "-o", tmp_path / "out", "-c", tmp_path / "raw.yaml", "-w", "1", "--on-error", "skip"], tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    [listed] = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert (listed["source"], listed["line"]) == (f"{data}/train.txt", 2)
    result = shardkit.build([data], tmp_path / "png", config=tmp_path / "png.yaml", workers=1, progress=False)
    assert (result.records, result.skipped) == (2, 0)  # re-encoded: what the error says to do works
    assert digests(data, tmp_path / "raw.yaml", tmp_path / "png.yaml") == before


def test_verify_deep_finds_a_raw_tiff_in_shards_built_before(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Shards as shardkit built them before it refused such images: no check on what TensorFlow reads.
    monkeypatch.setattr(image_codec, "tf_problem", lambda info: None)
    shardkit.build([data], tmp_path / "out", config=tmp_path / "raw.yaml", workers=1, progress=False, shuffle=False)
    shallow = run_cli(["verify", tmp_path / "out"], tmp_path)
    assert shallow.returncode == 0, shallow.stdout  # every CRC and count is right: the bytes are what was written
    deep = run_cli(["verify", "--deep", "--json", tmp_path / "out"], tmp_path)
    assert deep.returncode == 1, deep.stdout
    [shard] = json.loads(deep.stdout)["files"]
    assert shard["problem"] == (
        "record 1 at byte "
        f"{shard['problem'].split('at byte ')[1].split(':')[0]}: image 'image' is a TIFF file, which TensorFlow's image decoders "
        "cannot read: rebuild it with encoding: png or jpeg"
    )


CASES = [
    ("JPEG", "RGB"),
    ("JPEG", "L"),
    ("JPEG", "CMYK"),
    ("PNG", "RGB"),
    ("PNG", "P"),
    ("PNG", "LA"),
    ("GIF", "RGB"),
    ("BMP", "RGB"),
    ("BMP", "L"),
    ("BMP", "P"),
    ("BMP", "1"),
    ("WEBP", "RGB"),
    ("TIFF", "RGB"),
    ("PPM", "RGB"),
    ("ICO", "RGB"),
    ("TGA", "RGB"),
]


@pytest.mark.parametrize(("fmt", "mode"), CASES)
def test_what_tensorflow_reads_is_what_its_decoder_reads(fmt: str, mode: str) -> None:
    """The table against TensorFlow itself: decode_image as ``shardkit.tfdata`` calls it for a raw
    image, its pixels compared with Pillow's (a palette BMP decodes without error, to its indices)."""
    tf = pytest.importorskip("tensorflow")
    data = _picture(fmt, mode)
    try:
        got = tf.io.decode_image(data, expand_animations=False).numpy()
    except tf.errors.InvalidArgumentError:
        reads = False
    else:
        with Image.open(io.BytesIO(data)) as im:  # Pillow's pixels, in the channels TensorFlow gave
            want = np.asarray(im.convert({1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[got.shape[2]])).reshape(got.shape)
        lossy = fmt in ("JPEG", "WEBP")  # TensorFlow's and Pillow's decoders may differ by a level or two
        reads = bool(np.abs(got.astype(int) - want).max() <= (8 if lossy else 0))
    assert (tf_problem(probe(data)) is None) == reads
