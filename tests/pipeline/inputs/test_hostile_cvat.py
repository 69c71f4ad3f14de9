"""Hostile CVAT XML, made the way an attacker or a careless edit makes it, built by the real
``shardkit`` command under a memory limit (``tests/hostile.py``): each ends in one ``Error:`` line
naming the file and where, exit 1, with no input byte changed; a good export's build prints what
it left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardkit.pipeline.inputs.formats.detection import cvat
from tests.hostile import refused_build, run_cli
from tests.labelling_tools import CvatImage, Shape, write_cvat

pytestmark = pytest.mark.slow  # each case runs the shardkit command (a few seconds each)

LABELS = [("car", "rectangle", []), ("person", "any", [])]


@pytest.fixture()
def export(tmp_path: Path) -> Path:
    images = [
        CvatImage("a.jpg", 32, 24, [Shape("box", "car", (1.0, 2.0, 20.0, 22.0)), Shape("polyline", "car", (1.0, 1.0, 5.0, 5.0))]),
        CvatImage("b.jpg", 32, 24, [Shape("tag", "person")]),
    ]
    return write_cvat(tmp_path / "task", images, LABELS)


def _refused(xml: Path, tmp_path: Path) -> str:
    return refused_build(xml, xml.parent, tmp_path)


def test_a_good_export_builds_and_says_what_it_left_out(export: Path, tmp_path: Path) -> None:
    done = run_cli(["build", export.parent, "-o", tmp_path / "out", "-w", "1"], tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "left out 2 annotations as no object to train on (polyline 1, tag 1): counted under image/object/left_out" in said


def test_xml_cut_short_is_one_line_with_its_line_and_column(export: Path, tmp_path: Path) -> None:
    text = export.read_text()
    export.write_text(text[: text.index("</image>") + 3])
    line = len(export.read_text().splitlines())
    assert _refused(export, tmp_path).startswith(f"Error: {export}:{line}:")
    assert "not valid XML" in _refused(export, tmp_path)


def test_entity_expansion_is_refused_before_it_grows(export: Path, tmp_path: Path) -> None:
    lol = "".join(f'  <!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, 10))
    bomb = f'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE annotations [\n  <!ENTITY lol0 "lol">\n{lol}]>\n'
    export.write_text(bomb + export.read_text().split("\n", 1)[1].replace('name="a.jpg"', 'name="&lol9;.jpg"'))
    assert _refused(export, tmp_path) == (
        f"Error: {export}:3: declares the XML entity 'lol0': refused "
        "(a CVAT export declares none; entities can expand a small file into gigabytes)"
    )


def test_an_external_entity_is_refused(export: Path, tmp_path: Path) -> None:
    head = '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE annotations [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
    export.write_text(head + export.read_text().split("\n", 1)[1].replace('name="a.jpg"', 'name="&secret;"'))
    assert _refused(export, tmp_path).startswith(f"Error: {export}:2: declares the XML entity 'secret': refused")


def test_a_huge_attribute_is_refused_in_bounded_memory(export: Path, tmp_path: Path) -> None:
    points = ";".join(["1.00,2.00"] * ((cvat.TOKEN_BYTES + (8 << 20)) // 10))  # one polygon of 24 MiB
    text = export.read_text()
    export.write_text(
        text.replace('<tag label="person"', f'<polygon label="car" occluded="0" points="{points}" z_order="0"/>\n    <tag label="person"')
    )
    line = next(n for n, t in enumerate(export.read_text().splitlines(), start=1) if "<polygon" in t)
    assert _refused(export, tmp_path) == (
        f"Error: {export}:{line}: no element starts or ends in 16 MiB (an attribute or a text that long is no annotation's): refused"
    )


def test_an_image_name_leading_out_of_the_export_is_refused(export: Path, tmp_path: Path) -> None:
    export.write_text(export.read_text().replace('name="a.jpg"', 'name="../../../../../../etc/passwd"'))
    line = _refused(export, tmp_path)
    assert line.startswith(f"Error: {export}:") and "/etc/passwd is outside the dataset's root" in line
    assert "--allow-outside-root" in line
