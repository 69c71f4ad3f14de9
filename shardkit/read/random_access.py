"""Random access to a shardkit split from Python, without TensorFlow.

    from shardkit.read.random_access import ShardReader
    ds = ShardReader("shards/", "train")            # a plain sequence: len(ds), ds[i], ds[a:b]
    record = ds[1234]                               # {"image": b"...", "image/height": 240, ...}
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)

Record ``i`` is found through the split's ``.idx`` files (one seek, one read), its CRCs are
checked, and the Example is decoded with the manifest schema: scalars as Python numbers, fixed
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
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from shardkit.errors import CorruptShardError, ShardkitError
from shardkit.features.registry import of_entry
from shardkit.formats.containers.idx_sidecar import parse_index, read_index
from shardkit.formats.containers.masked_crc import masked_crc
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE
from shardkit.formats.containers.tfrecord_shards import TFRecordShards
from shardkit.formats.example_proto import DecodeError, decode_example
from shardkit.output.found import load_output
from shardkit.output.manifest import ShardEntry
from shardkit.storage import location

_HEADER = struct.Struct("<QI")


class ShardReader:
    """A map-style dataset over one split (works as a PyTorch ``Dataset``; torch is optional)."""

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
        self._features = [(key, kind, configs.get(key, {})) for key, kind in kinds.items()]
        self._lead = next((f["key"] for f in manifest.schema if of_entry(f).leads), None)
        self._shards: list[tuple[str, list[tuple[int, int]]]] = []
        self._starts: list[int] = []
        total = 0
        shards = manifest.splits[split].shards
        self._remote = location.is_url(out)
        where = [(shard, location.join(out, shard.name), _index_path(out, shard)) for shard in shards]
        fetched = location.read_many([index for _, _, index in where]) if self._remote else {}  # every index at once
        self._sizes: list[int] = []  # the manifest's byte counts: a stale index never reads past an object's end
        for shard, path, index_path in where:
            if self._remote:
                entries = _parse_fetched(index_path, fetched[index_path], f"{path}: no index object ({_index_hint(out, shard)})")
            else:
                if not os.path.exists(index_path):
                    raise ShardkitError(f"{path}: no index file ({_index_hint(out, shard)})")
                entries = read_index(index_path)
            if len(entries) != shard.records:
                raise ShardkitError(f"{index_path}: lists {len(entries)} records, the manifest says {shard.records}")
            self._shards.append((path, entries))
            self._sizes.append(shard.bytes)
            self._starts.append(total)
            total += len(entries)
        self._length = total
        self._files: dict[str, int] = {}
        self._pid = os.getpid()

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

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(self._length):
            yield self[i]

    def raw(self, index: int) -> bytes:
        """The serialized Example of record ``index``, CRC-checked."""
        shard = bisect.bisect_right(self._starts, index) - 1
        path, entries = self._shards[shard]
        offset, length = entries[index - self._starts[shard]]
        if self._remote:  # one ranged read; the filesystem's client is safe from threads
            end = offset + length
            framed = location.read_bytes(path, offset, end) if 0 <= offset < end <= self._sizes[shard] else b""
        else:
            framed = os.pread(self._fd(path), length, offset)  # no shared file position: safe from threads
        if len(framed) != length or length < HEADER_SIZE + FOOTER_SIZE:
            raise CorruptShardError(path, "record runs past the end of the file (stale index?)", index, offset)
        data_length, length_crc = _HEADER.unpack_from(framed)
        if masked_crc(framed[:8]) != length_crc or HEADER_SIZE + data_length + FOOTER_SIZE != length:
            raise CorruptShardError(path, "the index does not point at a record here (stale index?)", index, offset)
        data = bytes(framed[HEADER_SIZE : HEADER_SIZE + data_length])
        if masked_crc(data) != struct.unpack_from("<I", framed, HEADER_SIZE + data_length)[0]:
            raise CorruptShardError(path, "data CRC mismatch", index, offset)
        return data

    def _fd(self, path: str) -> int:
        if self._pid != os.getpid():  # forked into a DataLoader worker: open its own descriptors
            self._files, self._pid = {}, os.getpid()
        fd = self._files.get(path)
        if fd is None:
            fd = self._files.setdefault(path, os.open(path, os.O_RDONLY))
        return int(fd)

    def _decode(self, data: bytes, index: int) -> dict[str, Any]:
        try:
            features = decode_example(data)
        except DecodeError as exc:
            raise ShardkitError(f"{self.out}: record {index} of {self.split} is not a tf.train.Example ({exc})") from None
        out: dict[str, Any] = {}
        for key, (dtype, values) in features.items():
            entry = self.schema.get(key)
            out[key] = of_entry(entry, dtype).python_value(entry or {}, values, self.decode_images)
        lead = out.get(self._lead) if self._lead is not None else None
        size = (int(lead.shape[0]), int(lead.shape[1])) if isinstance(lead, np.ndarray) and lead.ndim >= 2 else None
        for key, kind, config in self._features:
            kind.python_record(key, config, out, self.decode_images, size)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_files"] = {}
        return state

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files = {}


def _index_hint(out: str, shard: ShardEntry) -> str:
    return "GZIP shards cannot be indexed" if shard.name.endswith(".gz") else f"run: shardkit index {out}"


def _index_path(out: str, shard: ShardEntry) -> str:
    """The index the manifest lists, or where ``shardkit index`` writes one for a shard built without."""
    return location.join(out, shard.index or TFRecordShards().owned_sidecars(shard.name)[0])


def _parse_fetched(index_path: str, data: bytes | None, missing: str) -> list[tuple[int, int]]:
    if data is None:
        raise ShardkitError(missing)
    try:
        return parse_index(index_path, data.decode("ascii").splitlines())
    except UnicodeDecodeError as exc:
        raise ShardkitError(f"{index_path}: cannot read the index: {exc}") from None
