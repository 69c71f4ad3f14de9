"""Shards other tools wrote, for reshard's tests: TFRecord files by ``tf.io.TFRecordWriter`` (plain
or GZIP), ArrayRecord files by array_record's own ``ArrayRecordWriter``, each record a
``tf.train.Example`` with a distinct ``id``; and the outputs read back by TensorFlow and array_record."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from tests.tfread import raw_records


def example(i: int, size: int = 0) -> bytes:
    """A serialized Example: ``id`` ``i`` and ``size`` (or ``i % 23``) bytes of text."""
    import tensorflow as tf

    text = bytes([97 + i % 26]) * (size or i % 23)
    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()  # type: ignore[no-any-return]


def examples(ids: Iterable[int], size: int = 0) -> list[bytes]:
    return [example(i, size) for i in ids]


def write_tfrecords(path: Path, records: Sequence[bytes], gzip: bool = False) -> Path:
    """``records`` as TensorFlow writes them (``options="GZIP"`` with ``gzip``), whatever ``path``'s name says."""
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP" if gzip else None) as writer:
        for record in records:
            writer.write(record)
    return path


def write_array_records(path: Path, records: Sequence[bytes]) -> Path:
    """``records`` as array_record's own writer writes them (Grain's and TFDS' default options)."""
    from array_record.python.array_record_module import ArrayRecordWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = ArrayRecordWriter(str(path), "group_size:1")
    for record in records:
        writer.write(record)
    writer.close()
    return path


def offsets(records: Sequence[bytes]) -> list[int]:
    """Byte offset of each record's frame in an uncompressed TFRecord file of ``records``."""
    found, at = [], 0
    for record in records:
        found.append(at)
        at += len(record) + 16
    return found


def ids(records: Iterable[bytes]) -> list[int]:
    import tensorflow as tf

    return [tf.train.Example.FromString(r).features.feature["id"].int64_list.value[0] for r in records]


def shard_records(out: Path) -> dict[str, list[bytes]]:
    """Every TFRecord shard file at OUT's top -> its records, as TensorFlow reads them."""
    import tensorflow as tf

    found = {}
    for path in sorted(out.glob("*-of-*.tfrecord*")):
        if path.name.endswith(".idx"):
            continue
        compression = "GZIP" if path.name.endswith(".gz") else ""
        found[path.name] = [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]
    return found


def split_records(out: Path, split: str) -> list[bytes]:
    return raw_records(str(out), split)


def same_multiset(a: Iterable[bytes], b: Iterable[bytes]) -> bool:
    return Counter(a) == Counter(b)


def sha256s(out: Path) -> dict[str, str]:
    """Every shard file at OUT's top (all containers and sidecars) -> its SHA-256."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.iterdir())
        if "-of-" in p.name and not p.name.startswith(".") and p.is_file()
    }
