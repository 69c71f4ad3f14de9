"""shardkit's statistics equal TFDV's on the same shards (issue 35, "Against TFDV"): a build's
``statistics.pb`` and ``shardkit stats`` on its files, split by split and feature, through
``scripts/bench_stats.py --records 0`` on small sets.

TFDV cannot live in the project's environment (its newest wheel pins tensorflow < 2.17, pyarrow <
11, pandas < 2), so it runs in its own, which ``bash scripts/tfdv_env.sh`` makes. CI has no such
environment and this test is skipped there, saying so; where it exists ($TFDV_PYTHON, default
/work/tfdv-venv/bin/python) it runs. Most of its time is TFDV's: TensorFlow and Beam starting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

TFDV_PYTHON = os.environ.get("TFDV_PYTHON", "/work/tfdv-venv/bin/python")


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(TFDV_PYTHON).exists(), reason=f"no TFDV environment at {TFDV_PYTHON} (CI has none): bash scripts/tfdv_env.sh makes one"
)
def test_statistics_equal_tfdvs_on_the_same_shards(tmp_path: Path) -> None:
    env = dict(os.environ, TFDV_PYTHON=TFDV_PYTHON, PYTHONPATH=str(REPO))
    command = [sys.executable, str(REPO / "scripts" / "bench_stats.py"), "--records", "0", "--per-class", "8", "--rows", "400"]
    done = subprocess.run([*command, "--data", str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 differences from TFDV in all" in done.stdout
    assert "quantiles not checked" not in done.stdout and "train/score: quantile rank error" in done.stdout
    checked_all = [f"{build}: OUT/statistics.pb" for build in ("images", "table")]
    checked_all += ["images: shardkit stats train files", "table: shardkit stats test files"]
    for checked in checked_all:
        assert f"{checked} against TFDV: 0 differences" in done.stdout, done.stdout
