"""array_record's own reader as the oracle for ArrayRecord shards: every record of a split, and the
check that a build's ArrayRecord files hold exactly its TFRecord files' records, in the same order."""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from tests.tfread import raw_records, spec_from_manifest

SUFFIX = ".array_record"
has_array_record = importlib.util.find_spec("array_record") is not None
needs_array_record = pytest.mark.skipif(not has_array_record, reason="array-record is the arrayrecord extra (Python >= 3.11)")


def case(*values: str) -> Any:
    """A parametrize case, skipped without the arrayrecord extra where a value names the container."""
    marks = [needs_array_record] if any("arrayrecord" in v for v in values) else []
    return pytest.param(*values, marks=marks)


def array_record_files(out: str, split: str) -> list[str]:
    """The split's ArrayRecord shards on disk, by their naming pattern (not from the manifest under test)."""
    return sorted(glob.glob(os.path.join(out, f"{split}-*-of-*{SUFFIX}")))


def array_records(out: str, split: str) -> list[bytes]:
    """Every record of a split, in shard order, through ``ArrayRecordDataSource`` (what Grain reads)."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    files = array_record_files(out, split)
    assert files, f"no ArrayRecord shards for {split} in {out}"
    source = ArrayRecordDataSource(files)
    return list(source.__getitems__(range(len(source))))


def assert_twins(out: str, splits: tuple[str, ...] = ("train", "val")) -> None:
    """A ``--format tfrecord,arrayrecord`` build: each split's ArrayRecord records are its TFRecord
    records (the same serialized Example bytes, in the same order), and one file of each container per shard."""
    for split in splits:
        tfrecords = raw_records(out, split)
        assert tfrecords, f"no records in {split}"
        assert array_records(out, split) == tfrecords
        names = {os.path.basename(p).removesuffix(SUFFIX) for p in array_record_files(out, split)}
        assert names == {os.path.basename(p).removesuffix(".tfrecord") for p in glob.glob(os.path.join(out, f"{split}-*-of-*.tfrecord"))}


def read_array_split(out: str, split: str) -> list[dict[str, Any]]:
    """``tfread.read_split`` over the ArrayRecord shards: each record parsed by TensorFlow, as {key: numpy value}."""
    import tensorflow as tf

    spec = spec_from_manifest(out)
    records = []
    for raw in array_records(out, split):
        parsed = tf.io.parse_single_example(raw, spec)
        records.append({k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()})
    return records


def shard_bytes(out: str) -> dict[str, bytes]:
    """Every shard file at OUT's top (both containers, and the ``.idx`` sidecars), by name: for byte-for-byte comparisons."""
    return {p.name: p.read_bytes() for p in sorted(Path(out).iterdir()) if "-of-" in p.name and not p.name.startswith(".") and p.is_file()}
