"""What a stopped command may leave behind, found without asking shardkit: temp names anywhere
under a folder, and shardkit's names in a child's $TMPDIR."""

from __future__ import annotations

import os
from pathlib import Path

TEMP = ".incomplete-"  # in every temp name shardkit writes (storage.atomic, read.materialize)


def temp_names(root: Path) -> list[str]:
    """Every temp name under ``root``, at any depth (``.shardkit/shards/`` included), relative to it."""
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if TEMP in p.name)


def private_tmpdir(folder: Path) -> dict[str, str]:
    """The environment of a child whose $TMPDIR is ``folder`` (made here), so a test can see what it left there."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(folder)}


def shardkit_names(tmpdir: Path) -> list[str]:
    """What in ``tmpdir`` (a child's $TMPDIR) shardkit named: planning scratch, a bucket build's staging."""
    return sorted(n for n in os.listdir(tmpdir) if "shardkit" in n) if tmpdir.exists() else []
