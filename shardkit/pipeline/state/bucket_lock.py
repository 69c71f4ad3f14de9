"""One build at a time per output prefix in a bucket: a lock object with a heartbeat.

Object stores have no ``flock``. The lock is an object created with a conditional write
(S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, in one request): of two builds that try
at once, exactly one creates it. It holds the holder's host, pid, process start time and a
heartbeat time that a thread refreshes every ``HEARTBEAT_SECONDS`` while the build runs.

A lock is taken over:
- at once when its holder ran on this host and is no longer running (a build killed with
  ``kill -9`` leaves its lock object behind, and a rerun on the same machine just resumes);
- when its heartbeat is older than ``STALE_SECONDS`` (``SHARDKIT_LOCK_STALE_SECONDS``): a holder on
  another host that stopped refreshing it, e.g. a Colab VM that was reclaimed.
Of builds that find the same stopped holder, only the one that creates the marker object
``lock.replaced-<old token>`` (conditionally) deletes the old lock and creates its own (again
conditionally): two takers cannot both win. A holder that finds its lock replaced stops
refreshing it, and the build refuses to write its manifest. "This host" is the hostname, the
boot and the pid namespace, so containers that share a hostname are not taken for one host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
import warnings
from types import TracebackType
from typing import Any

from shardkit.errors import OutputError, ShardkitWarning, StateError
from shardkit.storage import location

HEARTBEAT_SECONDS = 30.0
GONE = "its process on this host is no longer running"
STALE_SECONDS = 600.0  # 20 missed heartbeats: a paused VM or a slow network does not lose its lock


def stale_seconds() -> float:
    text = os.environ.get("SHARDKIT_LOCK_STALE_SECONDS", "")
    try:
        return float(text) if text else STALE_SECONDS
    except ValueError:
        raise OutputError(f"SHARDKIT_LOCK_STALE_SECONDS={text!r}: not a number of seconds") from None


class BucketLock:
    """The lock object at ``url`` (``OUT/.shardkit/lock`` or a node's ``lock.node-K``)."""

    def __init__(self, url: str, out: str, heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.url = url
        self.out = out
        self.heartbeat = heartbeat
        self.token = uuid.uuid4().hex
        self.lost: str | None = None  # who took the lock over, once this holder notices
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.took_over: str | None = None  # the stale holder this acquire replaced

    def acquire(self) -> None:
        for _ in range(3):  # a holder releasing between our create and our read: try again
            if self._create():
                break
            holder = _read(self.url)
            if holder is None:
                continue
            if holder.get("token") == self.token:  # our create went through, its retry found it there
                break
            why = _takeover_reason(holder)
            if why is None:
                raise StateError(
                    f"{self.out}: another build is writing here ({_describe(holder)}); wait for it to finish, or choose another "
                    f"output folder. A lock whose holder stopped is taken over {stale_seconds():.0f} s after its last heartbeat"
                )
            # Of builds that find the same stopped holder, the one that creates this marker replaces
            # its lock; a blind delete would let a second taker delete the first one's new lock.
            marker = f"{self.url}.replaced-{holder.get('token') or holder.get('digest')}"
            if not location.create_once(marker, self._content()):
                raise StateError(f"{self.out}: another build took over the lock of a stopped build just now; wait for it to finish")
            location.remove(self.url)
            if self._create():
                self.took_over = f"{_describe(holder)}: {why}"
                if why != GONE:  # a dead holder on this host is like a released flock: nothing to say
                    warnings.warn(
                        f"{self.out}: took over the lock of a build that stopped ({self.took_over})", ShardkitWarning, stacklevel=2
                    )
                break
        else:
            raise StateError(f"{self.out}: could not take the lock object {self.url}; another build keeps replacing it")
        holder = _read(self.url)
        if holder is None or holder.get("token") != self.token:
            raise OutputError(
                f"{self.url}: this store did not keep the lock this build created (it may ignore conditional writes, "
                "If-None-Match / ifGenerationMatch); shardkit needs them to keep two builds apart"
            )
        self._thread = threading.Thread(target=self._beat, name="shardkit-lock-heartbeat", daemon=True)
        self._thread.start()

    def _create(self) -> bool:
        try:
            return location.create_once(self.url, self._content())
        except FileNotFoundError:  # the first write into OUT: S3 and GCS say so for a missing bucket
            raise OutputError(
                f"{self.out}: no such bucket (or no permission to see it); create it, or check the URL and the credentials"
            ) from None

    def release(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        # Quietly: release runs while an error may be on its way out, and must not replace it. A
        # lock left behind (the store went away) is taken at once by the next build on this host.
        with contextlib.suppress(Exception):
            holder = _read(self.url)
            if holder is not None and holder.get("token") == self.token:
                location.remove(self.url)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                holder = _read(self.url)
                if holder is not None and holder.get("token") != self.token:
                    self.lost = _describe(holder)
                    return
                location.put_bytes(self.url, self._content())
            except Exception:  # a network blip: the next beat tries again, staleness allows many misses
                continue

    def _content(self) -> bytes:
        info: dict[str, Any] = {
            "host": socket.gethostname(),
            "machine": _machine(),
            "pid": os.getpid(),
            "started": _process_start(os.getpid()),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "heartbeat": time.time(),
            "token": self.token,
        }
        return json.dumps(info).encode()

    def __enter__(self) -> BucketLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def live_holders(urls: list[str]) -> list[str]:
    """Descriptions of the holders of ``urls`` that still hold them (not taken over at once, not stale)."""
    return [_describe(h) for h in (_read(u) for u in urls) if h is not None and _takeover_reason(h) is None]


def _read(url: str) -> dict[str, Any] | None:
    try:
        data = location.read_bytes(url)
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(data)
    except ValueError:
        holder = None
    if not isinstance(holder, dict):  # unreadable: treated as stale (it has no heartbeat), known by its bytes
        return {"digest": hashlib.sha256(data).hexdigest()[:16]}
    return holder


def _machine() -> str:
    """This boot of this machine, and this pid namespace: where a pid means the same process."""
    parts = []
    for path in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            if path.endswith("boot_id"):
                with open(path) as f:
                    parts.append(f.read().strip())
            else:
                parts.append(os.readlink(path))
        except OSError:
            parts.append("")
    return ":".join(parts)


def _takeover_reason(holder: dict[str, Any]) -> str | None:
    """Why the lock of ``holder`` may be taken now, or None while it is held."""
    here = holder.get("host") == socket.gethostname() and holder.get("machine") == _machine()
    if here and isinstance(holder.get("pid"), int):
        if _process_start(holder["pid"]) != holder.get("started"):
            return GONE
        if holder["pid"] == os.getpid():
            return None
    beat = holder.get("heartbeat")
    if not isinstance(beat, (int, float)):
        return "its lock object is unreadable"
    age = time.time() - beat
    if age > stale_seconds():
        return f"no heartbeat for {age:.0f} s"
    return None


def _describe(holder: dict[str, Any]) -> str:
    beat = holder.get("heartbeat")
    ago = f", last heartbeat {max(0.0, time.time() - beat):.0f} s ago" if isinstance(beat, (int, float)) else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')}, since {holder.get('since')}{ago}"


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None if it is not running.

    With the pid it tells a running holder from a later process that reuses its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()  # field 22 of stat(5); fields[0] here is field 3
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "running"
