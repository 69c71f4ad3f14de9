#!/usr/bin/env python3
"""What each stage of a build worker costs per image, on one core: where the time goes, and what bounds it.

    python scripts/bench_stages.py [--images 50] [--repeat 5]

Two workloads, as scripts/bench.py builds them: the seed-like one (640x480 JPEG q90 + PNG mask,
flip + random sized crop + brightness/contrast, JPEG q95 + PNG mask out) and a large photo
(4032x3024 by default, JPEG q90 + PNG mask, SmallestMaxSize(512) + flip + brightness, JPEG q90 out). For each
stage: the way a plain script does it (Pillow), and shardkit's way, in milliseconds per image
(the best of ``--repeat`` passes over the images), with the pixels checked equal where both give pixels.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def best_ms(items: list[Any], step: Callable[[Any], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for item in items:
            step(item)
        best = min(best, (time.perf_counter() - started) / len(items))
    return best * 1000


def pillow_decode(data: bytes, mode: str) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im if im.mode == mode else im.convert(mode))


def pillow_encode(array: np.ndarray, fmt: str, **options: Any) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt, **options)
    return buf.getvalue()


def workload(name: str, files: list[tuple[bytes, bytes]], pipeline: list[dict[str, Any]], quality: int, repeat: int) -> None:
    import albumentations as A
    import cv2

    from shardkit.formats import image_codec, image_headers
    from shardkit.formats.containers.tfrecord_io import frame
    from shardkit.formats.example_proto import encode_example
    from shardkit.pipeline.shard.augment import Augmenter, normalize_pipeline
    from shardkit.pipeline.shard.reduced_decode import Downscale, split_leading_downscale

    cv2.setNumThreads(1)
    images = [pillow_decode(j, "RGB") for j, _ in files]
    masks = [pillow_decode(m, "L") for _, m in files]
    assert all(np.array_equal(image_codec.decode(j, "RGB"), i) for (j, _), i in zip(files, images, strict=True))
    assert all(np.array_equal(image_codec.decode(m, "L", True), k) for (_, m), k in zip(files, masks, strict=True))
    normalized = normalize_pipeline(pipeline)
    compose = A.from_dict(normalized)
    augmenter = Augmenter(normalized, [("image", "image"), ("mask", "mask")], "exact")
    outs = [augmenter({"image": i, "mask": k}, n) for n, (i, k) in enumerate(zip(images, masks, strict=True))]
    jpegs = [image_codec.encode(o["image"], "jpeg", quality) for o in outs]
    pngs = [image_codec.encode(o["mask"], "png", 95, mask=True) for o in outs]
    rows: list[tuple[str, float, float | None]] = [
        ("decode image", best_ms([j for j, _ in files], lambda d: pillow_decode(d, "RGB"), repeat),
         best_ms([j for j, _ in files], lambda d: image_codec.decode(d, "RGB"), repeat)),
        ("decode mask", best_ms([m for _, m in files], lambda d: pillow_decode(d, "L"), repeat),
         best_ms([m for _, m in files], lambda d: image_codec.decode(d, "L", True), repeat)),
    ]  # fmt: skip
    split = split_leading_downscale(normalized)
    if split is not None:
        downscale = Downscale(split[0])
        infos = [image_headers.probe(j) for j, _ in files]
        scale = downscale.decode_scale(infos[0])

        def reduced(n: int) -> object:
            array = image_codec.decode(files[n][0], "RGB", info=infos[n], scale=scale)
            return downscale.from_reduced(array, infos[n].height, infos[n].width)

        rows.append((f"decode image at 1/{scale} + resize to target", rows[0][1], best_ms(list(range(len(files))), reduced, repeat)))
    rows += [
        ("augment (albumentations, whole pipeline)", best_ms(list(zip(images, masks, strict=True)),
         lambda p: compose(image=p[0], mask=p[1]), repeat), None),
        (f"encode image JPEG q{quality}", best_ms([o["image"] for o in outs], lambda a: pillow_encode(a, "JPEG", quality=quality), repeat),
         best_ms([o["image"] for o in outs], lambda a: image_codec.encode(a, "jpeg", quality), repeat)),
        ("encode mask PNG: Pillow level 6 (its default) | shardkit (level 1, no filter, RLE)",
         best_ms([o["mask"] for o in outs], lambda a: pillow_encode(a, "PNG"), repeat),
         best_ms([o["mask"] for o in outs], lambda a: image_codec.encode(a, "png", 95, mask=True), repeat)),
        ("encode mask PNG: Pillow level 1", best_ms([o["mask"] for o in outs],
         lambda a: pillow_encode(a, "PNG", compress_level=1), repeat), None),
    ]  # fmt: skip

    def example(n: int) -> bytes:
        return encode_example({"image": ("bytes", [jpegs[n]]), "mask": ("bytes", [pngs[n]]), "image/height": ("int64", [1])})

    records = [example(n) for n in range(len(files))]
    with tempfile.TemporaryFile() as sink:
        rows += [
            ("tf.train.Example encoding", best_ms(list(range(len(files))), example, repeat), None),
            ("TFRecord framing (length + 2 CRC32C)", best_ms(records, frame, repeat), None),
            ("write to a file", best_ms([frame(r) for r in records], sink.write, repeat), None),
        ]
    sizes = {
        "shardkit": [len(p) for p in pngs],
        "Pillow level 1": [len(pillow_encode(o["mask"], "PNG", compress_level=1)) for o in outs],
        "Pillow level 6": [len(pillow_encode(o["mask"], "PNG")) for o in outs],
    }
    print(f"\n{name}: {len(files)} images, {images[0].shape[1]}x{images[0].shape[0]}, ms per image, one core")
    print(f"{'stage':84} {'Pillow / plain':>14} {'shardkit':>9}")
    for stage, plain, ours in rows:
        print(f"{stage:84} {plain:14.2f} {'' if ours is None else f'{ours:9.2f}'}")
    print("mask PNG size (mean): " + ", ".join(f"{name} {np.mean(values) / 1e3:.1f} kB" for name, values in sizes.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=50, help="seed-like images (large photos: a fifth of it, at least 2)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--photo-size", default="4032x3024", metavar="WxH", help="the large photos' size (smaller: a quick check)")
    args = parser.parse_args()

    import bench  # scripts/bench.py: the same data and pipelines

    from shardkit import demo

    with tempfile.TemporaryDirectory() as tmp:
        small = bench.make_data(Path(tmp) / "small", args.images)
        pairs = [(small / "images" / f"{i:06d}.jpg", small / "masks" / f"{i:06d}.png") for i in range(args.images)]
        workload("seed-like", [(j.read_bytes(), m.read_bytes()) for j, m in pairs], bench.PIPELINE, bench.QUALITY, args.repeat)
        count = max(2, args.images // 5)
        width, height = (int(n) for n in args.photo_size.split("x"))
        large = demo.make_photos(Path(tmp) / "large", count, width, height)
        rows = [line.split() for line in (large / "train.txt").read_text().splitlines()]
        files = [((large / j).read_bytes(), (large / m).read_bytes()) for j, m in rows]
        workload("large photos", files, bench.LARGE_PIPELINE, bench.LARGE_QUALITY, args.repeat)


if __name__ == "__main__":
    main()
