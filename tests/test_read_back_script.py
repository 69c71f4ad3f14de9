"""scripts/read_back.py, which scripts/demo.sh runs last: it reads a build back, and on a machine
without a GPU it says nothing of CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import shardkit
from tests.paths import REPO

SCRIPT = REPO / "scripts" / "read_back.py"


def test_read_back_counts_the_records_and_is_quiet_about_cuda(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([seg_data], out, workers=1, progress=False)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as demo.sh runs it
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tf.data read val: 8 records (manifest says 8)" in done.stdout
    assert "cuda" not in done.stderr.lower() and "cuinit" not in done.stderr.lower(), done.stderr
