"""Contact sheets: tiles of images in rows, masks overlaid in colour, objects drawn, captions, a legend.

Pure drawing with numpy and Pillow: no TensorFlow, no matplotlib. A class value keeps its colour
on every sheet (a fixed palette, value 0 drawn as no colour: background), and the sheet stays
a sensible size: tiles are shrunk to one height so that the widest row fits ``max_width``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from shardkit.features.drawn import Overlay
from shardkit.view import boxes, fonts

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
GAP = 6  # pixels between tiles, and around the sheet
LINE = 12  # pixels of one caption line (Pillow's built-in font)
MAX_WIDTH = 2000
TILE_HEIGHT = 160  # the tallest a tile is drawn; smaller when the widest row would not fit
OBJECTS_TILE_HEIGHT = 240  # the same on a sheet with objects drawn: their names must be read on the picture
MIN_TILE_HEIGHT = 80  # smaller images are enlarged (nearest neighbour), so that they and their captions can be read
OVERLAY_ALPHA = 0.45
COLOUR_CODED = 1 << 24  # marks a class that is an RGB mask's colour (see as_classes)

# Distinct, readable colours (the first of Kelly's 22), then a golden-angle walk for more classes.
_PALETTE = [
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
    (210, 245, 60), (250, 190, 212), (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0),
    (170, 255, 195), (128, 128, 0), (255, 215, 180), (0, 0, 128), (255, 225, 25),
]  # fmt: skip


@dataclasses.dataclass
class Tile:
    """One picture on a sheet: an image (HxW, HxWx1, HxWx3 or HxWx4, uint8), an optional mask of
    class values of the same height and width, caption lines drawn under it, and objects drawn
    on it (boxes, instance masks, keypoints: ``view.boxes``)."""

    image: np.ndarray
    mask: np.ndarray | None = None
    caption: Sequence[str] = ()
    objects: Sequence[Overlay] = ()


def colour(value: int) -> tuple[int, int, int]:
    """The colour of mask class ``value`` (>= 1) on every sheet; a colour-coded mask's own colour."""
    if value >= COLOUR_CODED:
        return (value >> 16) & 255, (value >> 8) & 255, value & 255
    if value <= len(_PALETTE):
        return _PALETTE[value - 1]
    hue = (value * 137.508) % 360  # golden angle: neighbours far apart
    import colorsys

    r, g, b = colorsys.hsv_to_rgb(hue / 360, 0.75, 0.95)
    return int(r * 255), int(g * 255), int(b * 255)


def rgb(image: np.ndarray) -> np.ndarray:
    """Any tile image as HxWx3 uint8 (grey repeated, alpha dropped)."""
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.shape[2] == 1:
        return np.repeat(array, 3, axis=2)
    return array[:, :, :3]


def as_classes(mask: np.ndarray) -> np.ndarray:
    """A mask as one class value per pixel: grey or palette values as they are; a colour-coded
    mask (RGB, RGBA, as CamVid's) as its colours, each marked ``COLOUR_CODED``, so that every tile
    draws a class in the mask's own colour (black stays 0, the background)."""
    values = np.asarray(mask)
    if values.ndim == 3 and values.shape[2] < 3:
        return values[:, :, 0]
    if values.ndim == 3:
        channels = values[:, :, :3].astype(np.int64)
        packed = (channels[:, :, 0] << 16) | (channels[:, :, 1] << 8) | channels[:, :, 2]
        return np.where(packed == 0, 0, packed | COLOUR_CODED)
    return values


def overlay(image: np.ndarray, mask: np.ndarray, alpha: float = OVERLAY_ALPHA) -> np.ndarray:
    """``image`` with each non-zero class value of ``mask`` blended in its colour."""
    base = rgb(image).astype(np.float32)
    values = as_classes(mask)
    if values.shape != base.shape[:2]:
        raise ValueError(f"mask {values.shape} and image {base.shape[:2]} differ in size")
    for value in np.unique(values):
        if value == 0:
            continue
        where = values == value
        base[where] = (1 - alpha) * base[where] + alpha * np.array(colour(int(value)), dtype=np.float32)
    return np.rint(base).astype(np.uint8)


def classes_in(tiles: Sequence[Tile]) -> list[int]:
    """The non-zero mask values on these tiles, sorted."""
    found: set[int] = set()
    for tile in tiles:
        if tile.mask is not None:
            found.update(int(v) for v in np.unique(as_classes(tile.mask)) if v != 0)
    return sorted(found)


def objects_in(tiles: Sequence[Tile]) -> dict[int, str]:
    """The classes of the objects on these tiles: colour number -> class name, sorted."""
    found: dict[int, str] = {}
    for tile in tiles:
        for overlay in tile.objects:
            found.update(zip(overlay.colours, overlay.names, strict=False))
    return dict(sorted(found.items()))


def render(
    rows: Sequence[Sequence[Tile]],
    *,
    title: str | None = None,
    legend: dict[int, str] | None = None,
    max_width: int = MAX_WIDTH,
    tile_height: int | None = None,
) -> Image.Image:
    """The sheet: ``rows`` of tiles at one height (``tile_height`` at most: by default
    ``TILE_HEIGHT``, or ``OBJECTS_TILE_HEIGHT`` with objects; shrunk to fit ``max_width``; images under
    ``MIN_TILE_HEIGHT`` enlarged by a whole factor), masks overlaid, objects drawn,
    captions under each tile, ``title`` on top and a legend of the mask classes shown at the
    bottom (``legend`` names them; unnamed ones show their value), then of the objects' classes."""
    if tile_height is None:
        tile_height = OBJECTS_TILE_HEIGHT if any(tile.objects for row in rows for tile in row) else TILE_HEIGHT
    sizes = [[_size(tile) for tile in row] for row in rows]
    tallest = max((h for row in sizes for h, _ in row), default=1)
    height = min(tile_height, tallest)
    if height < MIN_TILE_HEIGHT:  # thumbnails of thumbnails: enlarged by a whole factor, pixels kept square
        height *= -(-MIN_TILE_HEIGHT // height)
    room = max_width - 2 * GAP
    for shapes in sizes:  # the height at which every row's tiles and gaps fit the room
        wide = sum(_scaled_width(hw, height) for hw in shapes)
        if wide + GAP * (len(shapes) - 1) > room:
            height = max(1, int(height * (room - GAP * (len(shapes) - 1)) / wide))
    # Shrink first, overlay after: a 12-megapixel photo is blended at thumbnail size, not in full.
    scaled = [[_picture(tile, height) for tile in row] for row in rows]
    lines = max((len(t.caption) for row in rows for t in row), default=0)
    row_height = height + lines * LINE + GAP
    width = max((sum(p.width for p in row) + GAP * (len(row) - 1) for row in scaled), default=1) + 2 * GAP
    classes = classes_in([t for row in rows for t in row])
    objects = objects_in([t for row in rows for t in row])
    top = GAP + (LINE + GAP if title else 0)
    bottom = (LINE + GAP) if classes or objects else 0
    sheet = Image.new("RGB", (max(width, 200), top + row_height * len(scaled) + bottom + GAP), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    if title:
        fonts.write(draw, (GAP, GAP), title, INK, sheet.width - 2 * GAP, keep_end=True)
    y = top
    for tiles, row in zip(rows, scaled, strict=True):
        x = GAP
        for tile, picture in zip(tiles, row, strict=True):
            sheet.paste(picture, (x, y))
            for i, text in enumerate(tile.caption):
                fonts.write(draw, (x, y + height + 1 + i * LINE), text, INK, picture.width, keep_end=True)
            x += picture.width + GAP
        y += row_height
    keys = [
        (value, (legend or {}).get(value) or (f"#{value & 0xFFFFFF:06x}" if value >= COLOUR_CODED else str(value))) for value in classes
    ]
    keys += [(value, name) for value, name in objects.items() if (value, name) not in keys]  # an object's class: its box's colour
    x = GAP
    for value, name in keys:
        draw.rectangle((x, y + 1, x + 9, y + 10), fill=colour(value), outline=INK)
        x += 13 + int(fonts.write(draw, (x + 13, y), name, INK, sheet.width)) + 12
        if x > sheet.width - 40:
            break
    return sheet


def _size(tile: Tile) -> tuple[int, int]:
    return int(tile.image.shape[0]), int(tile.image.shape[1])


def _scaled_width(size: tuple[int, int], height: int) -> int:
    return max(1, size[1] * height // size[0])  # rounded down: a row of shrunk tiles never outgrows the room made for it


def _picture(tile: Tile, height: int) -> Image.Image:
    """The tile at ``height`` pixels: the image shrunk by area (or enlarged by nearest neighbour), the
    mask by nearest neighbour (class values stay exact), then the overlay."""
    image = Image.fromarray(np.ascontiguousarray(rgb(tile.image)), "RGB")
    mask = tile.mask
    if image.height != height:
        size = (_scaled_width((image.height, image.width), height), height)
        image = image.resize(size, Image.Resampling.BOX if image.height > height else Image.Resampling.NEAREST)
        if mask is not None:  # nearest neighbour by index: any dtype, class values kept
            values = as_classes(mask)
            rows = np.arange(size[1]) * values.shape[0] // size[1]
            cols = np.arange(size[0]) * values.shape[1] // size[0]
            mask = values[rows][:, cols]
    if mask is not None:
        image = Image.fromarray(overlay(np.asarray(image), mask), "RGB")
    return boxes.draw(image, tile.objects, colour) if tile.objects else image
