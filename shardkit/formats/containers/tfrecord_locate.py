"""Every record of a local, plain TFRecord file found at once: what a reshard's plan keeps of it.

The frames are followed by their length fields alone, one unpack a record; then every length's
CRC is checked at once in NumPy and every payload's CRC with one C call a record, and nothing
after a damaged length is trusted. A damaged payload is handed on and the walk goes on past it
(its length was sound), or stops there. The file is mapped, and what was read is let go of as the
walk goes, so the process holds no more than a window of it. The problems found, and where, are
those ``tfrecord_scan``'s walk finds.
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array

import crc32c
import numpy as np
import numpy.typing as npt

from shardkit.formats.containers.adapter import OnDamaged, ScanResult
from shardkit.formats.containers.masked_crc import length_crcs, mask_all
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE

_LENGTH = struct.Struct("<Q")
_WINDOW = 64 << 20  # bytes of the mapping checked, then let go of, at a time

Located = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int64]", ScanResult]


def locate(path: str, on_damaged: OnDamaged | None = None) -> Located:
    """(frame offsets, payload lengths, what the walk found) of the sound records of ``path``."""
    size = os.path.getsize(path)
    if size == 0:
        return _empty(), _empty(), ScanResult(path, "none", 0, 0, "")
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        starts, end = _frames(mapped, size)
        lengths = _u64_at(mapped, starts) if len(starts) else np.zeros(0, np.uint64)
        sound_lengths = mask_all(length_crcs(lengths.astype(np.int64))) == _u32_at(mapped, starts + 8)
        bad_length = int(np.argmin(sound_lengths)) if not sound_lengths.all() else len(starts)
        capped = np.minimum(lengths, size).astype(np.int64)  # a damaged length may say anything
        whole = starts + HEADER_SIZE + capped + FOOTER_SIZE <= size
        count = min(bad_length, int(np.argmin(whole)) if not whole.all() else len(starts))
        keep, damaged_at = _payloads(mapped, starts[:count], capped[:count], on_damaged)
        error = _stopped(size, starts, capped, count, bad_length, end)
        if damaged_at is not None:  # no on_damaged: the first damaged payload ends the walk
            found = int(np.count_nonzero(keep[:damaged_at]))
            return starts[:damaged_at], capped[:damaged_at], ScanResult(path, "none", found, size, "", "data CRC mismatch", found, int(starts[damaged_at]))
        result = ScanResult(path, "none", int(np.count_nonzero(keep)), size, "")
        if error is not None:
            reason, offset = error
            result = ScanResult(path, "none", result.records, size, "", reason, result.records, offset)
        return starts[:count][keep], capped[:count][keep], result
    finally:
        mapped.close()


def _frames(mapped: mmap.mmap, size: int) -> tuple[npt.NDArray[np.int64], int]:
    """Where each frame starts, following the length fields (checked afterwards); and where the walk ended."""
    starts = array("q")
    add, unpack = starts.append, _LENGTH.unpack_from
    position = 0
    while position + HEADER_SIZE <= size:
        add(position)
        position += unpack(mapped, position)[0] + HEADER_SIZE + FOOTER_SIZE
    return np.frombuffer(starts, np.int64).copy(), position


def _payloads(
    mapped: mmap.mmap, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], on_damaged: OnDamaged | None
) -> tuple[npt.NDArray[np.bool_], int | None]:
    """Which payloads' CRCs hold; with no ``on_damaged``, also the first that does not."""
    view = memoryview(mapped)
    crc = crc32c.crc32c
    keep = np.ones(len(starts), bool)
    done = 0
    while done < len(starts):  # a window at a time: its pages are let go of once checked
        limit = int(np.searchsorted(starts, starts[done] + _WINDOW, side="right"))
        first, last = starts[done:limit].tolist(), (starts[done:limit] + HEADER_SIZE + lengths[done:limit]).tolist()
        computed = np.array([crc(view[a + HEADER_SIZE : b]) for a, b in zip(first, last, strict=True)], np.uint64)
        sound = mask_all(computed) == _u32_at(mapped, np.array(last, np.int64))
        for bad in np.flatnonzero(~sound).tolist():
            keep[done + bad] = False
            if on_damaged is None:
                view.release()
                return keep, done + bad
            on_damaged(first[bad], "data CRC mismatch")
        released = (first[0] // mmap.PAGESIZE) * mmap.PAGESIZE
        mapped.madvise(mmap.MADV_DONTNEED, released, min(last[-1] + FOOTER_SIZE, len(mapped)) - released)
        done = limit
    view.release()
    return keep, None


def _stopped(
    size: int, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], count: int, bad_length: int, end: int
) -> tuple[str, int] | None:
    """Why the walk could not go past its ``count`` sound frames, and at which offset; None: it reached the end."""
    if count < len(starts):
        at = int(starts[count])
        if count == bad_length:
            return "length CRC mismatch (not a TFRecord file, or damaged)", at
        remain = size - at - HEADER_SIZE
        if remain >= lengths[count]:
            return f"truncated record footer ({remain - int(lengths[count])} of 4 bytes)", at
        return f"truncated record (length field says {int(lengths[count])} bytes, {remain} remain)", at
    if end < size:
        return f"truncated record header ({size - end} of 12 bytes)", end
    return None


def _u64_at(mapped: mmap.mmap, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    data = np.frombuffer(mapped, np.uint8)
    return data[offsets[:, None] + np.arange(8)].copy().view("<u8").reshape(-1)


def _u32_at(mapped: mmap.mmap, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    data = np.frombuffer(mapped, np.uint8)
    return data[offsets[:, None] + np.arange(4)].copy().view("<u4").reshape(-1)


def _empty() -> npt.NDArray[np.int64]:
    return np.zeros(0, np.int64)
