"""The fonts captions, class names and titles are drawn in: one with the glyphs the text needs,
where one is installed.

Pillow's built-in font (Aileron, a FreeType font since Pillow 10.1) has ASCII alone: ``é`` or
``日`` come out as its empty box. A text is drawn in the first font of a chain that has every
one of its characters: Pillow's own (so ASCII looks as it always did), then DejaVu Sans (Latin
with accents, Greek, Cyrillic), then Noto Sans and a CJK font (Noto Sans CJK, Droid Sans
Fallback, WenQuanYi, Arial Unicode), each where it is installed under the system's font
folders. Where no font of the chain has them all, the text is drawn in the one that has the
most, and each character it lacks (a control character too) is drawn as ``?``: never an empty
box. A font has a character where FreeType draws it other than as the font's "no glyph" shape
(glyph 0, what an unassigned code point draws as).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence

from PIL import ImageDraw, ImageFont

Font = ImageFont.ImageFont | ImageFont.FreeTypeFont
SIZE = 10  # the built-in font's size: a caption line is 12 pixels
FOLDERS = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "~/.local/share/fonts",
    "~/.fonts",
    "/Library/Fonts",
    "/System/Library/Fonts",
    "C:/Windows/Fonts",
)
# In the order they are tried after Pillow's own: broad Latin first, then the CJK fonts.
NAMES = (
    "DejaVuSans.ttf",
    "NotoSans-Regular.ttf",
    "NotoSansCJK-Regular.ttc",
    "NotoSansCJKsc-Regular.otf",
    "NotoSansCJKjp-Regular.otf",
    "DroidSansFallbackFull.ttf",
    "DroidSansFallback.ttf",
    "wqy-microhei.ttc",
    "wqy-zenhei.ttc",
    "Arial Unicode.ttf",
)
UNDRAWABLE = "?"
_NO_GLYPH = "\U0010fffd"  # a private-use code point no font draws: its glyph 0


class Face:
    """One font, and which characters it draws."""

    def __init__(self, font: Font) -> None:
        self.font = font
        self.freetype = isinstance(font, ImageFont.FreeTypeFont)
        self._none = self._shape(_NO_GLYPH) if self.freetype else None
        self._has: dict[str, bool] = {}

    def has(self, char: str) -> bool:
        known = self._has.get(char)
        if known is None:
            if not char.isprintable():
                known = False
            elif char.isspace() or (char.isascii() and not self.freetype):
                known = True
            else:  # Pillow's bitmap font (no FreeType): ASCII alone
                known = self.freetype and self._shape(char) != self._none
            self._has[char] = known
        return known

    def _shape(self, char: str) -> tuple[tuple[int, int], bytes]:
        mask = self.font.getmask(char)
        return mask.size, bytes(mask)


class Fonts:
    """A chain of fonts, tried in order for each text."""

    def __init__(self, fonts: Iterable[Font]) -> None:
        self.faces = [Face(font) for font in fonts]

    def fitted(self, text: str) -> tuple[str, Font]:
        """``text`` as drawn (a character no font has as ``?``) and the font to draw it in."""
        needed = set(text)
        best, lacking = self.faces[0], needed
        for face in self.faces:
            missing = {char for char in needed if not face.has(char)}
            if not missing:
                return text, face.font
            if len(missing) < len(lacking):
                best, lacking = face, missing
        return "".join(UNDRAWABLE if char in lacking else char for char in text), best.font


def chain(folders: Sequence[str] = FOLDERS, names: Sequence[str] = NAMES) -> Fonts:
    """Pillow's built-in font, then each of ``names`` found under ``folders`` (the first file of
    each name), at ``SIZE``."""
    found: dict[str, str] = {}
    wanted = set(names)
    for folder in folders:
        for where, _, files in os.walk(os.path.expanduser(folder)):
            for name in wanted.intersection(files).difference(found):
                found[name] = os.path.join(where, name)
    fonts: list[Font] = [ImageFont.load_default()]
    for name in (n for n in names if n in found):
        try:
            fonts.append(ImageFont.truetype(found[name], SIZE))
        except OSError:  # unreadable, or no FreeType: the font is not there to draw with
            continue
    return Fonts(fonts)


@functools.cache
def installed() -> Fonts:
    """The chain of the fonts installed here, found once a process."""
    return chain()


def fitted(text: str) -> tuple[str, Font]:
    """``text`` as drawn and its font, from the fonts installed here (``Fonts.fitted``)."""
    return installed().fitted(text)


def write(
    draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, fill: tuple[int, int, int], width: float, keep_end: bool = False
) -> float:
    """``text`` drawn at ``xy`` in the font that has its glyphs, cut with ``...`` to ``width``
    pixels (``keep_end``: at its start, as a long path keeps its file name); its drawn length."""
    shown, font = fitted(text)
    if draw.textlength(shown, font=font) > width:
        while shown and draw.textlength(_cut(shown, keep_end), font=font) > width:
            shown = shown[1:] if keep_end else shown[:-1]
        shown = _cut(shown, keep_end)
    draw.text(xy, shown, fill=fill, font=font)
    return draw.textlength(shown, font=font)


def length(draw: ImageDraw.ImageDraw, text: str) -> float:
    """How wide ``text`` is drawn, in pixels."""
    shown, font = fitted(text)
    return draw.textlength(shown, font=font)


def _cut(text: str, keep_end: bool) -> str:
    return "..." + text if keep_end else text + "..."
