"""``shardkit preview OUT --stats``: each bar is drawn where the statistics' count says, and those
counts are what TensorFlow reads back from the shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.errors import UsageError
from shardkit.statistics.feature_stats import HISTOGRAM_ROW_STEP
from shardkit.view import histograms
from shardkit.view.histograms import CHART, LEVELS, LINE, ROW, STRIP, Placed, bar_height
from shardkit.view.sheet import colour
from tests import tfread

TABLE = """\
features:
  n: {kind: int64}
  s: {kind: string}
  c: {kind: class_name, classes: [zebra, dog, cat]}
  k: {kind: int64}
"""
N_COUNTS = [40, 0, 10, 20, 5, 0, 0, 0, 0, 25]  # values 0..9: bucket i of ten between 0 and 9 holds value i
S_COUNTS = {"apple": 50, "pear": 30, "fig": 15, "kiwi": 5}
C_COUNTS = {"zebra": 60, "dog": 30, "cat": 10}


def _run(picture: Image.Image, x: int, y0: int, y1: int, rgb: tuple[int, int, int]) -> int:
    """How many pixels of column ``x`` between ``y0`` and ``y1`` are ``rgb``."""
    pixels = np.asarray(picture)[y0:y1, x]
    return int((pixels == rgb).all(axis=1).sum())


def _row(picture: Image.Image, y: int, x0: int, x1: int, rgb: tuple[int, int, int]) -> int:
    pixels = np.asarray(picture)[y, x0:x1]
    return int((pixels == rgb).all(axis=1).sum())


def _cell(placed: list[Placed], split: str, key: str, kind: str) -> Placed:
    return next(p for p in placed if (p.split, p.key, p.kind) == (split, key, kind))


@pytest.fixture(scope="module")
def table_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("stats-table")
    rng = np.random.default_rng(3)
    n = np.repeat(np.arange(10), N_COUNTS)
    s = np.repeat(list(S_COUNTS), list(S_COUNTS.values()))
    c = np.repeat(list(C_COUNTS), list(C_COUNTS.values()))
    order = rng.permutation(100)
    table = pa.table({"n": n[order], "s": s[order], "c": c[order], "k": np.full(100, 7)})
    pq.write_table(table, root / "train.parquet")
    (root / "config.yaml").write_text(TABLE)
    out = root / "out"
    shardkit.build([root / "train.parquet"], out, config=str(root / "config.yaml"), workers=1, progress=False)
    return out


def test_numbers_classes_and_top_values_are_drawn_as_their_counts(table_out: Path) -> None:
    found = shardkit.stats([str(table_out)])
    picture = shardkit.preview([table_out], stats=True)
    placed = histograms.layout(found)
    assert picture.width == histograms.WIDTH and picture.height > max(p.box.y + p.box.height for p in placed)
    records = tfread.read_split(str(table_out), "train")
    assert np.bincount([int(r["n"]) for r in records], minlength=10).tolist() == N_COUNTS  # what TensorFlow reads

    assert [(p.key, p.kind) for p in placed if p.kind == "classes"] == [("c", "classes")]  # n and k: counted by value, drawn as numbers
    n = _cell(placed, "train", "n", "number")
    feature = histograms._features(found.proto)["train"]["n"]
    np.testing.assert_allclose([count for _, _, count in histograms.number_buckets(feature)], N_COUNTS, atol=1e-9)  # KLL: 100 exact
    width = n.box.width // 10
    for i, count in enumerate(N_COUNTS):
        drawn = _run(picture, n.box.x + i * width + width // 2, n.box.y + LINE, n.box.y + LINE + CHART, histograms.NUMBER)
        assert drawn == bar_height(count, 40, CHART), (i, count, drawn)
    assert bar_height(40, 40, CHART) == CHART and bar_height(10, 40, CHART) == CHART // 4

    classes = _cell(placed, "train", "c", "classes")
    left, room = histograms.class_bar_room(classes.box)
    for i, (name, count) in enumerate(C_COUNTS.items()):  # the manifest's order
        drawn = _row(picture, classes.box.y + LINE + i * ROW + ROW // 2, left, left + room + 1, colour(i + 1))
        assert drawn == bar_height(count, 60, room), name

    text = _cell(placed, "train", "s", "text")
    for i, count in enumerate(S_COUNTS.values()):  # most frequent first
        drawn = _row(picture, text.box.y + LINE + i * ROW + ROW // 2, text.box.x, text.box.x + text.box.width, histograms.TEXT)
        assert drawn == bar_height(count, 50, text.box.width - 110 - 48)

    assert _cell(placed, "train", "k", "constant")  # one value throughout: a line, no chart


PNG = """\
features:
  image: {kind: image, column: 0, encoding: png}
  mask: {kind: mask, column: 1}
"""


def test_pixel_histograms_are_drawn_one_column_a_level(seg_data: Path, tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(PNG)
    out = tmp_path / "out"
    shardkit.build([seg_data], out, config=str(tmp_path / "config.yaml"), workers=1, progress=False)
    found = shardkit.stats([str(out)])
    picture = shardkit.preview([out], tmp_path / "stats.png", stats=True, split="val")
    placed = histograms.layout(found, split="val")
    assert {p.split for p in placed} == {"val"}
    with Image.open(tmp_path / "stats.png") as written:
        assert written.size == picture.size

    step = HISTOGRAM_ROW_STEP  # the histograms count every 4th row of each picture
    pixels = np.concatenate([tfread.decode(bytes(r["image"]), 3)[::step].reshape(-1, 3) for r in tfread.read_split(str(out), "val")])
    image = _cell(placed, "val", "image", "picture")
    drawn_histograms = histograms.pixel_histograms(histograms._features(found.proto)["val"]["image"])[3]
    for c, tag in enumerate("RGB"):
        counts = np.bincount(pixels[:, c], minlength=LEVELS)
        assert drawn_histograms[tag] == counts.tolist()  # the statistics count every 4th row of every picture written
        top = image.box.y + LINE + c * (STRIP + 2)
        left = image.box.x + 14
        heights = [_run(picture, left + level, top, top + STRIP, histograms.CHANNEL[tag]) for level in range(LEVELS)]
        assert heights == [bar_height(int(k), int(counts.max()), STRIP) for k in counts], tag


def test_stats_picture_refusals_are_one_line(table_out: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^no split 'test' in these statistics: train$"):
        shardkit.preview([table_out], stats=True, split="test")
    with pytest.raises(UsageError, match="give one"):
        shardkit.preview([table_out], stats=True, labels=True)
    from click.testing import CliRunner

    from shardkit.cli.main import main

    done = CliRunner().invoke(main, ["preview", str(table_out), "--stats", "-o", str(tmp_path / "s.webp")])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"wrote {tmp_path / 's.webp'} (960x")
