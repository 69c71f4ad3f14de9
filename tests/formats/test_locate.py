"""``locate`` and ``read_located``, the containers' side of a reshard: every sound record found once,
read back byte for byte in any order, and a damaged one handed on (or stopping the walk) by place."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from shardkit.formats.containers import registry, tfrecord_io, tfrecord_locate
from tests.arread import needs_array_record
from tests.formats.test_arrayrecord_io import damage, write


def _records(n: int = 60) -> list[bytes]:
    rng = random.Random(7)
    return (
        [b""] + [rng.randbytes(rng.randrange(1, 5000)) for _ in range(n - 2)] + [rng.randbytes(9 << 20)]
    )  # one over the walk's 8 MB buffer


def _located(path: Path, name: str, skip: bool) -> tuple[list[tuple[int, int]], list[tuple[int, str]], str | None]:
    damaged: list[tuple[int, str]] = []
    locators, lengths, result = registry.named(name).locate(str(path), (lambda at, why: damaged.append((at, why))) if skip else None)
    assert result.records == len(locators)
    return list(zip(locators.tolist(), lengths.tolist(), strict=True)), damaged, result.error


def _read(path: Path, name: str, found: list[tuple[int, int]], order: list[int]) -> list[bytes]:
    reader = registry.named(name).read_located(str(path))
    try:
        return reader.read([found[i][0] for i in order], [found[i][1] for i in order])
    finally:
        reader.close()


def test_tfrecord_records_are_found_by_offset_and_read_in_any_order(tmp_path: Path) -> None:
    records = _records()
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"".join(tfrecord_io.frame(r) for r in records))
    found, damaged, error = _located(path, "tfrecord", skip=True)
    assert error is None and not damaged
    assert [n for _, n in found] == [len(r) for r in records]
    assert found[1][0] == tfrecord_io.HEADER_SIZE + tfrecord_io.FOOTER_SIZE  # after the empty record's frame
    order = list(range(len(records)))[::-1]
    assert _read(path, "tfrecord", found, order) == [records[i] for i in order]


@pytest.mark.parametrize("which", [5, 59])  # a small record, and the one over the buffer
def test_a_tfrecord_with_a_damaged_payload_is_walked_past_only_when_asked(tmp_path: Path, which: int) -> None:
    records = _records()
    frames = [tfrecord_io.frame(r) for r in records]
    data = bytearray(b"".join(frames))
    offset = sum(len(f) for f in frames[:which])
    data[offset + tfrecord_io.HEADER_SIZE + 3] ^= 0x40
    path = tmp_path / "a.tfrecord"
    path.write_bytes(data)

    found, damaged, error = _located(path, "tfrecord", skip=False)
    assert len(found) == which and error == "data CRC mismatch"

    found, damaged, error = _located(path, "tfrecord", skip=True)
    assert error is None and damaged == [(offset, "data CRC mismatch")]
    assert _read(path, "tfrecord", found, list(range(len(found)))) == records[:which] + records[which + 1 :]


def test_a_damaged_length_ends_the_walk_whatever_is_asked(tmp_path: Path) -> None:
    records = _records(20)[:-1]
    frames = [tfrecord_io.frame(r) for r in records]
    data = bytearray(b"".join(frames))
    offset = sum(len(f) for f in frames[:7])
    data[offset + 1] ^= 0x01
    path = tmp_path / "a.tfrecord"
    path.write_bytes(data)
    found, damaged, error = _located(path, "tfrecord", skip=True)
    assert len(found) == 7 and not damaged and error is not None and "length CRC" in error


@needs_array_record
def test_arrayrecord_records_are_found_by_number_and_a_damaged_one_walked_past(tmp_path: Path) -> None:
    records = _records(40)[:-1]
    path = tmp_path / "a.array_record"
    write(path, records)
    found, damaged, error = _located(path, "arrayrecord", skip=True)
    assert error is None and not damaged and found == [(i, len(r)) for i, r in enumerate(records)]
    assert _read(path, "arrayrecord", found, [3, 0, 38]) == [records[3], records[0], records[38]]

    broken = damage(path, "payload", records)  # record 10's chunk
    found, damaged, error = _located(broken, "arrayrecord", skip=False)
    assert len(found) == 10 and error is not None and "damaged data" in error
    found, damaged, error = _located(broken, "arrayrecord", skip=True)
    assert [at for at, _ in damaged] == [10] and error is None
    assert _read(broken, "arrayrecord", found, list(range(len(found)))) == records[:10] + records[11:]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"", ("tfrecord", "none")),
        (b"\x1f\x8b\x08\x00", ("tfrecord", "gzip")),
        (b"\xff\xd8\xff\xe0JFIF", None),
        (b"hello, world\n" * 5, None),
    ],
)
def test_content_tells_the_container(head: bytes, expected: tuple[str, str] | None) -> None:
    found = registry.recognised(head)
    assert (None if found is None else (found[0].name, found[1])) == expected


def test_a_tfrecord_header_is_recognised_whatever_the_name() -> None:
    found = registry.recognised(tfrecord_io.frame(b"x" * 30)[:64])
    assert found is not None and (found[0].name, found[1]) == ("tfrecord", "none")


@pytest.mark.parametrize("window", [64 << 20, 1000])  # one window, and many (a window is 64 MB)
def test_locate_finds_what_the_checking_walk_finds_wherever_a_file_is_damaged(
    tmp_path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flipped bytes anywhere and cuts at any length: the same sound records, the same first
    problem at the same offset as ``verify``'s walk (``tfrecord_scan``)."""
    monkeypatch.setattr(tfrecord_locate, "_WINDOW", window)
    rng = random.Random(11)
    records = [rng.randbytes(rng.randrange(0, 300)) for _ in range(25)]
    clean = b"".join(tfrecord_io.frame(r) for r in records)
    container = registry.named("tfrecord")
    cases = [bytes(clean[:cut]) for cut in range(0, len(clean), 37)]
    for _ in range(150):
        data = bytearray(clean)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        cases.append(bytes(data))
    path = tmp_path / "a.tfrecord"
    for data in cases:
        path.write_bytes(data)
        walked = container.walk(str(path), checksum=False)
        _, lengths, found = container.locate(str(path))
        assert (found.records, found.error_offset) == (walked.records, walked.error_offset), (found, walked)
        assert (found.error or "").split(" (")[0] == (walked.error or "").split(" (")[0] or (not data and found.error is None)
        assert lengths.tolist() == [len(r) for r in records[: walked.records]]


def test_an_empty_tfrecord_file_holds_no_record_and_no_problem(tmp_path: Path) -> None:
    """TensorFlow reads a 0-byte TFRecord file as no records: so does a reshard (one such file among its inputs stopped it)."""
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    assert _located(path, "tfrecord", skip=False) == ([], [], None)
