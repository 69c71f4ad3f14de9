"""malloc thresholds: counted in page faults (deterministic), not seconds; and the shared task scope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from shardkit.pipeline.executors import malloc, worker_settings
from tests.paths import REPO

ROOT = REPO

# Page faults per 1 MB array written and freed: about 245 when every array is a fresh mmap,
# about 0 when the heap reuses the freed block. Printed outside, inside and after relax().
FAULTS = """
import json, resource
import numpy as np
from shardkit.pipeline.executors import malloc
from tests.paths import REPO

def faults_per_array(rounds=40):
    for _ in range(3):  # the first arrays fault either way, while the heap grows
        np.ones(1 << 20, np.uint8)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(rounds):
        a = np.ones(1 << 20, np.uint8)
        del a
    return (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / rounds

outside = faults_per_array()
restore = malloc.relax()
inside = faults_per_array()
restore()
after = faults_per_array()
print(json.dumps({"outside": outside, "inside": inside, "after": after, "acted": restore is not malloc._nothing}))
"""


def run_faults(**env: str) -> dict[str, float]:
    clean = {k: v for k, v in os.environ.items() if k not in malloc.FIXING_VARIABLES}
    done = subprocess.run([sys.executable, "-c", FAULTS], env={**clean, "PYTHONPATH": str(ROOT), **env}, capture_output=True, check=True)
    return dict(json.loads(done.stdout))


needs_glibc = pytest.mark.skipif(malloc._glibc() is None, reason="glibc's mallopt only")


@needs_glibc
def test_relax_lifts_a_fixed_trim_threshold_like_dasks_nanny_sets_and_restores_it() -> None:
    faults = run_faults(MALLOC_TRIM_THRESHOLD_="65536")  # distributed.nanny.pre-spawn-environ
    assert faults["acted"]
    assert faults["outside"] > 200  # every image-sized array is a new mapping
    assert faults["inside"] < 10  # the heap reuses it
    assert faults["after"] > 200  # the environment's setting is back


@needs_glibc
def test_relax_leaves_glibcs_own_adaptation_alone() -> None:
    faults = run_faults()
    assert not faults["acted"]  # a mallopt call would switch the dynamic threshold off for good
    assert faults["outside"] < 10 and faults["inside"] < 10 and faults["after"] < 10


@pytest.mark.parametrize(
    ("environ", "fixed"),
    [({}, False), ({"MALLOC_TRIM_THRESHOLD_": "65536"}, True), ({"MALLOC_MMAP_THRESHOLD_": "1"}, True), ({"MALLOC_ARENA_MAX": "2"}, False)],
)
def test_thresholds_fixed(environ: dict[str, str], fixed: bool) -> None:
    assert malloc.thresholds_fixed(environ) is fixed
    if not fixed:
        assert malloc.relax(environ) is malloc._nothing


def test_settings_parse_like_glibc() -> None:
    assert malloc._setting({"MALLOC_TRIM_THRESHOLD_": "65536"}, "MALLOC_TRIM_THRESHOLD_") == 65536
    assert malloc._setting({"MALLOC_TRIM_THRESHOLD_": "lots"}, "MALLOC_TRIM_THRESHOLD_") == malloc.DEFAULT_THRESHOLD
    assert malloc._setting({}, "MALLOC_MMAP_THRESHOLD_") == malloc.DEFAULT_THRESHOLD


def test_shard_work_applies_once_for_concurrent_tasks_and_undoes_after_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []

    def step(name: str) -> Callable[[], Callable[[], None]]:
        def apply() -> Callable[[], None]:
            log.append(f"{name}+")
            return lambda: log.append(f"{name}-")

        return apply

    monkeypatch.setattr(malloc, "relax", step("malloc"))
    monkeypatch.setattr(worker_settings, "_pin_threads", step("pin"))
    first_in, first_may_leave = threading.Event(), threading.Event()

    def first() -> None:
        with worker_settings.shard_work(False, also=[step("profiler")]):  # an executor's own setting (Dask's profiler)
            first_in.set()
            assert first_may_leave.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with worker_settings.shard_work(True, also=[step("profiler")]):  # joins while the first task runs; augmenting adds the pin
        first_may_leave.set()
        thread.join(10)
        assert log == ["malloc+", "profiler+", "pin+"]  # the first task left, the second still runs: nothing undone
    assert log == ["malloc+", "profiler+", "pin+", "pin-", "profiler-", "malloc-"]
    with worker_settings.shard_work(True):
        pass
    assert log[6:] == ["malloc+", "pin+", "pin-", "malloc-"]
