"""Paths and URLs: the few file operations shardkit needs, on a local disk or in a bucket.

Every path shardkit takes may be a local path or a URL of an fsspec filesystem (``gs://``,
``s3://``, ``memory://``...). Local paths go straight to ``os`` with no new dependency; a URL
goes through its fsspec filesystem (``storage.stores``: which one, its options, its errors).

Errors keep their Python types (``FileNotFoundError``, ``PermissionError``, ``OSError``) so the
callers' handling is the same for both; ``explained`` turns the rest of a store's failures
(bad credentials, an unreachable endpoint) into one ``ShardkitError`` that names the URL.
"""

from __future__ import annotations

import contextlib
import glob as local_glob
import os
import posixpath
from collections.abc import Iterator, Sequence
from typing import IO

from shardkit.storage.stores import explained, filesystem, forget_filesystems, is_url, scheme

__all__ = ["explained", "filesystem", "forget_filesystems", "is_url", "scheme"]  # with the operations below


def local_path(path: str) -> str:
    """A local path as ``os`` takes it (``file:///x`` -> ``/x``)."""
    path = os.fspath(path)
    return path[len("file://") :] if path.startswith("file://") else path


def absolute(path: str) -> str:
    """An absolute local path, or the URL without a trailing slash."""
    path = os.fspath(path)
    if is_url(path):
        return path.rstrip("/") if path.rstrip("/") != path.split("://")[0] + ":/" else path
    return os.path.abspath(local_path(path))


def join(base: str, *names: str) -> str:
    return posixpath.join(base, *names) if is_url(base) else os.path.join(base, *names)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if is_url(path) else os.path.dirname(path)


def resolve(folder: str, path: str) -> str:
    """``path`` as written in an index file in ``folder``: a URL stays as it is, an absolute local
    path too; a relative one is joined to ``folder`` (a bucket prefix when the index is in one)."""
    if is_url(path) or os.path.isabs(path):
        return path
    if is_url(folder):
        root, _, rest = folder.partition("://")
        return f"{root}://{posixpath.normpath(posixpath.join(rest, path))}"
    return os.path.join(folder, path)


# -- operations, on either kind of path ------------------------------------------------------------


def open_read(path: str) -> IO[bytes]:
    """A seekable binary file (ranged reads on a store)."""
    if not is_url(path):
        return open(local_path(path), "rb")
    fs, key = filesystem(path)
    with explained(path):
        return fs.open(key, "rb", block_size=1 << 24)  # type: ignore[no-any-return]


def read_bytes(path: str, start: int | None = None, stop: int | None = None) -> bytes:
    if not is_url(path):
        with open(local_path(path), "rb") as f:
            if start is None:
                return f.read()
            f.seek(start)
            return f.read(None if stop is None else stop - start)
    fs, key = filesystem(path)
    with explained(path):
        return fs.cat_file(key, start=start, end=stop)  # type: ignore[no-any-return]


def read_many(paths: Sequence[str]) -> dict[str, bytes | None]:
    """Whole files, concurrently on a store; None for one that cannot be read."""
    found: dict[str, bytes | None] = {}
    by_scheme: dict[str, list[str]] = {}
    for path in paths:
        name = scheme(path)
        if name is not None:
            by_scheme.setdefault(name, []).append(path)
            continue
        try:
            found[path] = read_bytes(path)
        except OSError:
            found[path] = None
    for remote in by_scheme.values():
        fs, _ = filesystem(remote[0])
        keys = {fs._strip_protocol(p): p for p in remote}
        with explained(remote[0]):
            got = fs.cat(list(keys), on_error="return")
        for key, path in keys.items():
            value = got.get(key)
            found[path] = value if isinstance(value, bytes) else None
    return found


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(local_path(path))
    fs, key = filesystem(path)
    with explained(path):
        return bool(fs.exists(key))


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(local_path(path))
    fs, key = filesystem(path)
    with explained(path):
        return bool(fs.isfile(key))


def isdir(path: str) -> bool:
    """A folder; on a store, a prefix with objects under it (or a bucket)."""
    if not is_url(path):
        return os.path.isdir(local_path(path))
    fs, key = filesystem(path)
    with explained(path):
        return bool(fs.isdir(key))


def size(path: str) -> int | None:
    """Bytes in the file, None when there is none."""
    if not is_url(path):
        try:
            return os.path.getsize(local_path(path))
        except OSError:
            return None
    fs, key = filesystem(path)
    with explained(path):
        try:
            return int(fs.size(key))
        except FileNotFoundError:
            return None


def sizes(folder: str) -> dict[str, int]:
    """Name -> bytes of the files directly in ``folder`` (one listing on a store)."""
    if not is_url(folder):
        try:
            return {e.name: e.stat().st_size for e in os.scandir(local_path(folder)) if e.is_file()}
        except FileNotFoundError:
            return {}
    fs, key = filesystem(folder)
    with explained(folder):
        try:
            listing = fs.ls(key, detail=True, refresh=True)
        except FileNotFoundError:
            return {}
    return {posixpath.basename(e["name"].rstrip("/")): int(e.get("size") or 0) for e in listing if e.get("type") == "file"}


def sizes_of(paths: Sequence[str]) -> dict[str, int | None]:
    """Path -> bytes of each file (None where there is none); a store's are asked concurrently."""
    found = {p: size(p) for p in paths if not is_url(p)}
    remote = [p for p in paths if is_url(p)]
    if remote:
        fs, _ = filesystem(remote[0])  # like read_many: one store (another's paths are asked one by one)
        with explained(remote[0]):
            try:
                found.update(zip(remote, map(int, fs.sizes([fs._strip_protocol(p) for p in remote])), strict=True))
            except FileNotFoundError:  # one is missing: ask one by one, to tell which
                found.update((p, size(p)) for p in remote)
    return found


def listdir(folder: str) -> list[str]:
    """Names of the files directly in ``folder``, sorted (none when it is missing)."""
    return sorted(sizes(folder))


def glob(pattern: str) -> list[str]:
    if not is_url(pattern):
        return sorted(local_glob.glob(local_path(pattern)))
    fs, key = filesystem(pattern)
    root = pattern.split("://")[0]
    with explained(pattern):
        return sorted(f"{root}://{p}" for p in fs.glob(key))


def walk_files(folder: str) -> Iterator[str]:
    """Every file under ``folder``, as a path relative to it, in sorted order."""
    if not is_url(folder):
        base = local_path(folder)
        for root, dirs, files in os.walk(base):
            dirs.sort()
            for name in sorted(files):
                yield os.path.relpath(os.path.join(root, name), base)
        return
    fs, key = filesystem(folder)
    with explained(folder):
        found = fs.find(key)
    prefix = key.rstrip("/") + "/"
    yield from sorted(p[len(prefix) :] for p in found if p.startswith(prefix))


def remove(path: str) -> None:
    """Delete a file; one that is already gone is fine."""
    if not is_url(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(local_path(path))
        return
    fs, key = filesystem(path)
    with explained(path, "deleting"), contextlib.suppress(FileNotFoundError):
        fs.rm_file(key)


def remove_tree(folder: str) -> None:
    if not is_url(folder):
        import shutil

        shutil.rmtree(local_path(folder), ignore_errors=True)
        return
    fs, key = filesystem(folder)
    with explained(folder, "deleting"), contextlib.suppress(FileNotFoundError):
        fs.rm(key, recursive=True)


def upload(local: str, url: str, create: bool = False) -> bool:
    """One object from a local file: it appears whole or not at all (a multipart upload is
    only visible once completed). ``create``: only if no object is there (False if one was)."""
    fs, key = filesystem(url)
    with explained(url, "writing"):
        try:
            fs.put_file(local, key, **({"mode": "create"} if create else {}))
        except FileExistsError:
            return False
    return True


def put_bytes(url: str, data: bytes) -> None:
    fs, key = filesystem(url)
    with explained(url, "writing"):
        fs.pipe_file(key, data)


def create_once(url: str, data: bytes) -> bool:
    """Write ``data`` at ``url`` unless an object is there: a conditional write (S3
    ``If-None-Match: *``, GCS ``ifGenerationMatch=0``) in one request. True if this call won."""
    fs, key = filesystem(url)
    with explained(url, "writing"):
        try:
            fs.pipe_file(key, data, mode="create")
        except FileExistsError:
            return False
    return True


def bucket_exists(url: str) -> bool:
    """Whether the bucket (the URL's first component) can be seen at all."""
    fs, key = filesystem(url)
    bucket = key.split("/", 1)[0]
    with explained(url):  # info, not exists: exists says False for an unreachable store too
        try:
            fs.info(bucket)
        except FileNotFoundError:
            return False
    return True
