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
