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
