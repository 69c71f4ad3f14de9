"""How byte counts read in messages and tables: ``574.8 KB``, ``4.3 MB`` (decimal units, as disks are sold)."""

from __future__ import annotations


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
