"""Paths and URLs: the few file operations shardkit needs, on a local disk or in a bucket.

Every path shardkit takes may be a local path or a URL of an fsspec filesystem (``gs://``,
``s3://``, ``memory://``...). Local paths go straight to ``os`` with no new dependency; a URL
goes through fsspec, imported on first use, and a missing filesystem package is one line naming
the extra to install. Credentials and endpoints come from each ecosystem's own places (the AWS
chain and ``AWS_ENDPOINT_URL``; Application Default Credentials and ``STORAGE_EMULATOR_HOST``);
``SHARDKIT_STORAGE_OPTIONS`` (JSON, set by ``--storage-option``) adds keyword arguments for
every filesystem, and reaches worker processes through the environment.

Errors keep their Python types (``FileNotFoundError``, ``PermissionError``, ``OSError``) so the
callers' handling is the same for both; ``explained`` turns the rest of a store's failures
(bad credentials, an unreachable endpoint) into one ``ShardkitError`` that names the URL.
"""

from __future__ import annotations

import contextlib
import functools
import glob as local_glob
import json
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import IO, Any

from shardkit.errors import ShardkitError

OPTIONS_VARIABLE = "SHARDKIT_STORAGE_OPTIONS"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3"}
_PACKAGES = {"gcs": "gcsfs", "s3": "s3fs"}


def scheme(path: str) -> str | None:
    """``"s3"`` for ``s3://bucket/key``; None for a local path (``file://`` counts as local)."""
    match = _SCHEME.match(str(path))
    if match is None or match.group(1).lower() == "file":
        return None
    return match.group(1).lower()


def is_url(path: str) -> bool:
    return scheme(path) is not None


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


# -- fsspec access -------------------------------------------------------------------------------


def storage_options() -> dict[str, Any]:
    """Extra keyword arguments for every fsspec filesystem, from ``SHARDKIT_STORAGE_OPTIONS``."""
    text = os.environ.get(OPTIONS_VARIABLE, "")
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError:
        raise ShardkitError(f"{OPTIONS_VARIABLE}: not a JSON object of fsspec options ({text[:60]!r})") from None
    if not isinstance(options, dict):
        raise ShardkitError(f"{OPTIONS_VARIABLE}: not a JSON object of fsspec options ({text[:60]!r})")
    return options


def filesystem(url: str) -> tuple[Any, str]:
    """(the fsspec filesystem of ``url``, the path within it), or one line saying what to install."""
    name = scheme(url) or "file"
    fs = _filesystem(name, os.environ.get(OPTIONS_VARIABLE, ""), os.getpid())  # a forked child makes its own
    return fs, fs._strip_protocol(url)


@functools.lru_cache(maxsize=16)
def _filesystem(name: str, options_text: str, pid: int) -> Any:
    extra = _EXTRAS.get(name)
    if name in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        # gcsfs probes for zonal/HNS buckets over gRPC, which an emulator does not answer: it hangs.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    try:
        import fsspec
    except ImportError:
        hint = f"pip install 'shardkit[{extra}]'" if extra else "pip install fsspec and the package for this filesystem"
        raise ShardkitError(f"{name}:// paths need fsspec: {hint}") from None
    options = storage_options()
    if name in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        options.setdefault("token", "anon")  # an emulator takes no credentials; never ask the metadata server
    try:
        return fsspec.filesystem(name, **options)
    except ImportError:
        if extra:
            raise ShardkitError(f"{name}:// paths need {_PACKAGES[extra]}: pip install 'shardkit[{extra}]'") from None
        raise ShardkitError(f"{name}:// paths need this filesystem's fsspec package installed") from None
    except ValueError as exc:
        raise ShardkitError(f"{name}://: {exc}") from None


def forget_filesystems() -> None:
    """Drop cached filesystems (after a fork their event loops and sessions are not usable)."""
    _filesystem.cache_clear()


@contextlib.contextmanager
def explained(url: str, doing: str = "reading") -> Iterator[None]:
    """A store's failure that is not a plain missing file or denial -> one line naming ``url``.

    fsspec's S3 and GCS filesystems retry transient errors themselves (s3fs: 5 tries with
    backoff on throttling, 5xx and dropped connections; gcsfs: 6 tries on 408/429/5xx and
    connection errors); what still fails after those is reported here.
    """
    try:
        yield
    except (ShardkitError, FileNotFoundError, FileExistsError, KeyboardInterrupt):
        raise
    except PermissionError as exc:
        why = _first_line(exc)
        raise ShardkitError(f"{url}: access denied {doing} it ({why}); check the credentials and the bucket's permissions") from None
    except Exception as exc:  # botocore, aiohttp and google-auth raise their own types
        if not is_url(url) and isinstance(exc, OSError):
            raise
        raise ShardkitError(f"{url}: {doing} failed: {_first_line(exc)}{_advice(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _advice(exc: BaseException) -> str:
    name = type(exc).__name__
    if "Credential" in name or "credential" in str(exc):
        return " (no credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile for s3://, Application Default Credentials for gs://)"
    if "Connect" in name or "connect" in str(exc).lower():
        return " (the store cannot be reached: check the network, AWS_ENDPOINT_URL or STORAGE_EMULATOR_HOST)"
    return ""


# -- operations, on either kind of path ------------------------------------------------------------


def open_read(path: str) -> IO[bytes]:
    """A seekable binary file (ranged reads on a store)."""
    if not is_url(path):
        return open(local_path(path), "rb")
    fs, key = filesystem(path)
    with explained(path):
        return fs.open(key, "rb", block_size=1 << 22)  # type: ignore[no-any-return]


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
    remote = [p for p in paths if is_url(p)]
    for path in paths:
        if not is_url(path):
            try:
                found[path] = read_bytes(path)
            except OSError:
                found[path] = None
    if remote:
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


def upload(local: str, url: str) -> None:
    """One object from a local file: it appears whole or not at all (a multipart upload is
    only visible once completed)."""
    fs, key = filesystem(url)
    with explained(url, "writing"):
        fs.put_file(local, key)


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
    with explained(url):
        return bool(fs.exists(bucket))
