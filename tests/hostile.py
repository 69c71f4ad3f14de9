"""Hostile inputs, tried the way a user meets them: the ``shardkit`` command in a child process
under a memory limit (the machine is shared, and an unbounded parser can take it down), with
every input file hashed before and after (a command must never change an input byte).
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# Address space for the child: a build of a small set maps about 0.6 GB of it (NumPy, Arrow,
# OpenCV) and reserves more for its threads' malloc arenas (an unlimited build of the demo set
# peaks at 1.8-1.9 GB of address space); with statistics, the parent's publishing (protobuf) no
# longer fitted under 1.5 GB. A parser whose memory grows with its input fails here rather than
# in the kernel.
LIMIT_BYTES = 2 << 30


def run_cli(args: Sequence[str | os.PathLike[str]], cwd: str | os.PathLike[str], *, limit: int = LIMIT_BYTES,
            timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``shardkit ARGS`` in ``cwd`` under an address-space limit of ``limit`` bytes."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    command = [sys.executable, "-m", "shardkit.cli", *map(os.fspath, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=limited,
                          env={**os.environ, **(env or {})})  # fmt: skip


def digests(*roots: str | os.PathLike[str]) -> dict[str, str]:
    """Every file under ``roots`` (or each root that is a file) -> its SHA-256."""
    found: dict[str, str] = {}
    for root in map(Path, roots):
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        for path in files:
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``Error:`` line a refused command prints, checked to be one line with no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def refused_build(given: str | os.PathLike[str], inputs: str | os.PathLike[str], tmp_path: Path) -> str:
    """``shardkit build GIVEN`` refused: its one ``Error:`` line, every byte under ``inputs`` unchanged."""
    before = digests(inputs)
    line = one_line_error(run_cli(["build", given, "-o", tmp_path / "out", "-w", "1"], tmp_path))
    assert digests(inputs) == before
    return line
