"""Ctrl-C through a real terminal, SIGTERM, and a real full disk: one line, the shell's exit status,
no process left running, no temp file left, and a resume equal to an uninterrupted build."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import shardkit
from shardkit import demo
from tests.tfread import raw_records

PLAN = ["--records-per-shard", "8", "-w", "2", "--seed", "11"]
SHARDS = 25  # 160 train and 40 val entries, 8 per shard
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "TF_CPP_MIN_LOG_LEVEL": "3"}


def build_in_process(data: Path, out: Path, **options: object) -> shardkit.BuildResult:
    return shardkit.build([data], out, config=str(data / "config.yaml"), records_per_shard=8, workers=2, seed=11, progress=False,
                          **options)  # type: ignore[arg-type]  # fmt: skip


def build_command(data: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "shardkit.cli", "build", str(data), "-o", str(out), "-c", str(data / "config.yaml"), *PLAN, *extra]


def shard_records(out: Path) -> int:
    folder = out / ".shardkit" / "shards"
    return len(list(folder.glob("*.json"))) if folder.exists() else 0


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int], grace: float = 5) -> set[int]:
    """Those of ``pids`` still running after ``grace`` seconds (multiprocessing's resource tracker
    ends when it reads its parent's end of the pipe, a moment after the parent)."""
    deadline = time.monotonic() + grace
    while True:
        running = set()
        for pid in pids:
            with contextlib.suppress(OSError):
                if (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    running.add(pid)
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def wait_until(ready: Callable[[], bool], still_running: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert still_running(), f"it ended before {what}"
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.01)


def interrupt_in_terminal(argv: list[str], cwd: Path, ready: Callable[[int], bool]) -> tuple[int, str, set[int]]:
    """Run ``argv`` on a real pseudo-terminal, type Ctrl-C once ``ready(pid)``; (exit status, screen, its processes then)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty, in the foreground
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, ENV)
        finally:
            os._exit(127)
    screen = bytearray()

    def drain(wait: float) -> bool:
        """Read what is there; False once the terminal is closed (the program ended)."""
        while select.select([fd], [], [], wait)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: no process holds the terminal any more
                return False
            if not chunk:
                return False
            screen.extend(chunk)
            wait = 0
        return True

    try:
        deadline = time.monotonic() + 120
        while not ready(pid):
            assert drain(0.01), f"it ended before the interrupt point:\n{screen.decode(errors='replace')}"
            assert time.monotonic() < deadline, "the interrupt point never came"
        processes = descendants(pid)
        os.write(fd, b"\x03")  # the terminal sends SIGINT to the whole foreground process group
        deadline = time.monotonic() + 60
        while drain(0.1):
            assert time.monotonic() < deadline, f"still running 60 s after Ctrl-C:\n{screen.decode(errors='replace')}"
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return os.waitstatus_to_exitcode(status), screen.decode(errors="replace").replace("\r\n", "\n"), processes


def interrupted_line(output: str) -> str:
    shown = output.replace("^C", "")  # the terminal echoes the keystroke
    lines = [line.strip() for line in re.split(r"[\r\n]", shown) if line.strip().startswith("interrupted")]
    assert len(lines) == 1, output
    return lines[0]


def kept_line(out: Path) -> str:
    return rf"interrupted: (\d+) of {SHARDS} shards finished and kept in {re.escape(str(out))}; run the same command to resume"


def assert_resumes_to_the_reference(augmented: Path, out: Path, augmented_reference: Path) -> None:
    assert not list(out.glob(".*incomplete*"))
    result = build_in_process(augmented, out)
    assert result.shards_built + result.shards_reused == SHARDS
    for split in ("train", "val"):
        assert raw_records(str(out), split) == raw_records(str(augmented_reference), split)
    assert shardkit.verify([str(out)]).ok


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_the_build_with_one_line(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, screen, processes = interrupt_in_terminal(build_command(augmented, out), tmp_path, lambda pid: shard_records(out) >= 3)
    assert code == 130, screen
    assert "Traceback" not in screen and "Aborted" not in screen
    kept = re.fullmatch(kept_line(out), interrupted_line(screen))
    assert kept, screen
    assert len(processes) >= 2 and not alive(processes)  # the pool's workers were running, and are gone
    assert int(kept.group(1)) == shard_records(out) >= 3
    assert_resumes_to_the_reference(augmented, out, augmented_reference)


@pytest.mark.slow
def test_sigterm_stops_the_build_with_one_line(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(build_command(augmented, out), env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    wait_until(lambda: shard_records(out) >= 3, lambda: proc.poll() is None, "3 shards were committed")
    processes = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)  # to the shardkit process only, as docker stop, timeout or kill do
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert stdout == "" and "Traceback" not in stderr
    assert re.fullmatch(kept_line(out), stderr.strip().splitlines()[-1]), stderr
    assert len(processes) >= 2 and not alive(processes)
    assert_resumes_to_the_reference(augmented, out, augmented_reference)


@pytest.mark.slow
def test_sigterm_to_a_batch_node(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    node0 = subprocess.Popen(build_command(augmented, out, "--num-nodes", "2", "--node-index", "0"), env=ENV, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_until(lambda: shard_records(out) >= 2, lambda: node0.poll() is None, "2 shards were committed")
    node0.send_signal(signal.SIGTERM)
    _, stderr = node0.communicate(timeout=60)
    assert node0.returncode == 143 and "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"interrupted: node 0 of 2: \d+ of 13 shards finished and kept in .*; run the same command to resume", line), line
    for node in ("0", "1"):  # the rerun resumes node 0's share; node 1 finds everything committed and writes the manifest
        done = subprocess.run(build_command(augmented, out, "--num-nodes", "2", "--node-index", node, "-q"), env=ENV, capture_output=True)
        assert done.returncode == 0, done.stderr
    for split in ("train", "val"):
        assert raw_records(str(out), split) == raw_records(str(augmented_reference), split)
    assert not list(out.glob(".*incomplete*"))


PREPROCESS = """\
import tensorflow as tf


def slow(x):  # a costly deterministic step with a small result
    big = tf.image.resize(tf.image.convert_image_dtype(x["image"], tf.float32), (768, 768), method="bicubic")
    return tf.reduce_mean(big, axis=[0, 1])
"""


@pytest.mark.slow
def test_ctrl_c_stops_snapshot_materialize_at_once(augmented_reference: Path, tmp_path: Path) -> None:
    (tmp_path / "prep.py").write_text(PREPROCESS)
    snap = tmp_path / "snap"
    argv = [sys.executable, "-m", "shardkit.cli", "snapshot-materialize", str(augmented_reference), "-o", str(snap),
            "--preprocess", "prep.py:slow"]  # fmt: skip
    started: list[float] = []

    def saving(pid: int) -> bool:
        if list(tmp_path.glob("snap.incomplete-*/*/*.shard")):
            started.append(time.monotonic())
            return True
        return False

    code, screen, processes = interrupt_in_terminal(argv, tmp_path, saving)
    assert time.monotonic() - started[0] < 15  # not the rest of the save: TensorFlow runs in a child that is stopped
    assert code == 130 and "Traceback" not in screen, screen
    assert interrupted_line(screen) == f"interrupted: nothing was published at {snap}; run the same command to start again"
    assert processes and not alive(processes)
    assert not snap.exists() and not list(tmp_path.glob("snap.incomplete-*"))


@pytest.mark.slow
def test_ctrl_c_stops_verify_workers(tmp_path: Path) -> None:
    # Big pictures, each decoded by --deep: seconds of work for two worker processes.
    data = demo.make_segmentation(tmp_path / "data", train=1, val=0, width=1600, height=1200)
    (data / "train.txt").write_text("images/train_00000.jpg 0\n" * 240)
    shardkit.build([data / "train.txt"], tmp_path / "out", records_per_shard=30, workers=2, progress=False)
    argv = [sys.executable, "-m", "shardkit.cli", "verify", str(tmp_path / "out"), "--deep", "-w", "2"]
    code, screen, processes = interrupt_in_terminal(argv, tmp_path, lambda pid: len(descendants(pid)) >= 2)
    assert code == 130 and "Traceback" not in screen, screen
    assert interrupted_line(screen) == "interrupted: verify stopped before it checked all 8 files; it changes nothing"
    assert len(processes) >= 2 and not alive(processes)


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size``, mounted for the test (root only: CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_resume_completes(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "2m") as disk:
        out = disk / "out"
        done = subprocess.run(build_command(augmented, out), env=ENV, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        warning, error = done.stderr.strip().splitlines()
        assert re.fullmatch(rf"Warning: {re.escape(str(out))}: the shards still to build need about .* MB and its disk has .* free; "
                            r"the build may run out of space \(finished shards are kept: free space and rerun to resume\)", warning)
        assert re.fullmatch(rf"Error: no space left on device writing {re.escape(str(out))}/\S+: (\d+) of {SHARDS} shards finished and "
                            "kept; free space and rerun the same command to resume", error), error  # fmt: skip
        assert not list(out.glob(".*incomplete*"))
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        assert_resumes_to_the_reference(augmented, out, augmented_reference)


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(augmented: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(shardkit.errors.OutputError, match=r"a-file: is a file, not a folder; give -o a folder"):
        build_in_process(augmented, a_file)
    with pytest.raises(shardkit.errors.OutputError, match=r"a-file/out: cannot create the output folder \(.*a-file is a file\)"):
        build_in_process(augmented, a_file / "out")
    with small_disk(tmp_path / "ro", "1m") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(shardkit.errors.OutputError, match=r"ro/out: cannot create the output folder in .*ro \(read-only file system\)"):
            build_in_process(augmented, disk / "out")
        with pytest.raises(shardkit.errors.OutputError, match=r"ro: cannot write into the output folder \(read-only file system\)"):
            build_in_process(augmented, disk)
    denied = tmp_path / "denied"
    denied.mkdir(mode=0o555)
    # Root may write anywhere; without the capability that allows it, root meets permissions like anyone.
    done = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search",
                           *build_command(augmented, denied)], env=ENV, capture_output=True, text=True)  # fmt: skip
    if "setpriv" in done.stderr and done.returncode != 1:
        pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
    assert (done.returncode, done.stderr) == (
        1, f"Error: {denied}: cannot write into the output folder (permission denied); choose another -o, or make it writable\n"
    )  # fmt: skip
