"""TensorFlow's masked CRC32C, the checksum in every TFRecord frame: for one value, and for many at once.

TFRecord stores ``mask(crc32c(bytes))`` rather than the CRC itself (a CRC of data that holds CRCs
is weak, so TensorFlow rotates it right by 15 bits and adds a constant). The one formula lives
here; the framing writer, the walk, the random reader and the batch framer all use it.
"""

from __future__ import annotations

import functools

import crc32c
import numpy as np
import numpy.typing as npt

MASK_DELTA = 0xA282EAD8


def mask(crc: int) -> int:
    """The masked form of a CRC32C value: rotate right by 15 bits and add ``MASK_DELTA``."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def masked_crc(data: bytes | bytearray | memoryview) -> int:
    """TensorFlow's masked CRC32C of ``data``."""
    return mask(crc32c.crc32c(data))


def mask_all(crcs: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
    """``mask`` of each value, as little-endian uint32s ready to be written."""
    return ((((crcs >> 15) | (crcs << 17)) + MASK_DELTA) & 0xFFFFFFFF).astype("<u4")


def length_crcs(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """CRC32C (unmasked) of each length's eight little-endian bytes, without a call per record.

    For messages of one length CRC32C is affine: the CRC of the bytes is the CRC of eight zero
    bytes, XOR each byte's own contribution at its position, looked up in a table.
    """
    crcs = np.full(len(lengths), crc32c.crc32c(bytes(8)), dtype=np.uint64)
    columns = lengths.astype("<u8").view(np.uint8).reshape(len(lengths), 8)
    for position, table in enumerate(_length_crc_tables()):
        crcs ^= table[columns[:, position]]
    return crcs


@functools.cache
def _length_crc_tables() -> npt.NDArray[np.uint64]:
    """Per byte position, what each byte value there changes in the CRC of eight zero bytes."""
    zeros = crc32c.crc32c(bytes(8))
    table = [[crc32c.crc32c(bytes(at) + bytes([byte]) + bytes(7 - at)) ^ zeros for byte in range(256)] for at in range(8)]
    return np.array(table, dtype=np.uint64)
