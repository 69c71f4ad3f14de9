"""What records hold, from a sample: feature keys, dtypes, shapes and what the bytes look like.

``infer`` walks plain shard files (TFRecord, ArrayRecord), parses the first records by hand and
describes each feature key, including whether records are ``tf.train.Example`` at all: what
``inspect`` shows of foreign files, and the schema a reshard of them records. TensorFlow is never
imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from shardkit.formats.containers import registry
from shardkit.formats.example_proto import BYTES, DecodeError, decode_example, decode_sequence_example, fields
from shardkit.units import plural

EXAMPLE_CHARS = 40


@dataclasses.dataclass
class _KeyStats:
    dtype: str
    present: int = 0
    min_length: int | None = None
    max_length: int | None = None
    looks: set[str] = dataclasses.field(default_factory=set)
    example: str = ""
    dtypes: set[str] = dataclasses.field(default_factory=set)

    def add(self, dtype: str, values: Sequence[Any]) -> None:
        self.present += 1
        self.dtypes.add(dtype)
        n = len(values)
        self.min_length = n if self.min_length is None else min(self.min_length, n)
        self.max_length = n if self.max_length is None else max(self.max_length, n)
        if dtype == BYTES:
            for value in values[:4]:
                self.looks.add(sniff(value))
        if not self.example and n:
            self.example = _show(values)

    def to_dict(self, records: int) -> dict[str, Any]:
        dtype = self.dtype if len(self.dtypes) <= 1 else "mixed(" + ",".join(sorted(self.dtypes)) + ")"
        fixed = self.min_length == self.max_length
        return {
            "dtype": dtype,
            "shape": ([] if self.min_length == 1 else [self.min_length]) if fixed else None,
            "ragged": not fixed,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "present": self.present,
            "optional": self.present < records,
            "looks_like": sorted(self.looks - {""}),
            "example": self.example,
        }


def sniff(value: bytes) -> str:
    if value[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if value[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if not value:
        return ""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    return "text" if text.isprintable() or all(c.isprintable() or c in "\t\r\n" for c in text) else "binary"


def _show(values: Sequence[Any]) -> str:
    first = values[0]
    if isinstance(first, bytes):
        shown = repr(first[:EXAMPLE_CHARS]) + (f"... ({plural(len(first), 'byte')})" if len(first) > EXAMPLE_CHARS else "")
    else:
        shown = repr(first)
    more = f" +{len(values) - 1} more" if len(values) > 1 else ""
    return shown + more


def _classify(data: bytes) -> tuple[str, Any]:
    """('example', features) | ('sequence_example', (context, lists)) | ('other', reason)."""
    try:
        top = fields(data, 0, len(data))
    except DecodeError as exc:
        return "other", f"not a protocol buffer ({exc})"
    numbers = {field for field, _, _ in top}
    if not numbers <= {1, 2} or any(wire != 2 for _, wire, _ in top):
        return "other", "a protocol buffer, but not a tf.train.Example"
    if 2 in numbers:
        try:
            return "sequence_example", decode_sequence_example(data)
        except DecodeError as exc:
            return "other", f"not a SequenceExample ({exc})"
    try:
        return "example", decode_example(data)
    except DecodeError as exc:
        return "other", f"not a tf.train.Example ({exc})"


def infer(paths: Sequence[str], limit: int | None = 100, compression: str = "auto") -> dict[str, Any]:
    """Sample records from plain shard files (TFRecord, ArrayRecord) and describe what they hold."""
    kinds: dict[str, int] = {}
    keys: dict[str, _KeyStats] = {}
    lists: dict[str, _KeyStats] = {}
    other_reasons: list[str] = []
    files: list[dict[str, Any]] = []
    seen = 0

    def on_record(index: int, offset: int, payload: memoryview) -> None:
        nonlocal seen
        seen += 1
        kind, value = _classify(bytes(payload))
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "example":
            for key, (dtype, values) in value.items():
                keys.setdefault(key, _KeyStats(dtype)).add(dtype, values)
        elif kind == "sequence_example":
            context, steps = value
            for key, (dtype, values) in context.items():
                keys.setdefault(key, _KeyStats(dtype)).add(dtype, values)
            for key, items in steps.items():
                dtype = items[0][0] if items else "bytes"
                lists.setdefault(key, _KeyStats(dtype)).add(dtype, [v for _, vs in items for v in vs][:1] * len(items))
        elif len(other_reasons) < 3:
            starts = bytes(payload[:8]).hex()
            other_reasons.append(f"record {index} at byte {offset}: {value} ({plural(len(payload), 'byte')}, starts {starts})")

    for path in paths:
        remaining = None if limit is None else limit - seen
        if remaining is not None and remaining <= 0:
            break
        result = registry.of_file(path, compression).walk(path, on_record, limit=remaining, checksum=False)
        problem = result.describe_error() or None
        files.append({"path": path, "compression": result.compression, "scanned": result.records, "problem": problem})
    return {
        "files": files,
        "records_scanned": seen,
        "limited_to": limit,
        "kinds": kinds,
        "features": {k: v.to_dict(kinds.get("example", 0) + kinds.get("sequence_example", 0)) for k, v in sorted(keys.items())},
        "feature_lists": {
            k: v.to_dict(kinds.get("sequence_example", 0)) | {"steps": [v.min_length, v.max_length]} for k, v in sorted(lists.items())
        },
        "not_examples": other_reasons,
    }
