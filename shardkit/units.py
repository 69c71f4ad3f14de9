"""How counts read in messages and tables: ``574.8 KB``, ``4.3 MB`` (decimal units, as disks are sold);
``1 file``, ``2 files``."""

from __future__ import annotations


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def plural(n: int, word: str, words: str | None = None) -> str:
    """The count and the noun that agrees with it: ``1 file``, ``2 files``, ``0 files``
    (``words`` where the plural is not ``word`` + s: ``plural(n, "entry", "entries")``)."""
    return f"{n} {word if n == 1 else words or word + 's'}"
