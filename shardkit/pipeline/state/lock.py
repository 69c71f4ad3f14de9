"""One build at a time per output folder: an advisory lock that dies with its holder.

``flock`` is released by the kernel when the process exits, even after ``kill -9``, so a crashed
build never leaves a stale lock behind; the file's text (pid, host) only explains who holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from types import TracebackType

from shardkit.errors import OutputError, StateError
from shardkit.storage.atomic import naming


class OutputLock:
    """``shared`` is for the nodes of one multi-node build (each also holds its own node lock);
    a single-machine build holds it exclusively, so the two kinds never mix in one OUT."""

    def __init__(self, path: str, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._fd: int | None = None

    def acquire(self) -> None:
        with naming(self.path):  # a full disk or a read-only OUT: one line, not a traceback
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(fd)
            os.close(fd)
            raise StateError(
                f"{os.path.dirname(os.path.dirname(self.path))}: another build is writing here ({holder}); "
                "wait for it to finish, or choose another output folder"
            ) from None
        except OSError as exc:  # ENOLCK: NFS without lockd; ENOSYS/EOPNOTSUPP: Lustre mounted noflock, some FUSE mounts
            os.close(fd)
            raise OutputError(
                f"{self.path}: cannot lock the output folder ({exc.strerror}); shardkit needs flock(2) to keep two builds "
                "apart: use a filesystem that has it (NFS with lockd, Lustre mounted with flock), or a local disk"
            ) from None
        self._fd = fd
        try:
            with naming(self.path):
                # Shared holders (several nodes at once) clear the text an earlier exclusive holder
                # left, so that a refusal names them and not a build that has ended.
                os.ftruncate(fd, 0)
                if not self.shared:
                    info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                    os.write(fd, json.dumps(info).encode())
        except BaseException:
            self.release()  # a notebook that retries after freeing space must not find its own stale lock
            raise

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _describe(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        if not info:
            return "a multi-node build's nodes"
        return f"pid {info.get('pid')} on host {info.get('host')}, since {info.get('since')}"
    except (OSError, ValueError):
        return "holder unknown"
