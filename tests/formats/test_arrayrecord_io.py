"""ArrayRecord files: written as readers expect them, walked and read back, damage named in one line."""

from __future__ import annotations

import errno
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest

pytest.importorskip("array_record.python.array_record_module", reason="array-record is the arrayrecord extra")
import pyarrow as pa

from shardkit.errors import CorruptShardError
from shardkit.formats.containers import arrayrecord_io as ario
from shardkit.formats.containers import tfrecord_io
from shardkit.formats.containers.arrayrecord_io import RecordFileReader, RecordFileWriter, looks_like, read_at, walk


def some_records(n: int = 40, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [b""] + [rng.randbytes(rng.randrange(1, 3000)) for _ in range(n - 1)]


def write(path: Path, records: list[bytes]) -> ario.WrittenFile:
    with RecordFileWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
        return writer.close()


@pytest.fixture()
def written(tmp_path: Path) -> tuple[Path, list[bytes]]:
    records = some_records()
    write(tmp_path / "train-00000-of-00001.array_record", records)
    return tmp_path / "train-00000-of-00001.array_record", records


def walked(path: Path) -> tuple[ario.WalkResult, list[bytes]]:
    seen: list[bytes] = []
    result = walk(str(path), lambda index, address, payload: seen.append(bytes(payload)))
    return result, seen


def test_round_trip_counts_and_checksums_the_file(tmp_path: Path) -> None:
    records = some_records()
    path = tmp_path / "a.array_record"
    done = write(path, records)
    data = path.read_bytes()
    assert (done.records, done.file_bytes, done.crc32c) == (len(records), len(data), f"{crc32c.crc32c(data):08x}")
    result, seen = walked(path)
    assert result.ok and seen == records
    assert (result.records, result.file_bytes, result.crc32c) == (done.records, done.file_bytes, done.crc32c)
    assert result.options.startswith("group_size:1,") and "uncompressed" in result.options
    assert looks_like(data[:64]) and not looks_like(data[:63])
    assert read_at(str(path), [39, 0, 7, 7]) == [records[39], records[0], records[7], records[7]]
    assert walk(str(path), limit=5).records == 5


def test_a_batch_writes_the_same_bytes_as_record_by_record(tmp_path: Path) -> None:
    records = some_records(300, seed=1)
    write(tmp_path / "one.array_record", records)
    for name, batch in (("arrow", pa.array(records, type=pa.large_binary())), ("list", records)):
        with RecordFileWriter(str(tmp_path / f"{name}.array_record")) as writer:
            writer.write_batch(batch[:100])
            writer.write_batch(batch[100:])
            assert writer.close().records == 300
        assert (tmp_path / f"{name}.array_record").read_bytes() == (tmp_path / "one.array_record").read_bytes()


def test_no_records_is_a_valid_file(tmp_path: Path) -> None:
    done = write(tmp_path / "none.array_record", [])
    result = walk(str(tmp_path / "none.array_record"))
    assert done.records == result.records == 0 and result.ok


def damage(path: Path, name: str, records: list[bytes]) -> Path:
    data = bytearray(path.read_bytes())
    if name == "payload":
        at = bytes(data).find(records[10])
        data[at + 5] ^= 0x10
    elif name == "postscript":  # the 64 KiB block the footer's offset is read from
        data[len(data) - (1 << 16) + 30] ^= 0x01
    elif name == "signature":
        data[20] ^= 0x01
    elif name.startswith("cut"):
        data = data[: int(name[3:]) if int(name[3:]) >= 0 else len(data) + int(name[3:])]
    elif name == "empty":
        data = bytearray()
    elif name == "random":
        data = bytearray(random.Random(3).randbytes(200_000))
    elif name == "tfrecord":
        data = bytearray(b"".join(tfrecord_io.frame(r) for r in records))  # a TFRecord file named .array_record
    damaged = path.with_name(f"{name}.array_record")
    damaged.write_bytes(data)
    return damaged


@pytest.mark.parametrize(
    ("name", "records_before", "says"),
    [
        ("payload", 10, "record 10: damaged data: chunk data hash mismatch"),
        ("postscript", 0, "damaged or truncated file: cannot read the ArrayRecord footer (chunk header hash mismatch"),
        ("signature", 0, "no Riegeli file signature"),
        ("cut-1", 0, "truncated file: no ArrayRecord footer"),
        ("cut-100", 0, "truncated file: no ArrayRecord footer"),
        ("cut65536", 0, "truncated file: no ArrayRecord footer (65536 bytes"),
        ("cut1000", 0, "truncated file: no ArrayRecord footer"),
        ("cut10", 0, "truncated file: no ArrayRecord footer (10 bytes)"),
        ("empty", 0, "empty file (0 bytes): no records"),
        ("random", 0, "no Riegeli file signature"),
        ("tfrecord", 0, "no Riegeli file signature"),
    ],
)
def test_damage_is_one_line_and_never_fewer_records_silently(
    written: tuple[Path, list[bytes]], name: str, records_before: int, says: str
) -> None:
    path, records = written
    damaged = damage(path, name, records)
    result, seen = walked(damaged)
    assert not result.ok and says in result.describe_error() and "\n" not in result.describe_error()
    assert result.records == records_before and seen == records[:records_before]
    data = damaged.read_bytes()
    assert (result.file_bytes, result.crc32c) == (len(data), f"{crc32c.crc32c(data):08x}")
    with pytest.raises(CorruptShardError, match=f"{damaged.name}: "):
        reader = RecordFileReader(str(damaged))
        reader.read(range(len(reader)))


def test_every_flipped_bit_outside_the_padding_is_found(tmp_path: Path) -> None:
    """Every byte of a small file but the zero padding nobody hashes: the walk stops at a problem
    or reads every record intact (the reader never crashes, never drops records silently)."""
    records = some_records(3, seed=2)
    path = tmp_path / "small.array_record"
    write(path, records)
    data = path.read_bytes()
    used = [i for i in range(len(data)) if data[i]]  # chunks and headers; the zeros between are padding
    flipped = tmp_path / "flipped.array_record"
    found = 0
    for at in used[::4]:
        damaged = bytearray(data)
        damaged[at] ^= 0x08
        flipped.write_bytes(damaged)
        result, seen = walked(flipped)
        if result.ok:
            assert seen == records, at
        else:
            found += 1
            assert seen == records[: result.records] and "\n" not in result.describe_error()
    assert found >= len(used[::4]) * 9 // 10  # the rest: bytes inside headers that no reader needs


def test_reader_is_lazy_picklable_and_checks_its_bounds(written: tuple[Path, list[bytes]]) -> None:
    path, records = written
    reader = RecordFileReader(str(path))
    assert reader._reader is None
    assert len(reader) == len(records) and reader[3] == records[3]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._reader is None and copy.read([5, 1]) == [records[5], records[1]]
    with pytest.raises(IndexError, match="record 40 of"):
        reader[40]
    reader.close()


def test_array_record_and_grain_sources_read_every_record(written: tuple[Path, list[bytes]]) -> None:
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    path, records = written
    with ArrayRecordDataSource([str(path)]) as source:
        assert [source[i] for i in range(len(source))] == records
    grain = pytest.importorskip("grain")
    source = grain.sources.ArrayRecordDataSource([str(path)])
    assert list(grain.MapDataset.source(source)) == records
    shuffled = list(grain.MapDataset.source(RecordFileReader(str(path))).shuffle(seed=0))
    assert sorted(shuffled) == sorted(records) and shuffled != records


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError) as caught:
        RecordFileWriter(str(tmp_path / "nowhere" / "a.array_record"))
    assert caught.value.errno == errno.ENOENT and caught.value.filename.endswith("a.array_record")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_an_os_error_at_close(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        writer = RecordFileWriter(str(small / "a.array_record"))
        writer.write_batch([os.urandom(50_000) for _ in range(40)])  # 2 MB: chunks are written behind write()
        with pytest.raises(OSError) as caught:
            writer.close()
        assert caught.value.errno == errno.ENOSPC and caught.value.strerror == os.strerror(errno.ENOSPC)
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_the_module_imports_without_tensorflow() -> None:
    code = "import sys, shardkit.formats.containers.arrayrecord_io; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


@pytest.mark.slow
def test_grain_worker_processes_read_the_reader(written: tuple[Path, list[bytes]]) -> None:
    """mp_prefetch pickles the dataset (cloudpickle) into spawned processes: each opens its own reader."""
    grain = pytest.importorskip("grain")
    path, records = written
    dataset = grain.MapDataset.source(RecordFileReader(str(path))).shuffle(seed=0).to_iter_dataset()
    iterator = iter(dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))
    try:
        assert sorted(iterator) == sorted(records)
    finally:
        iterator.close()  # type: ignore[attr-defined]
