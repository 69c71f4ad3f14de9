"""CSV, TSV and JSONL tables built in-process and read back with TensorFlow: each row's record
or its line and reason in errors.jsonl (tests of what a text table's values and rows mean)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import shardkit
from tests.tfread import read_each


@dataclasses.dataclass(frozen=True)
class Bad:
    reason: str  # the row's reason in errors.jsonl


@dataclasses.dataclass(frozen=True)
class Built:
    out: Path
    records: list[dict[str, Any]]  # in file order (no shuffle)
    errors: list[tuple[str, int, str]]  # (file name, line, reason) from errors.jsonl
    classes: dict[str, list[str]]

    def row(self, line: int, row_id: str) -> dict[str, Any] | Bad:
        """The record whose ``id`` column is ``row_id``, or the error listed at ``line``: exactly one."""
        found: list[dict[str, Any] | Bad] = [r for r in self.records if r["id"] == row_id.encode()]
        found += [Bad(reason) for _, at, reason in self.errors if at == line]
        assert len(found) == 1, (line, row_id, found)
        return found[0]


def build_table(root: Path, name: str, data: str | bytes, features: str, on_error: str = "skip") -> Built:
    root.mkdir(exist_ok=True)
    index = root / name
    index.write_bytes(data.encode() if isinstance(data, str) else data)
    (root / "c.yaml").write_text("features:\n" + features)
    out = root / "out"
    shardkit.build([index], out, config=str(root / "c.yaml"), workers=1, progress=False, on_error=on_error, shuffle=False)
    manifest = json.loads((out / "manifest.json").read_text())
    listed = out / "errors.jsonl"
    errors = [json.loads(line) for line in listed.read_text().splitlines()] if listed.exists() else []
    return Built(
        out,
        read_each(str(out), "train") if manifest["totals"]["records"] else [],
        [(Path(e["source"]).name, e["line"], e["reason"]) for e in errors],
        manifest["classes"],
    )


def delimited(fmt: str, values: Sequence[str], quoting: int = csv.QUOTE_MINIMAL) -> str:
    """An ``id,v`` table as Python's csv.writer writes it (CRLF line ends): row i on line i + 2."""
    text = io.StringIO()
    writer = csv.writer(text, delimiter={"csv": ",", "tsv": "\t"}[fmt], quoting=quoting)
    writer.writerow(["id", "v"])
    writer.writerows([str(i), v] for i, v in enumerate(values))
    return text.getvalue()


def listed(value: Any) -> list[Any]:
    return list(np.asarray(value).reshape(-1).tolist())


def bits(values: Any) -> list[int]:
    return list(np.asarray(values, dtype=np.float32).reshape(-1).view(np.uint32).tolist())
