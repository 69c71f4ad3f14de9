"""Where things live in an output folder: the names of shards, temp files, state and records.

OUT/
  train-00000-of-00004.tfrecord      finished shards (final names appear only when complete)
  .train-00001-of-00004.tfrecord.incomplete-1a2b3c4d   a shard being written
  manifest.json                      written last, atomically
  errors.jsonl                       entries skipped with --on-error skip
  .shardkit/build.json               the build's fingerprint and resolved parameters
  .shardkit/shards/NAME.json         one record per finished shard (the commit point)
  .shardkit/lock                     held (flock) by the one build running into OUT
  .shardkit/plan-<fingerprint>/      the plan: one file per split, its entries in shard order
  .shardkit/tmp/                     scratch space while planning

When OUT is in a bucket (a ``gs://``/``s3://`` URL) the same names are objects, and what is
written before it is finished (temp shards, planning scratch) lives in a local staging folder
instead, ``$TMPDIR/shardkit-staging-<uid>/<hash of OUT>/``: objects appear whole, so nothing partial
is ever in the bucket.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterable
from typing import Any

from shardkit.errors import OutputError
from shardkit.storage import location
from shardkit.storage.atomic import INCOMPLETE, fsync_dir, naming, read_json, write_json

STATE_DIR = ".shardkit"
MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"


def shard_name(split: str, index: int, num_shards: int, compression: str | None) -> str:
    """``{split}-{i:05d}-of-{n:05d}.tfrecord``: TFDS' file template matches it (see pipeline.state.tfds_metadata)."""
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    return f"{split}-{index:05d}-of-{num_shards:05d}{suffix}"


def state_dir(out: str) -> str:
    return location.join(out, STATE_DIR)


def work_dir(out: str) -> str:
    """Where unfinished files of OUT are written: OUT itself, or a local staging folder for a bucket."""
    if not location.is_url(out):
        return out
    return os.path.join(_staging_root(), hashlib.sha256(out.encode()).hexdigest()[:16])


def _staging_root() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"shardkit-staging-{uid}")


def make_work_dir(out: str) -> str:
    """``work_dir(out)``, created; for a bucket, in a folder of this user's alone (mode 0700, owned by
    them), so no other user of a shared machine can read the shards or take the name first."""
    folder = work_dir(out)
    if location.is_url(out):
        root = _staging_root()
        with naming(root):
            os.makedirs(root, mode=0o700, exist_ok=True)
            info = os.lstat(root)
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o077):
            raise OutputError(f"{root}: the staging folder of bucket builds is not this user's alone (mode 0700): remove it, or set TMPDIR")
    with naming(folder):
        os.makedirs(folder, exist_ok=True)
    return folder


def scratch_dir(out: str) -> str:
    if location.is_url(out):
        return os.path.join(work_dir(out), "tmp")
    return os.path.join(state_dir(out), "tmp")


def temp_path(out: str, name: str, tag: str) -> str:
    return os.path.join(work_dir(out), f".{name}{INCOMPLETE}{tag}")


def temp_files(out: str, names: Iterable[str] | None = None) -> list[str]:
    """Temporary files of OUT: all of them, or only those of the shards ``names``."""
    folder = glob.escape(work_dir(out))
    if names is None:
        return sorted(glob.glob(os.path.join(folder, f".*{INCOMPLETE}*")))
    # .NAME.incomplete-X (the shard) and .NAME.idx.incomplete-X (its index)
    return sorted(p for name in names for p in glob.glob(os.path.join(folder, f".{glob.escape(name)}*{INCOMPLETE}*")))


def state_fingerprint(out: str) -> str | None:
    """The fingerprint of the build OUT belongs to now (None: no readable .shardkit/build.json)."""
    try:
        state = read_json(location.join(state_dir(out), "build.json"))
    except (OSError, ValueError):  # a store that cannot be reached is reported, not taken for "no build"
        return None
    fingerprint = state.get("fingerprint") if isinstance(state, dict) else None
    return fingerprint if isinstance(fingerprint, str) else None


def shard_record_path(out: str, name: str) -> str:
    return location.join(state_dir(out), "shards", f"{name}.json")


def write_shard_record(out: str, record: dict[str, Any], durable: bool = True) -> None:
    """The shard's commit point: written after the shard itself is renamed into place."""
    write_json(shard_record_path(out, record["name"]), record, durable)
    if durable:
        fsync_dir(out)  # the shard's rename, before anyone trusts its record
