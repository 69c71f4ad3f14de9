"""Which store a path lives on, and its fsspec filesystem: imported on first use, with the
options from ``SHARDKIT_STORAGE_OPTIONS``, one per process, and its failures as one line.

A missing filesystem package is one line naming the extra to install. Credentials and
endpoints come from each ecosystem's own places (the AWS chain and ``AWS_ENDPOINT_URL``;
Application Default Credentials and ``STORAGE_EMULATOR_HOST``); ``SHARDKIT_STORAGE_OPTIONS``
(JSON, set by ``--storage-option``) adds keyword arguments for every filesystem and reaches
worker processes through the environment.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

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
    # Other processes and machines write the same prefixes: a cached listing would hide their
    # objects (s3fs then answers FileNotFoundError for an object that exists).
    options = {"use_listings_cache": False, **storage_options()}
    if name in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        options.setdefault("token", "anon")  # an emulator takes no credentials; never ask the metadata server
    # gcsfs logs a traceback for a request it will not retry (403, 404); the error reaches the
    # user as one line from ``explained``, so without logging set up those lines stay quiet.
    logging.getLogger("gcsfs").addHandler(logging.NullHandler())
    try:
        fs = fsspec.filesystem(name, **options)
        _quiet_lost_connections(getattr(fs, "loop", None))
        return fs
    except ImportError:
        if extra:
            raise ShardkitError(f"{name}:// paths need {_PACKAGES[extra]}: pip install 'shardkit[{extra}]'") from None
        raise ShardkitError(f"{name}:// paths need this filesystem's fsspec package installed") from None
    except ValueError as exc:
        raise ShardkitError(f"{name}://: {exc}") from None


def _quiet_lost_connections(loop: Any) -> None:
    """When a connection drops mid-upload, aiohttp leaves a task whose error is never retrieved
    (the request already failed with it) and asyncio prints its traceback at exit: the error
    the user gets is the one line from ``explained``, so those reports are dropped."""
    if loop is None or not hasattr(loop, "set_exception_handler"):
        return

    def handler(loop: Any, context: dict[str, Any]) -> None:
        if context.get("message", "").startswith("Task exception was never retrieved") and isinstance(context.get("exception"), OSError):
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


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
        if not is_url(url):  # a local file's denial keeps its type: callers name it as they always did
            raise
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
