"""The contact sheet: tiles in rows, masks overlaid where they are, in their class colours, a bounded size."""

from __future__ import annotations

import numpy as np

from shardkit.view import sheet


def test_a_mask_is_overlaid_where_it_is_in_its_class_colour() -> None:
    image = np.full((40, 60, 3), 100, np.uint8)
    mask = np.zeros((40, 60), np.uint8)
    mask[10:20, 5:25] = 3
    out = sheet.overlay(image, mask)
    expected = np.rint(0.55 * 100 + 0.45 * np.array(sheet.colour(3))).astype(np.uint8)
    assert (out[10:20, 5:25] == expected).all()
    assert (out[mask == 0] == 100).all()  # background keeps the image's pixels


def test_colours_are_fixed_and_distinct() -> None:
    colours = [sheet.colour(v) for v in range(1, 60)]
    assert len(set(colours)) == len(colours)
    assert sheet.colour(7) == sheet.colour(7)


def test_rows_of_tiles_with_captions_and_a_legend_stay_within_the_width() -> None:
    big = np.zeros((3024, 4032, 3), np.uint8)
    mask = np.zeros((3024, 4032), np.uint8)
    mask[:100, :100] = 1
    rows = [[sheet.Tile(big, mask, ["original", "train_0.txt:1"]), *[sheet.Tile(big, None, [f"copy {i}"]) for i in range(1, 5)]]] * 3
    picture = sheet.render(rows, title="a title", legend={1: "road"})
    assert picture.mode == "RGB"
    assert picture.width <= sheet.MAX_WIDTH
    assert picture.height <= 3 * (sheet.TILE_HEIGHT + 2 * sheet.LINE + sheet.GAP) + 4 * sheet.LINE


def test_small_images_are_enlarged_by_a_whole_factor_and_grey_or_alpha_images_are_drawn() -> None:
    shapes = [(20, 30), (20, 30, 4), (20, 30, 1)]
    mask = np.zeros((20, 30), np.uint8)
    mask[0, 0] = 2
    rows = [[sheet.Tile(np.zeros(shape, np.uint8), mask if i == 0 else None) for i, shape in enumerate(shapes)]]
    picture = np.asarray(sheet.render(rows))
    assert picture.shape[0] == sheet.GAP + 80 + sheet.GAP + sheet.GAP + sheet.LINE + sheet.GAP  # 20 px x 4, and the legend
    assert picture.shape[1] >= 3 * 120 + 4 * sheet.GAP
    tinted = np.rint(0.45 * np.array(sheet.colour(2))).astype(np.uint8)
    g = sheet.GAP
    assert (picture[g : g + 4, g : g + 4] == tinted).all() and (picture[g + 4, g + 4] == 0).all()  # one mask pixel, 4x4 now


def test_a_long_row_of_any_shape_fits_the_width() -> None:
    for shape in ((33, 47, 3), (333, 471, 3), (10, 500, 3)):
        assert sheet.render([[sheet.Tile(np.zeros(shape, np.uint8)) for _ in range(18)]]).width <= sheet.MAX_WIDTH, shape
