"""Callers match errors on their type, not their text: a bad call is a ``UsageError``, a refusing
OUT a ``StateError`` (still an ``OutputError``, as it was before the class existed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import OutputError, ShardkitError, StateError, UsageError
from shardkit.pipeline.state.lock import OutputLock


def test_the_classes_sit_where_callers_expect_them() -> None:
    assert issubclass(UsageError, ShardkitError) and not issubclass(UsageError, OutputError)
    assert issubclass(StateError, OutputError) and issubclass(StateError, ShardkitError)


@pytest.mark.parametrize(
    ("indexes", "options", "message"),
    [
        (["x.txt"], {"workers": 0}, "--workers must be at least 1"),
        (["x.txt"], {"records_per_shard": 0}, "--records-per-shard must be at least 1"),
        (["x.txt"], {"compression": "zstd"}, "unknown compression 'zstd'"),
        (["x.txt"], {"on_error": "ignore"}, "unknown --on-error 'ignore'"),
        (["x.txt"], {"from_folder": "photos"}, "but not both"),
        ([], {}, "but not both"),
        (["x.txt"], {"num_nodes": 2, "node_index": 2}, "--node-index 2 is outside 0..1"),
        (["x.txt"], {"num_nodes": 2, "node_index": 0, "overwrite": True}, "--overwrite with --num-nodes"),
    ],
)
def test_a_bad_build_call_is_a_usage_error(indexes: list[str], options: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=message):
        shardkit.build(indexes, tmp_path / "out", progress=False, **options)
    assert not (tmp_path / "out").exists()


def test_a_bad_preview_call_is_a_usage_error(seg_data: Path) -> None:
    with pytest.raises(UsageError, match="-n must be at least 1"):
        shardkit.preview([seg_data], count=0)
    with pytest.raises(UsageError, match="--copies must be between 0 and 16"):
        shardkit.preview([seg_data], copies=17)
    with pytest.raises(UsageError, match="no split 'test' in the inputs"):
        shardkit.preview([seg_data], split="test")


def test_an_output_whose_state_refuses_is_a_state_error(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shardkit.build([seg_data / "val.txt"], out, workers=1, progress=False)
    with pytest.raises(StateError, match="already holds a different build"):
        shardkit.build([seg_data / "val.txt"], out, workers=1, seed=1, progress=False)
    with OutputLock(str(out / ".shardkit" / "lock")), pytest.raises(StateError, match="another build is writing here"):
        shardkit.build([seg_data / "val.txt"], out, workers=1, progress=False)
    with pytest.raises(StateError, match="no readable shardkit build state"):
        shardkit.finalize(tmp_path)


def test_nodes_that_disagree_and_an_unfinished_finalize_are_state_errors(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "nodes"
    shardkit.build([seg_data / "val.txt"], out, workers=1, records_per_shard=2, num_nodes=2, node_index=0, progress=False)
    with pytest.raises(StateError, match="shards are not finished"):
        shardkit.finalize(out)
    with pytest.raises(StateError, match="shared by 2 nodes, not 3"):
        shardkit.build([seg_data / "val.txt"], out, workers=1, records_per_shard=2, num_nodes=3, node_index=2, progress=False)
