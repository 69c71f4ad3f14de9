"""The CLI is a thin layer: exit codes and the exact error lines users see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from shardkit.cli import main
from tests import detection_sets


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_every_command_has_help() -> None:
    code, output = run("--help")
    assert code == 0 and "Turn image datasets into TFRecord shards" in output
    assert isinstance(main, click.Group)
    for name, command in main.commands.items():
        assert command.help, f"{name} has no help text"
        code, output = run(name, "--help")
        assert code == 0 and "Usage: main " + name in output


def test_build_prints_a_summary(seg_data: Path, tmp_path: Path) -> None:
    code, output = run("build", str(seg_data), "-o", str(tmp_path / "out"), "-w", "1")
    assert code == 0, output
    assert "built 2 shards in" in output and "train 24 records in 1 shard, val 8 records in 1 shard" in output
    code, output = run("build", str(seg_data), "-o", str(tmp_path / "out"), "-w", "1")
    assert "built 0 shards, 2 kept from an earlier run" in output
    code, output = run("build", str(seg_data), "-o", str(tmp_path / "quiet"), "-w", "1", "-q")
    assert code == 0 and output == ""


def test_build_errors_are_one_clear_line(seg_copy: Path, tmp_path: Path) -> None:
    _, (image, _) = next((n, line.split()) for n, line in enumerate((seg_copy / "val.txt").read_text().splitlines(), 1) if n == 3)
    (seg_copy / image).unlink()
    code, output = run("build", str(seg_copy / "val.txt"), "-o", str(tmp_path / "out"), "-w", "1")
    assert code == 1
    assert output == f"Error: {seg_copy / 'val.txt'}:3: image: {seg_copy / image}: file not found\n"
    code, output = run("build", str(seg_copy / "val.txt"), "-o", str(tmp_path / "out"), "-w", "1", "--on-error", "skip")
    assert code == 0 and "skipped 1 bad entry: see" in output


def test_config_error_line(seg_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("features:\n  image: {kind: picture}\n")
    code, output = run("build", str(seg_data), "-o", str(tmp_path / "out"), "-c", str(config))
    assert code == 1
    assert (
        output == f"Error: {config}: features.image.kind: unknown feature kind 'picture' "
        "(known: image, mask, int64, float, bytes, string, class_name, class_id, encoded_image, objects)\n"
    )
    assert not (tmp_path / "out").exists()  # config mistakes fail before any work


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "x.txt"], "Missing option '-o' / '--out'"),
        (["build", "x.txt", "-o", "o", "--workers", "0"], "Invalid value for '-w' / '--workers'"),
        (["build", "x.txt", "-o", "o", "--compression", "zstd"], "Invalid value for '--compression'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    code, output = run(*args)
    assert code == 2 and message in output


def test_input_errors(tmp_path: Path) -> None:
    code, output = run("build", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "out"))
    assert (code, output) == (1, f"Error: {tmp_path / 'nope.txt'}: no such file or folder\n")
    code, output = run("build", "-o", str(tmp_path / "out"))
    assert (code, output) == (1, "Error: give index files or folders, or --from-folder ROOT, but not both\n")


def _bad_detection_input(kind: str, root: Path) -> tuple[Path, str, str]:
    """A detection input as its tool writes it, with one bad image; the error line a build prints,
    and what a build skipping bad entries says of them."""
    if kind == "voc":
        voc = detection_sets.write_voc(root)
        xml = voc / "Annotations" / "2008_000019.xml"
        xml.write_text(xml.read_text().replace("\t</object>", "\t</objet>"))
        line = f"{voc / 'ImageSets' / 'Main' / 'train.txt'}:2: {xml}:27:4: not valid XML: mismatched tag"
        return voc, line, "skipped 2 bad entries"  # in train and in trainval
    if kind == "yolo":
        data = detection_sets.write_yolo(root)
        labels = root / "labels" / "train" / "b.txt"
        labels.write_text("1 0.5 0.5 0.2\n")
        return data, f"{labels}:1: 4 values: expected class cx cy w h, or class and a polygon x1 y1 x2 y2 ...", "skipped 1 bad entry"
    csv = detection_sets.write_od_csv(root)
    csv.write_text(csv.read_text().replace("raccoon-3.jpg,40,40,raccoon,2", "raccoon-3.jpg,40,40,raccoon,two"))
    return csv, f"{csv}:6: xmin 'two' is not a number", "skipped 1 bad entry"


@pytest.mark.parametrize("kind", ["voc", "yolo", "od-csv"])
def test_a_bad_detection_input_is_one_line(kind: str, tmp_path: Path) -> None:
    given, line, skipped = _bad_detection_input(kind, tmp_path / "data")
    code, output = run("build", str(given), "-o", str(tmp_path / "out"), "-w", "1")
    assert (code, output) == (1, f"Error: {line}\n")
    code, output = run("build", str(given), "-o", str(tmp_path / "out"), "-w", "1", "--on-error", "skip")
    assert code == 0 and f"{skipped}: see" in output, output


def test_an_out_that_is_a_file_is_one_line(seg_data: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("kept")
    code, output = run("build", str(seg_data), "-o", str(tmp_path / "a-file"))
    assert (code, output) == (1, f"Error: {tmp_path / 'a-file'}: is a file, not a folder; give -o a folder (it is created if missing)\n")
    assert (tmp_path / "a-file").read_text() == "kept"


def test_no_tensorflow_for_help_or_a_whole_build(seg_data: Path, tmp_path: Path) -> None:
    """TensorFlow costs seconds and hundreds of MB per process: the CLI and build never load it."""
    script = (
        "import sys\n"
        "from shardkit.cli import main\n"
        "try:\n"
        "    main(['build', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'tensorflow' not in sys.modules, 'help imported tensorflow'\n"
        "import shardkit\n"
        f"shardkit.build([{str(seg_data)!r}], {str(tmp_path / 'out')!r}, workers=1, progress=False)\n"
        "assert 'tensorflow' not in sys.modules, 'build imported tensorflow'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_debug_shows_the_traceback_behind_an_error(tmp_path: Path) -> None:
    args = ["build", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "out")]
    quiet = subprocess.run([sys.executable, "-m", "shardkit.cli", *args], capture_output=True, text=True)
    assert (quiet.returncode, quiet.stderr) == (1, f"Error: {tmp_path / 'nope.txt'}: no such file or folder\n")
    for debug, env in ((["--debug"], {}), ([], {"SHARDKIT_DEBUG": "1"})):
        loud = subprocess.run([sys.executable, "-m", "shardkit.cli", *debug, *args], capture_output=True, text=True,
                              env={**os.environ, **env})  # fmt: skip
        assert loud.returncode == 1 and "Traceback (most recent call last)" in loud.stderr
        assert loud.stderr.strip().endswith(f"shardkit.errors.ShardkitError: {tmp_path / 'nope.txt'}: no such file or folder")
