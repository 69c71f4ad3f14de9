#!/usr/bin/env bash
# One command on a fresh machine: install shardkit with its test extras, lint, type-check, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# Model Garden, the oracle for detection records (tests/model_garden.py): without its dependencies,
# which are its whole model zoo's (orbit, gin, sentencepiece, ...); what the tests use of it is in [test].
.venv/bin/python -m pip install -q --no-deps tf-models-official==2.20.0
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest -m "" "$@"  # every test: the default lane skips the slow and bucket ones
