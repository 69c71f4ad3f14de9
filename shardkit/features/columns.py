"""Arrow columns as the kinds screen them: a list column's values with the row each belongs to,
and which Arrow types are plain numbers or texts. pyarrow is imported by the caller's caller
(a table input); these helpers import it on use."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_list(column: Any) -> bool:
    import pyarrow as pa

    kind = column.type
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind))


def values_and_rows(column: Any) -> tuple[Any, np.ndarray]:
    """A column's values, a list column's flattened, and the row index of each."""
    import pyarrow.compute as pc

    if is_list(column):
        return column.flatten(), pc.list_parent_indices(column).to_numpy()
    return column, np.arange(len(column))


def is_number(column: Any) -> bool:
    import pyarrow as pa

    kind = column.type
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def is_integer(column: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(column.type))


def is_text(column: Any) -> bool:
    import pyarrow as pa

    kind = column.type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


# Texts that Python's int() and float() read as Arrow's cast reads them: Arrow also takes
# "0x1F" and "nan(1)", Python also "+5" (an integer), "1_000" and digits of other scripts.
_INTEGER = r"^-?[0-9]{1,18}$"
_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


_DIGITS = b"0123456789-"
_DECIMALS = _DIGITS + b"+.eE"


def parsed_text(column: Any, integer: bool) -> tuple[Any, np.ndarray]:
    """A text column's numbers, cast in Arrow (int64, or float64), 0 where a value is not plain
    decimal digits; and which values those are (NumPy mask), for ``typed`` to read one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.int64() if integer else pa.float64()
    if column.null_count == 0 and not _text_bytes(column).tobytes().translate(None, _DIGITS if integer else _DECIMALS):
        # Over these characters Arrow's grammar is Python's: a cast that succeeds read each as Python does.
        try:
            return pc.cast(column, kind), np.zeros(len(column), dtype=bool)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # '1e', '--1', past int64: told apart below
            pass
    plain = pc.match_substring_regex(column, _INTEGER if integer else _DECIMAL).fill_null(False)
    other = ~np.asarray(plain.to_numpy(zero_copy_only=False))
    if not other.any():
        return pc.cast(column, kind), other
    return pc.cast(pc.if_else(plain, column, pa.scalar("0", column.type)), kind), other


def _text_bytes(column: Any) -> np.ndarray:
    """The UTF-8 bytes of a (string or large_string) column's values, end to end."""
    import pyarrow as pa

    _, offsets, data = column.buffers()
    kind = np.int64 if pa.types.is_large_string(column.type) else np.int32
    bounds = np.frombuffer(offsets, dtype=kind)[column.offset : column.offset + len(column) + 1]
    if data is None or not len(bounds):
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8)[int(bounds[0]) : int(bounds[-1])]


def suspect_rows(rows: np.ndarray, suspect: np.ndarray) -> np.ndarray:
    """The distinct rows, in order, holding a suspect value."""
    return np.unique(rows[suspect])


def numbers(values: Any) -> np.ndarray:
    """A numeric column's values as NumPy, nulls as 0 (``nulls`` tells them)."""
    return np.asarray(values.to_numpy(zero_copy_only=False) if values.null_count == 0 else values.fill_null(0).to_numpy())


def nulls(values: Any) -> np.ndarray:
    """Which values are null, as a NumPy mask."""
    if values.null_count == 0:
        return np.zeros(len(values), dtype=bool)
    return np.asarray(values.is_null().to_numpy(zero_copy_only=False))


def list_lengths(column: Any) -> tuple[int, int]:
    """The shortest and longest list of a column; (1, 1) for a column of single values."""
    if not is_list(column):
        return 1, 1
    import pyarrow.compute as pc

    lengths = pc.list_value_length(column)
    bounds = pc.min_max(lengths)
    return int(bounds["min"].as_py() or 0), int(bounds["max"].as_py() or 0)


def value_counts(column: Any) -> dict[Any, int]:
    """How many times each value occurs."""
    counted = column.value_counts()
    return dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True))


def from_records(records: list[dict[str, tuple[str, Any]]], keys: Any) -> list[tuple[str, str, Any]]:
    """Features made record by record (``{key: (wire, values)}`` each) as batch columns."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "float": pa.float64(), "bytes": pa.large_binary()}
    out = []
    for key in keys:
        wire = records[0][key][0] if records else "bytes"
        out.append((key, wire, pa.array([list(r[key][1]) for r in records], pa.large_list(types[wire]))))
    return out
