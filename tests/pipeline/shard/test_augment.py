from __future__ import annotations

import numpy as np

from shardkit.pipeline.shard.augment import Augmenter, normalize_pipeline, pin_native_threads


def test_pin_native_threads_and_restore() -> None:
    import cv2

    cv2.setNumThreads(2)
    restore = pin_native_threads()
    assert cv2.getNumThreads() == 1
    restore()
    assert cv2.getNumThreads() == 2


def test_geometry_moves_image_and_masks_together_and_seed_decides() -> None:
    pipeline = normalize_pipeline(
        [{"__class_fullname__": "HorizontalFlip", "p": 0.5}, {"__class_fullname__": "RandomBrightnessContrast", "p": 1.0}]
    )
    augment = Augmenter(pipeline, [("image", "image"), ("mask", "mask"), ("edges", "mask")])
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, size=(8, 10, 3), dtype=np.uint8)
    mask = np.tile(np.arange(10, dtype=np.uint8), (8, 1))
    outs = {seed: augment({"image": image, "mask": mask, "edges": mask * 2}, seed) for seed in range(12)}
    flipped = [s for s, o in outs.items() if np.array_equal(o["mask"], mask[:, ::-1])]
    kept = [s for s, o in outs.items() if np.array_equal(o["mask"], mask)]
    assert flipped and kept and len(flipped) + len(kept) == 12  # masks only move, never change value
    for out in outs.values():
        assert np.array_equal(out["edges"], out["mask"] * 2)  # the second mask follows the first
    again = augment({"image": image, "mask": mask, "edges": mask * 2}, 5)
    assert all(np.array_equal(again[k], outs[5][k]) for k in again)
