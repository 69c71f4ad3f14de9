"""The local pool's processes: forked workers are safe from what the parent process did before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

# A notebook that used OpenCV (a preview, an image resized with cv2) before it builds: OpenCV's
# thread pool is running in the parent when the build's pool forks its workers.
AFTER_OPENCV = """
import sys
import cv2, numpy as np
import shardkit
from shardkit import demo

cv2.resize(np.zeros((2000, 2000, 3), np.uint8), (1000, 1000))  # big enough to run on OpenCV's threads
data = demo.make_segmentation(sys.argv[1] + "/data", train=8, val=0, width=64, height=48)
with open(sys.argv[1] + "/config.yaml", "w") as f:
    f.write("features: {image: {kind: image, column: 0}, mask: {kind: mask, column: 1}}\\n"
            "augment: {copies: 1, pipeline: [{__class_fullname__: HorizontalFlip, p: 0.5}]}\\n")
result = shardkit.build([data], sys.argv[1] + "/out", config=sys.argv[1] + "/config.yaml", workers=2, records_per_shard=2, progress=False)
cv2.resize(np.zeros((2000, 2000, 3), np.uint8), (1000, 1000))  # and OpenCV still works here after it
print(result.records, cv2.getNumThreads() > 1)
"""


def test_a_forked_pool_after_the_parent_used_opencv_does_not_hang(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AFTER_OPENCV, str(tmp_path)], capture_output=True, text=True, timeout=180, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "True"]  # every record, and the parent's threads given back


def test_the_dask_client_drops_only_distributeds_cancel_name_error_traceback() -> None:
    """A signal that stops a Dask client call at one moment makes distributed's ``sync`` cancel read
    a ``future`` not yet assigned: Tornado logged a NameError traceback under shardkit's own "interrupted"
    line (seen once in CI). That record is dropped; any other error the event loop logs is kept."""
    import logging

    from shardkit.pipeline.executors import dask_executor

    dask_executor._quiet_sync_cancel()
    dask_executor._quiet_sync_cancel()  # once per process, however many builds
    logger = logging.getLogger("tornado.application")
    assert logger.filters.count(dask_executor._SYNC_CANCEL) == 1

    def record(error: BaseException, callback: str) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            import sys

            return logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "Exception in callback %r", (callback,), sys.exc_info())

    cancel = "functools.partial(<function sync.<locals>.cancel at 0x7f419c671300>)"
    name_error = NameError("cannot access free variable 'future' where it is not associated with a value in enclosing scope")
    assert not logger.filter(record(name_error, cancel))
    assert logger.filter(record(ValueError("a real failure"), cancel))
    assert logger.filter(record(name_error, "functools.partial(<function other at 0x1>)"))
