"""Writing files so that readers see all of one or none of it: temp name, flush, rename.

A file is written under ``.NAME.incomplete-XXXXXXXX`` beside its final name, flushed to stable
storage (unless the caller opts out, for scratch disks) and renamed over NAME; the folder is
then fsynced so the rename itself survives a power cut. Every writer of OUT, the build, the
idx and TFDS metadata writers and snapshot-materialize, goes through here.

In a bucket (OUT is a ``gs://``/``s3://`` URL) there is no rename, but one upload appears whole
or not at all: ``write_atomic`` is one object write, ``publish`` uploads a finished local temp
file as the final object, and ``create_json_once`` is a conditional write.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

from shardkit.errors import OutputError, ShardkitError, WriteError
from shardkit.storage import location

INCOMPLETE = ".incomplete-"  # in every temp name, so a sweep finds what an interrupted writer left
_TAG = re.compile(r"[0-9a-f]{8}")  # what follows INCOMPLETE: 8 hex digits, unique per write


def temp_name(name: str, tag: str | None = None) -> str:
    """``.NAME.incomplete-XXXXXXXX``: the temp name a writer of ``name`` uses beside it."""
    return f".{name}{INCOMPLETE}{tag or uuid.uuid4().hex[:8]}"


def temp_target(name: str) -> str | None:
    """The name that temp name ``name`` was written for (``temp_name``'s ``name``), or None where
    ``name`` is not one: what a sweep may remove is only what a writer here names."""
    base, sep, tag = name.rpartition(INCOMPLETE)
    if not sep or len(base) < 2 or not base.startswith(".") or not _TAG.fullmatch(tag):
        return None
    return base[1:]


def flush_to_disk(fd: int) -> None:
    """Data to stable storage; fdatasync skips the metadata-only flush where the OS has it."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def flush_file(path: str) -> None:
    """A file written earlier (and closed), to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        flush_to_disk(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (a no-op where directories cannot be opened, and in a bucket)."""
    if location.is_url(path):
        return
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


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """OS errors while writing ``path`` (a full disk, a quota, a read-only folder) become one
    ``WriteError`` that names ``path``, the file the user knows, not a temp file."""
    try:
        yield
    except OSError as exc:
        raise WriteError.from_os_error(path, exc) from None


def write_atomic(path: str, data: bytes, durable: bool = True) -> None:
    """Write to a temporary name beside ``path``, fsync (when ``durable``), rename over it."""
    if location.is_url(path):
        with naming(path):
            location.put_bytes(path, data)
        return
    temp = _write_temp(path, data, durable)
    try:
        with naming(path):
            os.replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def create_json_once(path: str, obj: Any) -> bool:
    """Publish ``obj`` at ``path`` unless something is there already; True if this call won.

    Nodes of one build race to write the plan: link(2) of a complete temp file is atomic and
    fails if the name exists, so exactly one plan is published and nobody sees half of one.
    """
    data = (json.dumps(obj, indent=2) + "\n").encode()
    if location.is_url(path):
        with naming(path):
            return location.create_once(path, data)
    folder = os.path.dirname(path) or "."
    temp = _write_temp(path, data, durable=True)
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


def _write_temp(path: str, data: bytes, durable: bool) -> str:
    """``data`` in a complete temp file beside ``path`` (flushed to disk when ``durable``): its name."""
    folder = os.path.dirname(path) or "."
    temp = os.path.join(folder, temp_name(os.path.basename(path)))
    with naming(path):
        os.makedirs(folder, exist_ok=True)
        try:
            with open(temp, "wb") as f:
                f.write(data)
                f.flush()
                if durable:
                    flush_to_disk(f.fileno())
        except BaseException:
            remove_quietly(temp)
            raise
    return temp


def publish(temp: str, path: str) -> None:
    """A finished temp file becomes ``path``: renamed over it, or uploaded as one object (then
    the local temp file is removed)."""
    with naming(path):
        if location.is_url(path):
            location.upload(temp, path)
            remove_quietly(temp)
        else:
            os.replace(temp, path)


def remove_quietly(path: str) -> None:
    """Remove a temp file while something else already failed: gone already, or a folder turned
    read-only, must not replace the error being reported."""
    with contextlib.suppress(OSError, ShardkitError):
        if location.is_url(path):
            location.remove(path)
        else:
            os.remove(path)


def write_json(path: str, obj: Any, durable: bool = True) -> None:
    write_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode(), durable)


def read_json(path: str) -> Any:
    if location.is_url(path):
        return json.loads(location.read_bytes(path))
    with open(path, encoding="utf-8") as f:
        return json.load(f)
