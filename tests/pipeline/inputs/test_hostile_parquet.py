"""Hostile Parquet files, as a careless tool writes them: the Hugging Face schema metadata that
gives a config-less build its config is not JSON, nests without end, or names no classes; each
is one line naming the file and the cause (``shardkit`` under a memory limit, inputs unchanged)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # each case runs the shardkit command

FIX = "give a config (-c) to build it without"


@pytest.mark.parametrize(
    ("metadata", "cause"),
    [
        (b'{"info": {"features": ', "its Hugging Face metadata (the schema's 'huggingface' key) is not valid JSON: Expecting value"),
        (b"[" * 5000 + b"]" * 5000, "is not valid JSON: arrays and objects nested more than 100 deep"),
        (b'{"info": {"features": {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel"}}}}',
         "its Hugging Face metadata gives the ClassLabel column 'label' no list of class names"),
    ],
)  # fmt: skip
def test_hub_metadata_that_is_not_what_datasets_writes_is_one_line(metadata: bytes, cause: str, tmp_path: Path) -> None:
    table = pa.table({"image": [b"\xff\xd8 not a jpeg"], "label": [1]}).replace_schema_metadata({b"huggingface": metadata})
    path = tmp_path / "train.parquet"
    pq.write_table(table, path)
    before = digests(path)
    line = one_line_error(run_cli(["build", path, "-o", tmp_path / "out", "-q"], cwd=tmp_path))
    assert line.startswith(f"Error: {path}: ") and cause in line and line.endswith(FIX), line
    assert digests(path) == before
