#!/usr/bin/env bash
# A separate environment with TensorFlow Data Validation, for scripts/bench_stats.py and
# tests/statistics/test_against_tfdv.py. It is NOT a dependency of shardkit: TFDV's newest wheel
# (1.16.1) pins tensorflow < 2.17, pyarrow < 11, pandas < 2 and protobuf < 6, none of which the
# project's own venv can hold beside a current TensorFlow. Idempotent: an env that already imports
# tensorflow_data_validation at the pinned version is left alone.
#
#   bash scripts/tfdv_env.sh                 # creates /work/tfdv-venv (or $TFDV_VENV)
#   TFDV_VENV=~/tfdv bash scripts/tfdv_env.sh
#
# TFDV 1.16.1 has wheels for CPython 3.9-3.11 only; $TFDV_PYTHON picks the interpreter (default: the
# first of python3.11, python3.10, python3.9 on PATH). apache-beam is pinned because, left free, pip
# backtracks through every Beam release down to one whose pyarrow bound admits only pyarrow 10.0.0's
# sdist, which does not build; numpy < 2 because TF 2.16 and pyarrow 10 are built against NumPy 1.
set -euo pipefail

VENV="${TFDV_VENV:-/work/tfdv-venv}"
TFDV_VERSION="1.16.1"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "
import sys, importlib.metadata as m
sys.exit(0 if m.version('tensorflow-data-validation') == '$TFDV_VERSION' else 1)" 2>/dev/null; then
    echo "TFDV env ready: $VENV ($("$VENV/bin/python" --version))"
    exit 0
fi

PY="${TFDV_PYTHON:-}"
if [ -z "$PY" ]; then
    for candidate in python3.11 python3.10 python3.9; do
        if command -v "$candidate" >/dev/null 2>&1; then PY="$(command -v "$candidate")"; break; fi
    done
fi
if [ -z "$PY" ]; then
    echo "TFDV $TFDV_VERSION needs CPython 3.9-3.11; none found (set TFDV_PYTHON)" >&2
    exit 1
fi

"$PY" -m venv --clear "$VENV"  # a half-made env from an earlier try is started afresh
"$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
"$VENV/bin/python" -m pip install -q \
    "tensorflow-data-validation==$TFDV_VERSION" \
    "tfx-bsl==1.16.1" \
    "tensorflow-metadata==1.16.1" \
    "tensorflow==2.16.2" \
    "apache-beam[gcp]==2.59.0" \
    "pyarrow==10.0.1" \
    "pandas==1.5.3" \
    "numpy==1.26.4" \
    "protobuf==4.25.8"
"$VENV/bin/python" -c "import tensorflow_data_validation as tfdv; print('TFDV env ready:', '$VENV', tfdv.__version__)"
