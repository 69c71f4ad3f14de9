"""Where things live in an output folder, and writing them atomically.

OUT/
  train-00000-of-00004.tfrecord      finished shards (final names appear only when complete)
  .train-00001-of-00004.tfrecord.incomplete-1a2b3c4d   a shard being written
  manifest.json                      written last, atomically
  errors.jsonl                       entries skipped with --on-error skip
  .shardkit/build.json               the build's fingerprint and resolved parameters
  .shardkit/shards/NAME.json         one record per finished shard (the commit point)
  .shardkit/lock                     held (flock) by the one build running into OUT
"""

from __future__ import annotations

import errno
import glob
import json
import os
import uuid
from collections.abc import Iterable
from typing import Any

from shardkit.errors import OutputError

STATE_DIR = ".shardkit"
MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
_INCOMPLETE = ".incomplete-"


def state_dir(out: str) -> str:
    return os.path.join(out, STATE_DIR)


def temp_path(out: str, name: str, tag: str) -> str:
    return os.path.join(out, f".{name}{_INCOMPLETE}{tag}")


def temp_files(out: str, names: Iterable[str] | None = None) -> list[str]:
    """Temporary files in OUT: all of them, or only those of the shards ``names``."""
    if names is None:
        return sorted(glob.glob(os.path.join(glob.escape(out), f".*{_INCOMPLETE}*")))
    # .NAME.incomplete-X (the shard) and .NAME.idx.incomplete-X (its index)
    return sorted(p for name in names for p in glob.glob(os.path.join(glob.escape(out), f".{glob.escape(name)}*{_INCOMPLETE}*")))


def state_fingerprint(out: str) -> str | None:
    """The fingerprint of the build OUT belongs to now (None: no readable .shardkit/build.json)."""
    try:
        state = read_json(os.path.join(state_dir(out), "build.json"))
    except (OSError, ValueError):
        return None
    fingerprint = state.get("fingerprint") if isinstance(state, dict) else None
    return fingerprint if isinstance(fingerprint, str) else None


def shard_record_path(out: str, name: str) -> str:
    return os.path.join(state_dir(out), "shards", f"{name}.json")


def flush_to_disk(fd: int) -> None:
    """Data to stable storage; fdatasync skips the metadata-only flush where the OS has it."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, durable: bool = True) -> None:
    """Write to a temporary name beside ``path``, fsync (when ``durable``), rename over it."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, f".{os.path.basename(path)}{_INCOMPLETE}{uuid.uuid4().hex[:8]}")
    try:
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                flush_to_disk(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    if durable:
        fsync_dir(folder)


_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def create_json_once(path: str, obj: Any) -> bool:
    """Publish ``obj`` at ``path`` unless something is there already; True if this call won.

    Nodes of one build race to write the plan: link(2) of a complete temp file is atomic and
    fails if the name exists, so exactly one plan is published and nobody sees half of one.
    """
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, f".{os.path.basename(path)}{_INCOMPLETE}{uuid.uuid4().hex[:8]}")
    with open(temp, "wb") as f:
        f.write((json.dumps(obj, indent=2) + "\n").encode())
        f.flush()
        flush_to_disk(f.fileno())
    try:
        os.link(temp, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno in _NO_HARD_LINKS:  # object-store mounts (gcsfuse, s3fs, blobfuse) have none
            raise OutputError(
                f"{folder}: cannot publish the build's plan for the other nodes, hard links fail here ({exc.strerror}). "
                "Multi-node builds need a shared filesystem with hard links and flock (NFS, Lustre, GPFS, CephFS): write OUT there"
            ) from None
        raise OutputError(f"{path}: cannot publish the build's plan ({exc.strerror})") from None
    finally:
        os.remove(temp)


def write_json(path: str, obj: Any, durable: bool = True) -> None:
    write_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode(), durable)


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_shard_record(out: str, record: dict[str, Any], durable: bool = True) -> None:
    """The shard's commit point: written after the shard itself is renamed into place."""
    write_json(shard_record_path(out, record["name"]), record, durable)
    if durable:
        fsync_dir(out)  # the shard's rename, before anyone trusts its record
