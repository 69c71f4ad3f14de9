"""Past one machine: a real Dask scheduler and workers on 127.0.0.1, and N batch nodes as processes."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit import demo
from shardkit.check.verify import verify
from shardkit.errors import EntryError, OutputError
from shardkit.pipeline.executors import malloc
from tests.arread import assert_twins, case, has_array_record, shard_bytes
from tests.leftovers import temp_names
from tests.paths import REPO
from tests.tfread import raw_records

pytest.importorskip("distributed")

CONFIG = """\
features:
  image: {kind: image, column: 0, encoding: jpeg, quality: 90}
  mask: {kind: mask, column: 1}
augment:
  copies: 2
  keep_original: true
  pipeline:
    - {__class_fullname__: HorizontalFlip, p: 0.5}
    - {__class_fullname__: RandomBrightnessContrast, p: 0.9}
"""
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = demo.make_segmentation(tmp_path_factory.mktemp("cluster"), train=120, val=30, width=160, height=120)
    (root / "config.yaml").write_text(CONFIG)
    return root


BUILD = {"records_per_shard": 6, "seed": 5, "progress": False}


@pytest.fixture(scope="module")
def local(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    shardkit.build([data], out, config=str(data / "config.yaml"), workers=2, **BUILD)
    return out


def same_records(a: Path, b: Path) -> None:
    for split in ("train", "val"):
        assert raw_records(str(a), split) == raw_records(str(b), split)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dask_cluster(
    workers: int, nanny: bool = True, worker_env: dict[str, str] | None = None, scheduler_env: dict[str, str] | None = None
) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A real `dask scheduler` and `dask worker` processes on loopback, always torn down.

    With the nanny (as `dask worker` starts by default) each worker is a child of its nanny, in
    the nanny's process group, so killing the group kills both. All start in "/", as real ones
    do: they find shardkit installed (or on PYTHONPATH), not in the folder they start in."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], env=scheduler_env or ENV,
                              cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]  # fmt: skip
    worker_cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                  "--no-dashboard", "--death-timeout", "60", *([] if nanny else ["--no-nanny"])]  # fmt: skip
    try:
        time.sleep(0.5)
        worker_procs = [
            subprocess.Popen(
                worker_cmd, env=worker_env or ENV, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            for _ in range(workers)
        ]
        procs += worker_procs
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address, worker_procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait(timeout=30)


@pytest.mark.slow
def test_dask_build_equals_local_and_survives_a_killed_worker(data: Path, local: Path, tmp_path: Path) -> None:
    from shardkit.executors import DaskExecutor

    with dask_cluster(2) as (address, workers):
        out = tmp_path / "dask"
        result = shardkit.build([data], out, config=str(data / "config.yaml"), executor=DaskExecutor(address), **BUILD)
        assert result.shards_built == 25
        same_records(out, local)
        assert_tasks_reuse_heap(address)
        assert_profiler_paused_while_shards_build(address)
        # After the heap checks: an ArrayRecord writer opened inside the task scope leaves about 16 MiB of
        # the worker's heap in use that malloc_trim cannot give back, and the 1 MiB arrays outside reuse it.
        if has_array_record:  # both containers from the workers: the files of a pool build, byte for byte
            both = {"config": str(data / "config.yaml"), **BUILD, "format": "tfrecord,arrayrecord"}
            shardkit.build([data / "val.txt"], tmp_path / "both-pool", workers=2, **both)
            shardkit.build([data / "val.txt"], tmp_path / "both-dask", executor=DaskExecutor(address), **both)
            assert shard_bytes(str(tmp_path / "both-dask")) == shard_bytes(str(tmp_path / "both-pool"))
            assert_twins(str(tmp_path / "both-dask"), ("val",))

        # Now through the CLI in a subprocess, killing one worker while shards are in flight.
        out2 = tmp_path / "dask-killed"
        cmd = [sys.executable, "-m", "shardkit.cli", "build", str(data), "-o", str(out2), "-c", str(data / "config.yaml"),
               "--records-per-shard", "6", "--seed", "5", "--executor", "dask", "-q"]  # fmt: skip
        build = subprocess.Popen(cmd, env={**ENV, "SHARDKIT_DASK_SCHEDULER": address}, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(list((out2 / ".shardkit" / "shards").glob("*.json")) if (out2 / ".shardkit" / "shards").exists() else []) < 3:
            assert build.poll() is None and time.monotonic() < deadline, "the build ended before the kill"
            time.sleep(0.01)
        os.killpg(workers[0].pid, signal.SIGKILL)
        _, err = build.communicate(timeout=300)
        assert build.returncode == 0, err.decode()
    assert verify([str(out2)]).ok
    same_records(out2, local)


class RecordingTicks:
    """Wraps an executor and keeps every progress tick it reports."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ticks: list[int] = []

    def run(self, tasks: Any, on_progress: Any, on_shard: Any) -> Any:
        def record(n: int) -> None:
            self.ticks.append(n)
            on_progress(n)

        return self.inner.run(tasks, record, on_shard)


@pytest.mark.slow
def test_dask_progress_per_record_and_a_failed_build_leaves_nothing_running(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import Client

    from shardkit.pipeline.executors import dask_executor

    bad = failing_input(data, tmp_path / "data")
    events: list[Any] = []
    event = dask_executor._DaskProgress.event
    monkeypatch.setattr(dask_executor._DaskProgress, "event", lambda self, e: (events.append(e), event(self, e)))
    with dask_cluster(2) as (address, _):
        recording = RecordingTicks(dask_executor.DaskExecutor(address))
        result = shardkit.build([data], tmp_path / "ok", config=str(data / "config.yaml"), executor=recording, **BUILD)
        assert sum(recording.ticks) == result.records_built == 450  # exact, whatever order events came in
        assert events, "no progress event came from the workers: the bar moved only as shards finished"

        with pytest.raises(EntryError, match=r"train_0.txt:7: image: .*nowhere.jpg"):
            shardkit.build([bad], tmp_path / "bad", config=str(data / "config.yaml"), executor=dask_executor.DaskExecutor(address),
                           **{**BUILD, "records_per_shard": 30})  # fmt: skip
        with Client(address, timeout=60) as client:  # the build returned only once its running tasks ended
            running = client.run(lambda: sorted(importlib.import_module("shardkit.pipeline.executors.dask_executor")._dask_running))
        assert not any(running.values()), running
        assert not temp_names(tmp_path / "bad")


def failing_input(data: Path, folder: Path) -> Path:
    """``data``'s train list with a missing image on line 7: shard 0 of 2 fails early, shard 1 runs on."""
    folder.mkdir()
    lines = [
        line if line.startswith("#") else " ".join(str(data / p) for p in line.split())
        for line in (data / "train_0.txt").read_text().splitlines()
    ]
    lines[6] = f"{data / 'nowhere.jpg'} {lines[6].split()[1]}"
    (folder / "train_0.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.slow
def test_a_failed_dask_build_returns_only_once_nothing_of_it_can_write(data: Path, tmp_path: Path) -> None:
    """A shard task that a worker has taken but not yet begun when the build fails (a worker swapped
    out under memory pressure, seen once in CI) ran on after the build had returned, and committed
    its shard into OUT. Here the worker is made that slow to begin the task: the failed build must
    not return while it may still start, and the task must write nothing when it does."""
    from distributed import Client

    def begin_shard_1_late() -> None:  # on each worker, pickled by value: its task function, slowed
        module = importlib.import_module("shardkit.pipeline.executors.dask_executor")
        original = module._run_on_dask

        def late(task: Any, key: str, *args: Any) -> Any:
            if ".00001." in key:
                time.sleep(5)
            return original(task, key, *args)

        module._run_on_dask = late

    bad = failing_input(data, tmp_path / "data")
    out = tmp_path / "bad"
    with dask_cluster(2) as (address, _):
        with Client(address, timeout=60) as client:  # warm, so that shard 0 fails within a second
            client.run(lambda: [importlib.import_module(m) for m in ("albumentations", "cv2", "shardkit.pipeline.shard.augment")])
            client.run(begin_shard_1_late)
        started = time.monotonic()
        with pytest.raises(EntryError, match=r"train_0.txt:7: image: .*nowhere.jpg"):
            shardkit.build([bad], out, config=str(data / "config.yaml"), executor=DaskExecutorFor(address),
                           **{**BUILD, "records_per_shard": 30})  # fmt: skip
        returned = time.monotonic() - started
        written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        time.sleep(8)  # the slowed task has begun and, were it not stopped, finished its 30 entries
        assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == written, f"returned after {returned:.1f} s"
        with Client(address, timeout=60) as client:
            running = client.run(lambda: sorted(importlib.import_module("shardkit.pipeline.executors.dask_executor")._dask_running))
        assert not any(running.values()), running
    assert not [n for n in written if "tfrecord" in n and "lock" not in n], written  # no shard of it, finished or not


@pytest.mark.slow
def test_sigterm_to_a_dask_build_cancels_waits_and_says_what_is_kept(data: Path, local: Path, tmp_path: Path) -> None:
    from distributed import Client

    from shardkit.executors import DaskExecutor

    out = tmp_path / "out"
    with dask_cluster(2) as (address, _):
        command = [sys.executable, "-m", "shardkit.cli", "build", str(data), "-o", str(out), "-c", str(data / "config.yaml"),
                   "--records-per-shard", "6", "--seed", "5", "--executor", "dask", "--scheduler", address]  # fmt: skip
        proc = subprocess.Popen(command, env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        records = out / ".shardkit" / "shards"
        deadline = time.monotonic() + 120
        while len(list(records.glob("*.json"))) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 143 and "Traceback" not in stderr, stderr
        kept = re.fullmatch(rf"interrupted: (\d+) of 25 shards finished and kept in {re.escape(str(out))}; run the same command to resume",
                            stderr.strip().splitlines()[-1])  # fmt: skip
        assert kept and int(kept.group(1)) == len(list(records.glob("*.json"))), stderr
        with Client(address, timeout=60) as client:  # the cancelled build returned only once its running tasks ended
            running = client.run(lambda: sorted(importlib.import_module("shardkit.pipeline.executors.dask_executor")._dask_running))
        assert not any(running.values()), running
        assert not temp_names(out)
        shardkit.build([data], out, config=str(data / "config.yaml"), executor=DaskExecutor(address), **BUILD)
    same_records(out, local)


def DaskExecutorFor(address: str) -> Any:
    from shardkit.executors import DaskExecutor

    return DaskExecutor(address)


def assert_tasks_reuse_heap(address: str) -> None:
    """Dask's nanny fixes glibc's trim threshold in its workers, so image-sized arrays become fresh
    mmaps (about 30 % slower builds); inside shardkit's task scope the heap reuses them."""
    from distributed import Client

    def faults_per_array(scoped: bool) -> tuple[bool, float]:  # runs on the worker (pickled by value)
        import resource
        import statistics

        import numpy as np

        from shardkit.pipeline.executors import malloc, worker_settings

        def faults() -> int:
            return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

        with worker_settings.shard_work(False) if scoped else contextlib.nullcontext():
            for _ in range(3):
                np.ones(1 << 20, np.uint8)
            each = []
            for _ in range(20):
                before = faults()
                np.ones(1 << 20, np.uint8)
                each.append(faults() - before)
        # The median: a fresh mmap costs 257 faults every time, heap reuse none, and one array
        # that happens to grow the heap (seen once in CI: a mean of 12.8) says nothing about either.
        return malloc.thresholds_fixed(os.environ), statistics.median(each)

    with Client(address, timeout=60) as client:
        fixed, outside = client.submit(faults_per_array, False, pure=False).result(timeout=60)
        _, inside = client.submit(faults_per_array, True, pure=False).result(timeout=60)
    assert inside < 10
    if fixed and malloc._glibc() is not None:
        assert outside > 200


def assert_profiler_paused_while_shards_build(address: str) -> None:
    """Dask samples each running task's stack every 10 ms on the worker's event loop; shardkit's
    task scope pauses that and starts it again after (and leaves it alone when asked to)."""
    from distributed import Client

    def profiler_running(profile: bool) -> tuple[bool, bool, bool]:  # runs on the worker
        from distributed import get_worker

        from shardkit.pipeline.executors import dask_executor

        worker = get_worker()
        callback = worker.periodic_callbacks["profile"]

        def settled(running: bool) -> bool:  # stop and start run on the worker's event loop, soon
            deadline = time.monotonic() + 30
            while callback.is_running() != running and time.monotonic() < deadline:
                time.sleep(0.01)
            return callback.is_running()

        before = callback.is_running()
        with dask_executor._dask_shard_work(worker, False, profile):
            inside = settled(profile)
            time.sleep(0.1)  # and stays so while the task runs
            inside = inside and callback.is_running() == inside
        return before, inside, settled(True)

    with Client(address, timeout=60) as client:
        assert client.submit(profiler_running, False, pure=False).result(timeout=60) == (True, False, True)
        assert client.submit(profiler_running, True, pure=False).result(timeout=60) == (True, True, True)
        # and after the builds above, every worker samples again
        assert all(client.run(lambda dask_worker: dask_worker.periodic_callbacks["profile"].is_running()).values())


def _node(data: Path, out: Path, index: int, config: str = "config.yaml") -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "shardkit.cli", "build", str(data), "-o", str(out), "-c", str(data / config),
           "--records-per-shard", "6", "--seed", "5", "-w", "1", "--num-nodes", "3", "--node-index", str(index)]  # fmt: skip
    return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.slow
def test_three_nodes_one_killed_and_rerun_equal_the_local_build(data: Path, local: Path, tmp_path: Path) -> None:
    out = tmp_path / "nodes"
    victim = _node(data, out, 1)
    deadline = time.monotonic() + 120
    while not list(out.glob(".*.incomplete-*")) and not list(out.glob("*.tfrecord")):
        assert victim.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    others = [_node(data, out, 0), _node(data, out, 2)]
    outputs = [p.communicate(timeout=300) for p in others]
    assert all(p.returncode == 0 for p in others), [e.decode() for _, e in outputs]
    assert not (out / "manifest.json").exists()  # node 1's share is missing
    assert b"shards of other nodes are not finished yet" in outputs[0][0] + outputs[1][0]
    finalize = subprocess.run([sys.executable, "-m", "shardkit.cli", "finalize", str(out)], env=ENV, capture_output=True)
    assert finalize.returncode == 1 and b"shards are not finished" in finalize.stderr + finalize.stdout

    rerun = _node(data, out, 1)  # the pre-empted node resumes its share and, being last, writes the manifest
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr.decode()
    assert (out / "manifest.json").exists() and b"manifest:" in stdout
    assert verify([str(out)]).ok
    same_records(out, local)
    (out / "manifest.json").unlink()
    done = subprocess.run([sys.executable, "-m", "shardkit.cli", "finalize", str(out)], env=ENV, capture_output=True)
    assert done.returncode == 0 and (out / "manifest.json").exists()
    assert not (out / ".shardkit" / "tmp").exists()  # the nodes' scratch space


@pytest.mark.parametrize("formats", [case("tfrecord"), case("tfrecord,arrayrecord")])
def test_the_manifest_and_finalize_remove_the_scratch_of_nodes_killed_while_planning(data: Path, tmp_path: Path, formats: str) -> None:
    out = tmp_path / "scratch"
    scratch = out / ".shardkit" / "tmp"

    def killed_while_planning() -> None:  # what a node killed in the middle of its planning leaves
        (scratch / "plan-0badc0de").mkdir(parents=True)
        (scratch / "plan-0badc0de" / "val.plan").write_bytes(b"half a plan")

    node = {"workers": 1, "records_per_shard": 6, "num_nodes": 2, "progress": False, "format": formats}
    shardkit.build([data / "val.txt"], out, node_index=0, **node)
    killed_while_planning()
    last = shardkit.build([data / "val.txt"], out, node_index=1, **node)
    assert last.manifest is not None and not scratch.exists()
    (out / "manifest.json").unlink()
    killed_while_planning()
    finalized = shardkit.finalize(out).manifest
    assert (out / "manifest.json").exists() and not scratch.exists()
    assert finalized is not None and finalized.splits == last.manifest.splits  # from the shard records alone: twins too
    if "arrayrecord" in formats:
        assert_twins(str(out), ("val",))
        assert verify([str(out)]).ok


def test_nodes_with_different_config_are_refused(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    shardkit.build([data / "val.txt"], out, workers=1, num_nodes=2, node_index=0, progress=False)
    with pytest.raises(OutputError, match="different config") as refused:
        shardkit.build([data / "val.txt"], out, config=str(data / "config.yaml"), workers=1, num_nodes=2, node_index=1, progress=False)
    assert "nodes of one build must share config, inputs and options; clear OUT" in str(refused.value)
    assert "--overwrite" not in str(refused.value)  # refused with --num-nodes: not a way out here
    with pytest.raises(OutputError, match="another build is writing here"):
        from shardkit.pipeline.state.lock import OutputLock

        with OutputLock(str(out / ".shardkit" / "lock.node-1")):
            shardkit.build([data / "val.txt"], out, workers=1, num_nodes=2, node_index=1, progress=False)


def test_a_node_with_another_node_count_is_refused(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "count"
    shardkit.build([data / "val.txt"], out, workers=1, num_nodes=2, node_index=0, progress=False)
    with pytest.raises(OutputError, match="shared by 2 nodes, not 3"):
        shardkit.build([data / "val.txt"], out, workers=1, num_nodes=3, node_index=2, progress=False)


def test_dask_progress_settles_late_and_repeated_ticks() -> None:
    from shardkit.pipeline.executors.dask_executor import _DaskProgress

    shown: list[int] = []
    progress = _DaskProgress(shown.append)
    progress.event((0.0, ["a", 5]))
    progress.event((0.0, ["b", 4]))
    progress.event((0.0, ["a", 5]))  # task a's worker died after ticking; the rerun ticks again
    progress.finished("a", 6)  # a wrote 6 records in the end: the excess goes back
    progress.event((0.0, ["a", 1]))  # a late tick of a finished task is dropped
    progress.finished("b", 4)  # b's ticks were exact: nothing to settle
    progress.finished("c", 3)  # c's ticks never arrived before its result
    assert sum(shown) == 6 + 4 + 3
    assert shown == [5, 4, 5, -4, 3]


def test_an_unreachable_scheduler_is_one_clear_error_before_any_work(data: Path, tmp_path: Path) -> None:
    from shardkit.errors import WorkerError
    from shardkit.executors import DaskExecutor

    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(WorkerError, match=f"cannot reach the Dask scheduler at {address}: "):
        shardkit.build([data / "val.txt"], tmp_path / "out", executor=DaskExecutor(address, connect_timeout=1), progress=False)
    assert not (tmp_path / "out").exists()  # before any work: not even a plan
    with pytest.raises(WorkerError, match="cannot reach the Dask scheduler at nonsense://x: unknown address scheme"):
        shardkit.build([data / "val.txt"], tmp_path / "out", executor=DaskExecutor("nonsense://x"), progress=False)


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail, rather than hang the suite, where the behaviour under test is not hanging."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
def test_a_cluster_that_cannot_load_shardkit_tasks_is_one_clear_error_not_a_hang(data: Path, tmp_path: Path) -> None:
    """A worker that cannot unpickle a task closes, and Dask would wait for another for ever; a
    scheduler that cannot unpickle the graph fails every task with a traceback."""
    from shardkit.errors import WorkerError
    from shardkit.executors import DaskExecutor

    # shardkit installed without one of its dependencies: the package imports, its executors do not.
    broken = tmp_path / "site" / "shardkit"
    (broken / "pipeline" / "executors").mkdir(parents=True)
    (broken / "__init__.py").write_text(f"__version__ = {shardkit.__version__!r}\n")
    (broken / "pipeline" / "__init__.py").write_text("")
    (broken / "pipeline" / "executors" / "__init__.py").write_text("")
    (broken / "pipeline" / "executors" / "dask_executor.py").write_text("raise ImportError(\"No module named 'crc32c'\")\n")
    env = {**ENV, "PYTHONPATH": str(broken.parent)}  # shadows the installed shardkit there only
    why = r"cannot import shardkit \(ImportError: No module named 'crc32c'\): install shardkit [0-9.]+ with its dependencies on the"
    out = tmp_path / "out"
    with (
        dask_cluster(1, worker_env=env) as (address, _),
        deadline(60),
        pytest.raises(WorkerError, match=r"^Dask worker tcp://127.0.0.1:\d+ " + why),
    ):
        shardkit.build([data / "val.txt"], out, executor=DaskExecutor(address), progress=False)
    with (
        dask_cluster(1, scheduler_env=env) as (address, _),
        deadline(60),
        pytest.raises(WorkerError, match=rf"^the Dask scheduler at {address} " + why),
    ):
        shardkit.build([data / "val.txt"], out, executor=DaskExecutor(address), progress=False)
    assert not list(out.glob("*.tfrecord"))


def test_another_shardkit_version_on_the_cluster_is_refused() -> None:
    from shardkit.errors import WorkerError
    from shardkit.pipeline.executors.dask_executor import _check_versions

    _check_versions({"the Dask scheduler at tcp://h:8786": shardkit.__version__, "Dask worker tcp://h:1": shardkit.__version__})
    with pytest.raises(WorkerError, match=r"^Dask worker tcp://h:2 runs shardkit 0.0.1, this build [0-9.]+: install one version everywh"):
        _check_versions({"Dask worker tcp://h:1": shardkit.__version__, "Dask worker tcp://h:2": "0.0.1"})


class _Failing:
    """Stands for a Dask future whose result() raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def result(self) -> Any:
        raise self.exc


def test_dask_failures_become_one_line_errors_that_say_what_to_do() -> None:
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError

    from shardkit.errors import WorkerError
    from shardkit.executors import DaskExecutor

    executor = DaskExecutor("tcp://127.0.0.1:8786")
    name = "train-00001-of-00004.tfrecord"
    with pytest.raises(WorkerError) as killed:
        executor._result(_Failing(KilledWorker("key", object(), 3)), name)
    assert str(killed.value).startswith(
        f"{name}: every Dask worker that ran it died (4 tries), most often killed for using too much memory"
    )
    assert "rerun the same command to resume" in str(killed.value)
    with pytest.raises(WorkerError) as lost:
        executor._result(_Failing(FutureCancelledError("key", "scheduler-connection-lost")), name)
    assert str(lost.value) == (
        f"{name}: Dask gave up on the task (scheduler-connection-lost); is the scheduler at tcp://127.0.0.1:8786 still up? "
        "Finished shards are kept: rerun the same command to resume"
    )
    with pytest.raises(EntryError):  # a worker's own error goes on as it was raised there
        executor._result(_Failing(EntryError("train.txt", 3, "image: x.jpg: file not found")), name)
