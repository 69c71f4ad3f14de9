"""Ctrl-C through a real terminal, SIGTERM, and a real full disk: one line, the shell's exit status,
no process left running, no temp file left, and a resume equal to an uninterrupted build."""

from __future__ import annotations

import contextlib
import dataclasses
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
from tests.leftovers import private_tmpdir, shardkit_names, temp_names
from tests.paths import REPO
from tests.tfread import raw_records

PLAN = ["--records-per-shard", "8", "-w", "2", "--seed", "11"]
SHARDS = 25  # 160 train and 40 val entries, 8 per shard
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


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


@dataclasses.dataclass
class Stopped:
    code: int  # the exit status
    output: str  # what a user saw (stdout and stderr; for Ctrl-C, the terminal's screen)
    processes: set[int]  # the command's processes when the signal was sent
    seconds: float  # from the signal to the command's exit


def interrupt(argv: list[str], cwd: Path, ready: Callable[[int], bool], how: str, env: dict[str, str] | None = None) -> Stopped:
    """Run ``argv`` and, once ``ready(pid)``, stop it: ``ctrl-c`` types Ctrl-C into a real
    pseudo-terminal (SIGINT to the whole foreground process group), ``ctrl-c twice`` types it
    twice, 50 ms apart, and ``sigterm`` signals the command's own process, as docker stop does.
    ``env``: more environment for the command."""
    env = {**ENV, **(env or {})}
    if how == "sigterm":
        proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)  # fmt: skip
        wait_until(lambda: ready(proc.pid), lambda: proc.poll() is None, "the interrupt point")
        processes = descendants(proc.pid)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        return Stopped(proc.returncode, output, processes, time.monotonic() - sent)
    return _interrupt_in_terminal(argv, cwd, ready, env, presses=2 if how == "ctrl-c twice" else 1)


def wait_until(ready: Callable[[], bool], still_running: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert still_running(), f"it ended before {what}"
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.01)


def _interrupt_in_terminal(argv: list[str], cwd: Path, ready: Callable[[int], bool], env: dict[str, str], presses: int) -> Stopped:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty, in the foreground
        try:
            os.chdir(cwd)
            # As a terminal starts a program: a test run started in the background (`pytest &`
            # from a script) inherits Ctrl-C ignored, and an exec keeps it ignored.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.execve(argv[0], argv, env)
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
        sent = time.monotonic()
        for press in range(presses):
            if press:
                time.sleep(0.05)
            os.write(fd, b"\x03")  # the terminal sends SIGINT to the whole foreground process group
        deadline = time.monotonic() + 60
        while drain(0.05):
            assert time.monotonic() < deadline, f"still running 60 s after Ctrl-C:\n{screen.decode(errors='replace')}"
        _, status = os.waitpid(pid, 0)
        seconds = time.monotonic() - sent
    finally:
        os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return Stopped(os.waitstatus_to_exitcode(status), screen.decode(errors="replace").replace("\r\n", "\n"), processes, seconds)


def assert_stopped_cleanly(stopped: Stopped, code: int) -> str:
    """The shell's exit status, no traceback, no process left; returns the one 'interrupted' line."""
    assert stopped.code == code, stopped.output
    assert "Traceback" not in stopped.output and "Aborted" not in stopped.output, stopped.output
    assert not alive(stopped.processes)
    shown = stopped.output.replace("^C", "")  # the terminal echoes the keystroke
    lines = [line.strip() for line in re.split(r"[\r\n]", shown) if line.strip().startswith("interrupted")]
    assert len(lines) == 1, stopped.output
    return lines[0]


def kept_line(out: Path, shards: int = SHARDS, node: str = "") -> str:
    return rf"interrupted: {node}(\d+) of {shards} shards finished and kept in {re.escape(str(out))}; run the same command to resume"


def assert_resumes_to_the_reference(augmented: Path, out: Path, augmented_reference: Path) -> None:
    assert not temp_names(out)
    result = build_in_process(augmented, out)
    assert result.shards_built + result.shards_reused == SHARDS
    for split in ("train", "val"):
        assert raw_records(str(out), split) == raw_records(str(augmented_reference), split)
    assert shardkit.verify([str(out)]).ok
    assert not temp_names(out)


# A shard's record as a pool worker stopped inside its atomic write leaves it (storage.atomic's
# temp name): planted while the build runs, so that the stop always meets one, not one run in two.
MID_WRITE = ".train-00002-of-00020.tfrecord.json.incomplete-0badc0de"


SIGNALLED = {"ctrl-c": 130, "ctrl-c twice": 130, "sigterm": 143}


@pytest.mark.slow
@pytest.mark.parametrize(("how", "workers"), [("ctrl-c", "2"), ("ctrl-c", "1"), ("ctrl-c twice", "2"), ("sigterm", "2")])
def test_an_interrupted_build_says_what_it_kept(augmented: Path, augmented_reference: Path, tmp_path: Path, how: str, workers: str) -> None:
    out = tmp_path / "out"

    def ready(pid: int) -> bool:
        if shard_records(out) < 3:
            return False
        (out / ".shardkit" / "shards" / MID_WRITE).write_text('{"name": "train-00002-of')
        return True

    tmpdir = tmp_path / "tmpdir"
    stopped = interrupt(build_command(augmented, out, "-w", workers), tmp_path, ready, how, private_tmpdir(tmpdir))
    kept = re.fullmatch(kept_line(out), assert_stopped_cleanly(stopped, SIGNALLED[how]))
    assert kept, stopped.output
    assert not temp_names(out) and not shardkit_names(tmpdir)  # at the exit: the workers were gone before the sweep
    assert int(kept.group(1)) == shard_records(out) >= 3
    if workers == "2":
        assert len(stopped.processes) >= 2  # the pool's workers were running, and are gone
    assert_resumes_to_the_reference(augmented, out, augmented_reference)


@pytest.mark.slow
def test_sigterm_to_a_batch_node(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = build_command(augmented, out, "--num-nodes", "2", "--node-index", "0")
    stopped = interrupt(command, tmp_path, lambda pid: shard_records(out) >= 2, "sigterm")
    assert re.fullmatch(kept_line(out, 13, "node 0 of 2: "), assert_stopped_cleanly(stopped, 143)), stopped.output
    for node in ("0", "1"):  # the rerun resumes node 0's share; node 1 finds everything committed and writes the manifest
        done = subprocess.run(build_command(augmented, out, "--num-nodes", "2", "--node-index", node, "-q"), env=ENV, capture_output=True)
        assert done.returncode == 0, done.stderr
    for split in ("train", "val"):
        assert raw_records(str(out), split) == raw_records(str(augmented_reference), split)
    assert not temp_names(out)


PREPROCESS = """\
import time

import tensorflow as tf


def slow(x):  # a costly deterministic step (a quarter of a second per record) with a small result
    done = tf.py_function(lambda: time.sleep(0.25) or 0, [], tf.int32)
    with tf.control_dependencies([done]):
        return tf.reduce_mean(tf.cast(x["image"], tf.float32))
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_snapshot_materialize_stops_at_once(augmented_reference: Path, tmp_path: Path, how: str) -> None:
    """Before, TensorFlow's save saw Ctrl-C only at its end: here, minutes of saving away."""
    (tmp_path / "prep.py").write_text(PREPROCESS)
    snap = tmp_path / "snap"
    argv = [sys.executable, "-m", "shardkit.cli", "snapshot-materialize", str(augmented_reference), "-o", str(snap),
            "--preprocess", "prep.py:slow"]  # fmt: skip
    stopped = interrupt(argv, tmp_path, lambda pid: bool(list(tmp_path.glob("snap.incomplete-*/*/*.shard"))), how)
    line = assert_stopped_cleanly(stopped, SIGNALLED[how])
    assert line == f"interrupted: nothing was published at {snap}; run the same command to start again"
    assert stopped.processes and stopped.seconds < 5, stopped.seconds  # the child that saved is gone too
    assert not snap.exists() and not list(tmp_path.glob("snap.incomplete-*"))


@pytest.fixture(scope="module")
def big_pictures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """240 records of a 1600x1200 picture in 8 shards: seconds of --deep decoding for two workers."""
    data = demo.make_segmentation(tmp_path_factory.mktemp("pictures") / "data", train=1, val=0, width=1600, height=1200)
    (data / "train.txt").write_text("images/train_00000.jpg 0\n" * 240)
    out = data.parent / "out"
    shardkit.build([data / "train.txt"], out, records_per_shard=30, workers=2, progress=False)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_verify_workers_stop_with_one_line(big_pictures: Path, tmp_path: Path, how: str) -> None:
    argv = [sys.executable, "-m", "shardkit.cli", "verify", str(big_pictures), "--deep", "-w", "2"]
    stopped = interrupt(argv, tmp_path, lambda pid: len(descendants(pid)) >= 2, how)
    line = assert_stopped_cleanly(stopped, SIGNALLED[how])
    assert line == "interrupted: verify stopped before it checked all 8 files; it changes nothing"
    assert len(stopped.processes) >= 2


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


def test_a_shards_scratch_file_on_a_full_disk_is_discarded_without_a_second_error(tmp_path: Path) -> None:
    """The write that fills the disk is the error to report; closing the scratch file then
    flushes its buffer into the same full disk, and that must not replace it (seen in CI)."""
    from shardkit.pipeline.inputs.entries import Entry
    from shardkit.pipeline.shard.worker import _Spread

    with small_disk(tmp_path / "disk", "256k") as disk:
        spread = _Spread(str(disk / "scratch"), seed=1)
        with pytest.raises(OSError, match="No space left"):
            for line in range(1, 1000):
                spread.add(Entry("index.txt", line, f"index.txt:{line}", ("a.jpg",)), [0], [os.urandom(4000)])
            spread.file.flush()
        spread.close()  # the buffer cannot be flushed: no second error
        assert not (disk / "scratch").exists()


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_resume_completes(augmented: Path, augmented_reference: Path, tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "2m") as disk:
        out = disk / "out"
        done = subprocess.run(build_command(augmented, out), env=ENV, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        warning, error = done.stderr.strip().splitlines()
        assert re.fullmatch(
            rf"Warning: {re.escape(str(out))}: the shards still to build need about .* MB and its disk has .* free; "
            r"the build may run out of space \(finished shards are kept: free space and rerun to resume\)",
            warning,
        )
        assert re.fullmatch(rf"Error: no space left on device writing {re.escape(str(out))}/\S+: (\d+) of {SHARDS} shards finished and "
                            "kept; free space and rerun the same command to resume", error), error  # fmt: skip
        assert not temp_names(out)
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        assert_resumes_to_the_reference(augmented, out, augmented_reference)


def test_a_disk_full_before_the_first_shard_is_one_line_and_leaves_no_lock(augmented: Path, augmented_reference: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """Full from the start: the lock's own text, or the build's state, is the write that fails."""
    with small_disk(tmp_path / "disk", "1m") as disk:
        filler = disk / "filler"
        with open(filler, "wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(shardkit.errors.WriteError, match=rf"^no space left on device writing {re.escape(str(disk / 'out'))}/"):
            build_in_process(augmented, disk / "out")
        filler.unlink()  # then, in the same process as a notebook would: no stale lock of its own in the way
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        assert_resumes_to_the_reference(augmented, disk / "out", augmented_reference)


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
