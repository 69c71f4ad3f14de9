"""Hostile COCO files, made the way an attacker or a careless tool makes them, built by the real
``shardkit`` command under a memory limit (``tests/hostile.py``): each ends in exit 0 with the
right records, or one ``Error:`` line naming the file and where, exit 1; no input byte changes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shardkit.pipeline.inputs.formats import bounded_json
from tests.detection_sets import write_coco
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # each case runs the shardkit command (a few seconds each)

REPO = Path(__file__).resolve().parents[3]
MASKS = str(REPO / "configs" / "coco-instance-masks.yaml")


@pytest.fixture()
def coco(tmp_path: Path) -> Path:
    return write_coco(tmp_path / "set")


def edited(path: Path, change: Any) -> Path:
    """``path`` rewritten with ``change`` applied to its document (which it may return replaced)."""
    document = json.loads(path.read_text())
    path.write_text(json.dumps(change(document) or document))
    return path


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def with_member(path: Path, where: str, raw: str) -> Path:
    """``path`` with the JSON text ``raw`` as a member ``extra`` of the first annotation, or as the
    last item of ``categories`` (``where``): written as text, as json.dumps cannot nest so deep."""
    document = json.loads(path.read_text())
    marker = '"__raw__"'
    if where == "annotation":
        document["annotations"][0]["extra"] = "__raw__"
    else:
        document["categories"].append("__raw__")
    path.write_text(json.dumps(document).replace(marker, raw, 1))
    return path


def build(coco: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["build", str(coco), "-o", str(out), "-q", *args], cwd=coco.parent)


@pytest.mark.parametrize(
    ("where", "depth"),
    [("annotation", 20_000), ("annotation", 100_000), ("categories", 2_000), ("annotation", bounded_json.MAX_DEPTH - 2)],
)
def test_nesting_past_the_limit_is_one_line_at_its_place(where: str, depth: int, coco: Path, tmp_path: Path) -> None:
    with_member(coco, where, nested(depth))
    before = digests(coco.parent.parent)
    text = coco.read_text()
    outer = 3 if where == "annotation" else 2  # the document, annotations (or categories), an annotation
    column = text.index("[" * 50) + bounded_json.MAX_DEPTH + 1 - outer  # 1-based: the bracket one level too deep
    for args in ([], ["--on-error", "skip", "-w", "2"]):
        line = one_line_error(build(coco, tmp_path / "out", *args))
        assert line == f"Error: {coco}:1:{column}: {bounded_json.too_deep()}"
    assert digests(coco.parent.parent) == before


def test_nesting_up_to_the_limit_builds(coco: Path, tmp_path: Path) -> None:
    with_member(coco, "annotation", nested(bounded_json.MAX_DEPTH - 3))  # inside the document, annotations, an annotation
    result = build(coco, tmp_path / "out")
    assert result.returncode == 0, result.stderr


def test_a_string_past_the_limit_is_refused_without_reading_it_all(coco: Path, tmp_path: Path) -> None:
    document = json.loads(coco.read_text())
    document["annotations"][0]["note"] = "__long__"
    text = json.dumps(document)
    column = text.index('"__long__"') + 1
    coco.write_text(text.replace("__long__", "n" * (bounded_json.MAX_STRING + 1)))
    started = time.monotonic()
    line = one_line_error(build(coco, tmp_path / "out"))
    assert line == f"Error: {coco}:1:{column}: {bounded_json.too_long()}"
    assert time.monotonic() - started < 30


def test_a_long_file_name_is_cut_in_the_error_line_and_in_errors_jsonl(coco: Path, tmp_path: Path) -> None:
    long_name = "a" * 5_000_000

    def rename(document: dict[str, Any]) -> None:
        document["images"][0]["file_name"] = long_name

    edited(coco, rename)
    line = one_line_error(build(coco, tmp_path / "out"))
    assert len(line) < 1000 and "aaaa… (5,000,0" in line and line.count("characters)") == 1, line[:2000]
    assert line.endswith(": cannot read: File name too long"), line[-200:]
    result = build(coco, tmp_path / "skipped", "--on-error", "skip")
    assert result.returncode == 0, result.stderr[-2000:]
    listed = (tmp_path / "skipped" / "errors.jsonl").read_text()
    assert len(listed) < 1000 and listed.count("characters)") == 1, listed[:2000]


@pytest.mark.parametrize("position", [0, -1])  # in the planner's sample of file sizes, and past it (read by a worker)
def test_a_file_name_holding_a_nul_byte_is_an_entry_error(position: int, coco: Path, tmp_path: Path) -> None:
    """``os`` refuses a path with a NUL byte by a ValueError: a traceback, where it is a bad entry."""

    def rename(document: dict[str, Any]) -> None:
        document["images"][position]["file_name"] = "a\u0000b.jpg"

    edited(coco, rename)
    line = one_line_error(build(coco, tmp_path / "out"))
    assert line.endswith("'a\\x00b.jpg' is not a file path (it holds a NUL byte)"), line
    result = build(coco, tmp_path / "skipped", "--on-error", "skip")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "NUL byte" in (tmp_path / "skipped" / "errors.jsonl").read_text()


def test_a_fifo_named_like_an_image_is_an_entry_error_not_a_wait(coco: Path, tmp_path: Path) -> None:
    """An archive can carry a FIFO: opened for reading, it waits for a writer that never comes."""
    name = json.loads(coco.read_text())["images"][1]["file_name"]
    image = coco.parent.parent / "val2017" / name
    image.unlink()
    os.mkfifo(image)
    line = one_line_error(build(coco, tmp_path / "out"))
    assert f"{image}: not an image" in line, line


def test_a_utf8_bom_builds_as_json_load_with_utf8_sig_reads_it(coco: Path, tmp_path: Path) -> None:
    plain = build(coco, tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    coco.write_bytes(b"\xef\xbb\xbf" + coco.read_bytes())
    result = build(coco, tmp_path / "bom")
    assert result.returncode == 0, result.stderr
    for shard in sorted((tmp_path / "plain").glob("*.tfrecord")):
        assert (tmp_path / "bom" / shard.name).read_bytes() == shard.read_bytes()


def test_a_bom_file_cut_short_names_the_line_and_column_json_load_gives(coco: Path, tmp_path: Path) -> None:
    text = coco.read_text()
    coco.write_bytes(b"\xef\xbb\xbf" + text[:-40].encode())
    line = one_line_error(build(coco, tmp_path / "out"))
    assert line == f"Error: {coco}:1:{len(text) - 39}: not valid JSON: it ends before its last value does (cut short?)"


def test_a_top_level_array_says_so(coco: Path, tmp_path: Path) -> None:
    edited(coco, lambda document: [document])
    line = one_line_error(build(coco, tmp_path / "out"))
    assert line == f"Error: {coco}: not a COCO file: expected an object at the top level, got an array"


def open_in(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` holds a file open in ``folder`` (one without a name too)."""
    for fd in os.listdir(f"/proc/{pid}/fd") if os.path.isdir(f"/proc/{pid}/fd") else []:
        with contextlib.suppress(OSError):  # closed meanwhile
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(f"{folder}/"):
                return True
    return False


def test_kill_9_while_a_coco_file_is_planned_leaves_nothing_and_the_resume_builds(coco: Path, tmp_path: Path) -> None:
    def crowded(document: dict[str, Any]) -> None:  # 7 MB of annotations: planning takes a second or more
        boxes = [{"id": 10_000 + n, "image_id": 100 + n % 6, "category_id": 3, "bbox": [1, 2, 3, 4], "area": 12.0, "iscrowd": 0}
                 for n in range(90_000)]  # fmt: skip
        document["annotations"] += boxes

    edited(coco, crowded)
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = [sys.executable, "-m", "shardkit.cli", "build", str(coco), "-o", str(tmp_path / "out"), "-q", "-w", "1"]
    child = subprocess.Popen(args, env={**os.environ, "TMPDIR": str(temp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (open_in(child.pid, temp) or os.listdir(temp)) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert child.poll() is None, "the build ended before it spooled the annotations"
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    assert not os.listdir(temp)
    resumed = run_cli(args[3:], cwd=tmp_path, env={"TMPDIR": str(temp)}, timeout=300, limit=3 << 30)  # 15,000 boxes a record
    assert resumed.returncode == 0, resumed.stderr
    assert not os.listdir(temp)
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["splits"]["val"]["records"] == 6


# -- what pycocotools is handed: checked first, so a crash becomes an entry error ----------------


def first_polygon(document: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in document["annotations"] if isinstance(a.get("segmentation"), list))


def first_rle(document: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in document["annotations"] if isinstance(a.get("segmentation"), dict))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: first_polygon(d)["segmentation"][0].__setitem__(0, 1e8), "polygon coordinate 1e+08 is far outside the {size} image"),
        (lambda d: first_polygon(d)["segmentation"][0].__setitem__(1, -1e12), "polygon coordinate -1e+12 is far outside the {size} image"),
        (lambda d: first_polygon(d)["segmentation"].append([0.0, 0.0, 60.0, 40.0] * 10_000), "its polygons' outline is"),
        (lambda d: first_rle(d)["segmentation"].update(size=[1_000_000, 1_000_000]), "its RLE is 1000000x1000000, the image {size}"),
        (lambda d: first_rle(d)["segmentation"]["counts"].append(10**9), "its RLE counts add up to"),
        (lambda d: first_rle(d)["segmentation"].update(counts="0" * 50 + "o" * 11 + "O"), "are not a compressed RLE"),
    ],
)
def test_a_segmentation_pycocotools_would_crash_on_is_an_entry_error(change: Any, reason: str, coco: Path, tmp_path: Path) -> None:
    document = json.loads(coco.read_text())
    change(document)
    coco.write_text(json.dumps(document))
    before = digests(coco.parent.parent)
    line = one_line_error(build(coco, tmp_path / "out", "-c", MASKS, "-w", "1"))
    assert f"{coco}:" in line and ": annotation " in line and reason.split("{size}")[0] in line, line
    skipped = build(coco, tmp_path / "skipped", "-c", MASKS, "-w", "2", "--on-error", "skip")
    assert skipped.returncode == 0, skipped.stderr
    listed = [json.loads(x) for x in (tmp_path / "skipped" / "errors.jsonl").read_text().splitlines()]
    # No line (an image is none of the file's): the image named by its file_name, then the annotation
    assert len(listed) == 1 and listed[0]["line"] == 0 and reason.split("{size}")[0] in listed[0]["reason"]
    assert re.match(r"\d+\.jpg: annotation \d+: ", listed[0]["reason"]), listed[0]
    assert digests(coco.parent.parent) == before


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("x' }\nitem { id: 0 name: 'background", None),  # an item of its own, were the quote and line break written raw
        ('a\\\\"\x00\x1b\x7f', None),
        ("\ud800lone", "is not Unicode text (a lone surrogate escape)"),
    ],
)
def test_a_category_name_cannot_break_or_forge_the_label_map(name: str, refused: str | None, coco: Path, tmp_path: Path) -> None:
    def rename(document: dict[str, Any]) -> None:
        document["categories"][1]["name"] = name

    edited(coco, rename)
    before = digests(coco.parent.parent)
    result = build(coco, tmp_path / "out")
    assert digests(coco.parent.parent) == before
    if refused is not None:
        assert one_line_error(result).endswith(refused)
        return
    assert result.returncode == 0, result.stderr[-2000:]
    from shardkit.formats import label_map

    content = (tmp_path / "out" / "label_map.pbtxt").read_bytes()
    assert label_map.problem(content) is None
    from google.protobuf import text_format

    parsed = label_map._message_class()()
    text_format.Merge(content.decode(), parsed)
    assert [(item.id, item.name) for item in parsed.item] == [(c["id"], c["name"]) for c in json.loads(coco.read_text())["categories"]]
    assert run_cli(["verify", "--deep", str(tmp_path / "out")], cwd=tmp_path).returncode == 0
