"""TFDS prepared folders as reshard inputs (a placeholder until the reader lands: none is recognised)."""

from __future__ import annotations

import dataclasses
from typing import Any

from shardkit.errors import UsageError


@dataclasses.dataclass(frozen=True)
class TfdsFolder:
    path: str
    container: str
    splits: dict[str, list[str]]
    info: dict[str, Any]
    features: dict[str, Any] | None
    extra_files: tuple[str, ...] = ()


def is_tfds_folder(path: str) -> bool:
    return False


def read_tfds_folder(path: str) -> TfdsFolder:
    raise UsageError(f"{path}: TFDS folders are not read yet")


def write_tfds_metadata(out_dir: str, source: TfdsFolder, splits: Any, formats: Any, durable: bool = True) -> list[str]:
    raise UsageError(f"{source.path}: TFDS folders are not read yet")
