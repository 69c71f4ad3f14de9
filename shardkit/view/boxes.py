"""A record's objects drawn on its tile (``features.base.Overlay``): each instance mask blended in
its class's colour and outlined, each box in that colour with its class name on a tab (a crowd's
box dashed), keypoints as dots (filled where visible, hollow where hidden). Objects are placed by
fractions of the picture, so a tile of any size draws them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from shardkit.features.drawn import Overlay
from shardkit.view import fonts

MASK_ALPHA = 0.4
DARK = (20, 20, 20)
LIGHT = (255, 255, 255)
Colour = Callable[[int], tuple[int, int, int]]


def draw(picture: Image.Image, overlays: Sequence[Overlay], colour: Colour) -> Image.Image:
    """``picture`` (RGB) with the objects of ``overlays`` drawn on it; ``colour`` gives a class
    colour number's colour."""
    if not any(len(o.names) for o in overlays):
        return picture
    pixels = np.asarray(picture, dtype=np.float32).copy()
    for overlay in overlays:
        if overlay.masks is not None:
            _blend(pixels, overlay, colour)
    out = Image.fromarray(np.rint(pixels).astype(np.uint8), "RGB")
    pen = ImageDraw.Draw(out)
    line = 2 if out.height >= 120 else 1
    tabs = []
    for overlay in overlays:
        scale = np.array([out.width, out.height, out.width, out.height], dtype=np.float64)
        for box, name, number, crowd in zip(overlay.boxes * scale, overlay.names, overlay.colours, _crowds(overlay), strict=False):
            x0, y0, x1, y1 = (float(v) for v in box)
            x1, y1 = max(x1 - 1, x0), max(y1 - 1, y0)  # the last pixel inside the box
            fill = colour(number)
            (_dashed if crowd else _solid)(pen, (x0, y0, x1, y1), fill, line)
            tabs.append(((x0, y0, x1, y1), name + (" (crowd)" if crowd else ""), fill))
        if overlay.keypoints is not None:
            _keypoints(pen, overlay, out.size, colour, line + 1)
    placed: list[tuple[float, float, float, float]] = []
    for corners, text, fill in tabs:  # after every box: a name is never crossed by another object's box
        placed.append(_tab(pen, corners, text, fill, out.size, placed))
    return out


def _crowds(overlay: Overlay) -> list[bool]:
    return [bool(c) for c in overlay.crowd] if overlay.crowd is not None else [False] * len(overlay.names)


def _blend(pixels: np.ndarray, overlay: Overlay, colour: Colour) -> None:
    """Each mask, resized to ``pixels`` by nearest neighbour, blended in and outlined in its colour."""
    assert overlay.masks is not None
    height, width = pixels.shape[:2]
    for mask, number in zip(overlay.masks, overlay.colours, strict=False):
        rows = np.arange(height) * mask.shape[0] // height
        cols = np.arange(width) * mask.shape[1] // width
        inside = mask[rows][:, cols] > 0
        if not inside.any():
            continue
        tint = np.array(colour(number), dtype=np.float32)
        pixels[inside] = (1 - MASK_ALPHA) * pixels[inside] + MASK_ALPHA * tint
        edge = inside & ~_shrunk(inside)
        pixels[edge] = tint


def _shrunk(inside: np.ndarray) -> np.ndarray:
    """``inside`` less its border pixels (a pixel stays when its four neighbours are inside too)."""
    padded = np.pad(inside, 1)
    kept: np.ndarray = padded[1:-1, 1:-1] & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return kept


def _solid(pen: ImageDraw.ImageDraw, box: tuple[float, float, float, float], fill: tuple[int, int, int], line: int) -> None:
    pen.rectangle(box, outline=fill, width=line)


def _dashed(pen: ImageDraw.ImageDraw, box: tuple[float, float, float, float], fill: tuple[int, int, int], line: int) -> None:
    x0, y0, x1, y1 = box
    for a, b in (((x0, y0), (x1, y0)), ((x1, y0), (x1, y1)), ((x1, y1), (x0, y1)), ((x0, y1), (x0, y0))):
        length = max(abs(b[0] - a[0]), abs(b[1] - a[1]))
        for start in np.arange(0, length, 6.0):
            end = min(start + 3.5, length)
            t0, t1 = start / length if length else 0, end / length if length else 0
            p0 = (a[0] + (b[0] - a[0]) * t0, a[1] + (b[1] - a[1]) * t0)
            p1 = (a[0] + (b[0] - a[0]) * t1, a[1] + (b[1] - a[1]) * t1)
            pen.line((p0, p1), fill=fill, width=line)


def _tab(
    pen: ImageDraw.ImageDraw,
    box: tuple[float, float, float, float],
    text: str,
    fill: tuple[int, int, int],
    size: tuple[int, int],
    placed: Sequence[tuple[float, float, float, float]],
) -> tuple[float, float, float, float]:
    """``text`` on a tab of the box's colour at its left edge: above the box, else inside its top,
    inside its bottom or below it, the first of those on the picture and clear of the names
    ``placed`` already (else above, or inside where there is no room above). Returns where it went."""
    text, font = fonts.fitted(text)  # in a font with its glyphs (a class name in any script)
    left, top, right, bottom = pen.textbbox((0, 0), text, font=font)
    w, h = right - left + 4, bottom - top + 3
    x = min(max(0.0, box[0]), max(0.0, size[0] - w))
    spots = [y for y in (box[1] - h, box[1], box[3] - h + 1, box[3] + 1) if y >= 0 and y + h <= size[1]] or [max(0.0, box[1])]
    y = next((y for y in spots if _hits((x, y, x + w, y + h), placed) is None), spots[0])
    pen.rectangle((x, y, x + w - 1, y + h - 1), fill=fill)
    ink = DARK if 0.299 * fill[0] + 0.587 * fill[1] + 0.114 * fill[2] > 140 else LIGHT
    pen.text((x + 2 - left, y + 1 - top), text, fill=ink, font=font)
    return x, y, x + w, y + h


def _hits(
    rect: tuple[float, float, float, float], placed: Sequence[tuple[float, float, float, float]]
) -> tuple[float, float, float, float] | None:
    return next((p for p in placed if rect[0] < p[2] and p[0] < rect[2] and rect[1] < p[3] and p[1] < rect[3]), None)


def _keypoints(pen: ImageDraw.ImageDraw, overlay: Overlay, size: tuple[int, int], colour: Colour, radius: int) -> None:
    assert overlay.keypoints is not None
    for points, number in zip(overlay.keypoints, overlay.colours, strict=False):
        fill = colour(number)
        for x, y, visibility in points.tolist():
            if visibility <= 0:
                continue  # not labelled
            cx, cy = x * size[0], y * size[1]
            shape = (cx - radius, cy - radius, cx + radius, cy + radius)
            if visibility >= 2:
                pen.ellipse(shape, fill=fill, outline=LIGHT)
            else:
                pen.ellipse(shape, fill=LIGHT, outline=fill)
