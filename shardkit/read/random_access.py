"""Random access to a shardkit split from Python, without TensorFlow.

    from shardkit.read.random_access import ShardReader
    ds = ShardReader("shards/", "train")            # a plain sequence: len(ds), ds[i], ds[a:b]
    record = ds[1234]                               # {"image": b"...", "image/height": 240, ...}
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)
    train = grain.MapDataset.source(ds).shuffle(seed=0).batch(32)   # a global shuffle, in Grain

Record ``i`` is read through ``read.shard_records`` (TFRecord: the split's ``.idx`` files, one
seek and one read, both CRCs compared), and the Example is decoded in one pass
(``formats.example_decoder``) with the manifest schema: scalars as Python numbers, fixed
lists and ragged lists as numpy arrays, strings as ``str``; images as bytes or, with
``decode_images=True``, as uint8 arrays. An objects feature ``P`` adds ``P/boxes`` ((N, 4)
float32, ymin, xmin, ymax, xmax) and ``P/classes`` ((N,) int64, places in the class list), and
with ``decode_images=True`` gives its masks as one (N, H, W) uint8 array. File handles are
opened lazily per process, so the object pickles into DataLoader workers. ``out`` may be a URL (``gs://bucket/out``,
``s3://bucket/out``): the ``.idx`` objects are fetched at once, then each record is one ranged
read of its bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from shardkit.errors import ShardkitError
from shardkit.features.base import FeatureKind
from shardkit.features.registry import of_entry
from shardkit.formats.containers.adapter import RecordReader
from shardkit.formats.example_decoder import ExampleDecoder
from shardkit.formats.example_proto import BYTES, FLOAT, INT64, DecodeError, Dtype
from shardkit.output.found import load_output
from shardkit.read.shard_records import open_shards


class ShardReader:
    """A map-style dataset over one split (works as a PyTorch ``Dataset`` and a Grain source; torch is optional)."""

    def __init__(self, out: str, split: str = "train", decode_images: bool = False) -> None:
        output = load_output(out)
        manifest = output.manifest
        if split not in manifest.splits:
            raise ShardkitError(f"{out}: no split {split!r} (splits: {', '.join(manifest.splits)})")
        self.out = out
        self.split = split
        self.decode_images = decode_images
        self.schema = {f["key"]: f for f in manifest.schema}
        # Each feature once, with its config entry, for what its kind adds to a record (objects: boxes, classes).
        configs = manifest.config.get("features", {})
        kinds = {of_entry(f).feature_key(f): of_entry(f) for f in manifest.schema}
        self._features = [(key, kind, configs.get(key, {})) for key, kind in kinds.items() if _adds_to_record(kind)]
        self._lead = next((f["key"] for f in manifest.schema if of_entry(f).leads), None)
        singles = {key: want for key, entry in self.schema.items() if (want := _single(entry, decode_images)) is not None}
        self._decoder = ExampleDecoder(singles)
        self._records: RecordReader = open_shards(out, manifest.splits[split])
        self._starts = [0]
        for count in self._records.counts:
            self._starts.append(self._starts[-1] + count)
        self._length = self._starts.pop()

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, item: int | slice) -> Any:
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(self._length))]
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"record numbers are integers or slices, not {type(item).__name__}")
        index = int(item)
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"record {item} is out of range: {self.split} has {self._length} records")
        return self._decode(self.raw(index), index)

    def _getitems(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Grain's batched read (``SupportsBatchedReadRandomAccessDataSource``): the records, in order."""
        return [self[i] for i in indices]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(self._length):
            yield self[i]

    def raw(self, index: int) -> bytes:
        """The serialized Example of record ``index``, CRC-checked."""
        shard = bisect.bisect_right(self._starts, index) - 1
        return self._records.record(shard, index - self._starts[shard])

    def _decode(self, data: bytes, index: int) -> dict[str, Any]:
        try:
            out, rest = self._decoder.decode(data)
        except DecodeError as exc:
            raise ShardkitError(f"{self.out}: record {index} of {self.split} is not a tf.train.Example ({exc})") from None
        for key in rest:
            dtype, values = out[key]
            entry = self.schema.get(key)
            out[key] = of_entry(entry, dtype).python_value(entry or {}, values, self.decode_images)
        if self._features:
            lead = out.get(self._lead) if self._lead is not None else None
            size = (int(lead.shape[0]), int(lead.shape[1])) if isinstance(lead, np.ndarray) and lead.ndim >= 2 else None
            for key, kind, config in self._features:
                kind.python_record(key, config, out, self.decode_images, size)
        return out

    def close(self) -> None:
        self._records.close()


def _adds_to_record(kind: FeatureKind) -> bool:
    return type(kind).python_record is not FeatureKind.python_record


def _single(entry: Mapping[str, Any], decode_images: bool) -> Dtype | Literal["text"] | None:
    """The wire type whose single value the feature's kind gives as itself (or ``"text"``), or None."""
    kind = of_entry(entry)
    want = kind.python_single(entry, decode_images)
    if want is None or kind.wire not in (BYTES, FLOAT, INT64):
        return None
    return "text" if want == "text" else kind.wire
