"""Parquet inputs written the way real tools write them: a Hugging Face Hub export by ``datasets``
itself (its ``Image`` struct and ``ClassLabel`` names in the schema metadata, the Hub's
``data/SPLIT-00000-of-0000N.parquet`` names), and plain tables by pyarrow with several row groups."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

HUB_CLASSES = ["cat", "dog", "fish"]


def png(seed: int, size: int = 6) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_hub_export(root: Path, splits: dict[str, int], shards: int = 1) -> dict[str, list[tuple[bytes, int]]]:
    """``root/data/SPLIT-0000K-of-0000N.parquet`` as ``datasets`` writes an image-classification
    set; returns each split's (image bytes, label) in file order."""
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=HUB_CLASSES)})
    written: dict[str, list[tuple[bytes, int]]] = {}
    (root / "data").mkdir(parents=True, exist_ok=True)
    for split, count in splits.items():
        rows = [(png(hash((split, i)) % 2**32), i % len(HUB_CLASSES)) for i in range(count)]
        written[split] = rows
        per = -(-count // shards)
        for k in range(shards):
            part = rows[k * per : (k + 1) * per]
            images = [{"bytes": data, "path": f"{split}_{k}_{i}.png"} for i, (data, _) in enumerate(part)]
            table = datasets.Dataset.from_dict({"image": images, "label": [label for _, label in part]}, features=features)
            table.to_parquet(str(root / "data" / f"{split}-{k:05d}-of-{shards:05d}.parquet"))
    return written


def write_table(path: Path, columns: dict[str, Any], row_group_size: int) -> None:
    """A Parquet file of ``columns`` (lists of Python values) in row groups of ``row_group_size``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), str(path), row_group_size=row_group_size)
