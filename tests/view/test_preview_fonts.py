"""Captions in any script: a file name is drawn in a font that has its glyphs where one is
installed, and a character no installed font has is drawn as "?", never as an empty box."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from shardkit.view import fonts, sheet

NAME = "café_ñ_日本_0001.jpg"


def _no_glyph(font: ImageFont.FreeTypeFont) -> bytes:
    return bytes(font.getmask("\U0010fffd"))  # glyph 0: what the font draws for a character it lacks


def _draws(font: ImageFont.FreeTypeFont, char: str) -> bool:
    return bytes(font.getmask(char)) != _no_glyph(font)


@pytest.fixture()
def dejavu_only(tmp_path: Path) -> Path:
    """A font folder holding DejaVu Sans alone (the system's, linked), as a machine without CJK fonts has."""
    found = sorted(glob.glob("/usr/share/fonts/**/DejaVuSans.ttf", recursive=True))
    if not found:
        pytest.skip("DejaVu Sans is not installed here")
    folder = tmp_path / "fonts" / "truetype" / "dejavu"
    folder.mkdir(parents=True)
    (folder / "DejaVuSans.ttf").symlink_to(found[0])
    return tmp_path / "fonts"


def test_pillows_own_font_has_no_accented_letters_so_they_were_drawn_as_boxes() -> None:
    default = ImageFont.load_default()
    assert isinstance(default, ImageFont.FreeTypeFont)  # Pillow >= 10.1: Aileron
    assert _draws(default, "a") and not _draws(default, "é") and not _draws(default, "ñ") and not _draws(default, "日")


def test_a_name_with_accents_is_drawn_in_a_font_that_has_them(dejavu_only: Path) -> None:
    chain = fonts.chain([str(dejavu_only)])
    text, font = chain.fitted(NAME)
    assert isinstance(font, ImageFont.FreeTypeFont) and font.getname() == ("DejaVu Sans", "Book")
    assert all(_draws(font, char) for char in "caféñ_0001.jpg")
    assert text == "café_ñ_??_0001.jpg"  # no font here has 日本: each is a visible "?"
    plain, font = chain.fitted("train/chat/plain_0003.jpg")
    assert (plain, font.getname()) == ("train/chat/plain_0003.jpg", ("Aileron", "Regular"))  # ASCII as it always was


def test_with_no_font_installed_every_character_the_built_in_font_lacks_is_a_question_mark(tmp_path: Path) -> None:
    chain = fonts.chain([str(tmp_path / "nothing")])
    assert chain.fitted(NAME)[0] == "caf?_?_??_0001.jpg"
    assert chain.fitted("tab\there")[0] == "tab?here"  # a control character too


def test_a_caption_on_the_sheet_is_the_fitted_text_in_its_font(dejavu_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = fonts.chain([str(dejavu_only)])
    monkeypatch.setattr(fonts, "installed", lambda: chain)
    picture = sheet.render([[sheet.Tile(np.full((100, 150, 3), 200, np.uint8), None, [NAME])]])
    line = (sheet.GAP, sheet.GAP + 100 + 1)
    box = (line[0], line[1], line[0] + 150, line[1] + sheet.LINE)
    text, font = chain.fitted(NAME)
    expected = Image.new("RGB", picture.size, sheet.BACKGROUND)
    ImageDraw.Draw(expected).text(line, text, fill=sheet.INK, font=font)
    np.testing.assert_array_equal(np.asarray(picture.crop(box)), np.asarray(expected.crop(box)))
    tofu = Image.new("RGB", picture.size, sheet.BACKGROUND)  # what Pillow's own font drew before
    ImageDraw.Draw(tofu).text(line, NAME, fill=sheet.INK, font=ImageFont.load_default())
    assert not np.array_equal(np.asarray(picture.crop(box)), np.asarray(tofu.crop(box)))
    assert np.asarray(picture.crop(box)).min() < 100  # something is drawn
