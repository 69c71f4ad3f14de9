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

from shardkit.formats.containers.adapter import Located, OnDamaged, ScanResult
from shardkit.formats.containers.masked_crc import length_crcs, mask_all
from shardkit.formats.containers.tfrecord_io import FOOTER_SIZE, HEADER_SIZE

_LENGTH = struct.Struct("<Q")
_WINDOW = 64 << 20  # bytes of the mapping checked, then let go of, at a time


def locate(path: str, on_damaged: OnDamaged | None = None) -> Located:
    """(frame offsets, payload lengths, what the walk found) of the sound records of ``path``."""
    size = os.path.getsize(path)
    if size == 0:
        return _empty(), _empty(), ScanResult(path, "none", 0, 0, "")
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    kept_starts: list[npt.NDArray[np.int64]] = []
    kept_lengths: list[npt.NDArray[np.int64]] = []
    found = 0
    try:
        position = 0
        while position + HEADER_SIZE <= size:  # a window at a time: its pages are let go of once checked
            window = position
            starts, position = _frames(mapped, size, position, position + _WINDOW)
            lengths = _u64_at(mapped, starts)
            sound_lengths = mask_all(length_crcs(lengths.astype(np.int64))) == _u32_at(mapped, starts + 8)
            capped = np.minimum(lengths, size).astype(np.int64)  # a damaged length may say anything
            whole = starts + HEADER_SIZE + capped + FOOTER_SIZE <= size
            sound = sound_lengths & whole
            count = int(np.argmin(sound)) if not sound.all() else len(starts)
            keep, damaged_at = _payloads(mapped, starts[:count], capped[:count], on_damaged)
            if damaged_at is not None:  # no on_damaged: the first damaged payload ends the walk
                at = found + damaged_at
                kept_starts.append(starts[:damaged_at])
                kept_lengths.append(capped[:damaged_at])
                return (
                    _joined(kept_starts),
                    _joined(kept_lengths),
                    ScanResult(path, "none", at, size, "", "data CRC mismatch", at, int(starts[damaged_at])),
                )
            kept_starts.append(starts[:count][keep])
            kept_lengths.append(capped[:count][keep])
            found += int(np.count_nonzero(keep))
            if count < len(starts):
                reason = _broken(size, int(starts[count]), int(capped[count]), bool(sound_lengths[count]))
                return (
                    _joined(kept_starts),
                    _joined(kept_lengths),
                    ScanResult(path, "none", found, size, "", reason, found, int(starts[count])),
                )
            released = window - window % mmap.PAGESIZE  # madvise takes whole pages
            mapped.madvise(mmap.MADV_DONTNEED, released, min(position, size) - released)
        result = ScanResult(path, "none", found, size, "")
        if position < size:
            result = ScanResult(path, "none", found, size, "", f"truncated record header ({size - position} of 12 bytes)", found, position)
        return _joined(kept_starts), _joined(kept_lengths), result
    finally:
        mapped.close()


def _frames(mapped: mmap.mmap, size: int, position: int, window_end: int) -> tuple[npt.NDArray[np.int64], int]:
    """Where each frame from ``position`` on starts, following the length fields (checked afterwards),
    until the window ends; and where the next frame would start."""
    starts = array("q")
    add, unpack = starts.append, _LENGTH.unpack_from
    while position + HEADER_SIZE <= size and position < window_end:
        add(position)
        position += unpack(mapped, position)[0] + HEADER_SIZE + FOOTER_SIZE
    return np.frombuffer(starts, np.int64).copy(), position


def _payloads(
    mapped: mmap.mmap, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], on_damaged: OnDamaged | None
) -> tuple[npt.NDArray[np.bool_], int | None]:
    """Which payloads' CRCs hold; with no ``on_damaged``, also the first that does not."""
    keep = np.ones(len(starts), bool)
    if not len(starts):
        return keep, None
    crc = crc32c.crc32c
    first, last = starts.tolist(), (starts + HEADER_SIZE + lengths).tolist()
    with memoryview(mapped) as view:
        computed = np.array([crc(view[a + HEADER_SIZE : b]) for a, b in zip(first, last, strict=True)], np.uint64)
    sound = mask_all(computed) == _u32_at(mapped, np.array(last, np.int64))
    for bad in np.flatnonzero(~sound).tolist():
        keep[bad] = False
        if on_damaged is None:
            return keep, bad
        on_damaged(first[bad], "data CRC mismatch")
    return keep, None


def _broken(size: int, at: int, length: int, sound_length: bool) -> str:
    """Why the walk cannot go past the frame at ``at``: its length field, or the file ending inside it."""
    if not sound_length:
        return "length CRC mismatch (not a TFRecord file, or damaged)"
    remain = size - at - HEADER_SIZE
    if remain >= length:
        return f"truncated record footer ({remain - length} of 4 bytes)"
    return f"truncated record (length field says {length} bytes, {remain} remain)"


def _joined(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else _empty()


def _u64_at(mapped: mmap.mmap, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    data = np.frombuffer(mapped, np.uint8)
    found: npt.NDArray[np.uint64] = data[offsets[:, None] + np.arange(8)].copy().view("<u8").reshape(-1)
    return found


def _u32_at(mapped: mmap.mmap, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    data = np.frombuffer(mapped, np.uint8)
    found: npt.NDArray[np.uint32] = data[offsets[:, None] + np.arange(4)].copy().view("<u4").reshape(-1)
    return found


def _empty() -> npt.NDArray[np.int64]:
    return np.zeros(0, np.int64)
