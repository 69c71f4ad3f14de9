"""A build's options are one frozen value, checked once: the CLI, ``shardkit.build`` and the builder agree on it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import UsageError
from shardkit.pipeline.options import BuildOptions

FIELDS = {f.name: f.default for f in dataclasses.fields(BuildOptions)}
# CLI options that are not BuildOptions' fields by name: translated by the command (or its own, like --quiet).
TRANSLATED = {"format_", "compression", "executor", "scheduler", "num_nodes", "node_index", "quiet", "force_progress"}


def test_the_python_call_takes_exactly_the_options_with_their_defaults() -> None:
    keywords = {
        name: p.default for name, p in inspect.signature(shardkit.build).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords == FIELDS


def test_every_build_option_of_the_cli_reaches_the_options() -> None:
    names = {p.name for p in main.commands["build"].params} - {"indexes", "out"}
    assert names - TRANSLATED <= set(FIELDS), names - TRANSLATED - set(FIELDS)
    assert set(FIELDS) - names == {"progress", "format"}  # from --quiet and --progress; --format (format_: not the builtin)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 0}, "--workers must be at least 1"),
        ({"records_per_shard": 0}, "--records-per-shard must be at least 1"),
        ({"compression": "zstd"}, "unknown compression 'zstd' (known: none, gzip)"),
        ({"on_error": "warn"}, "unknown --on-error 'warn' (known: fail, skip)"),
        ({"num_nodes": 0}, "--num-nodes must be at least 1"),
        ({"num_nodes": 2, "node_index": 2}, "--node-index 2 is outside 0..1 (--num-nodes 2)"),
        ({"num_nodes": 2, "overwrite": True}, "--overwrite with --num-nodes would let one node delete the others' shards"),
    ],
)
def test_a_bad_value_is_refused_where_the_options_are_made(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as refused:
        BuildOptions(**options)  # type: ignore[arg-type]
    assert str(refused.value).startswith(message)


def test_the_options_are_a_frozen_value() -> None:
    ignored = ["val*"]
    options = BuildOptions(ignore=ignored, seed=3)
    ignored.append("train*")
    assert options.ignore == ("val*",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert options.parameters().to_dict() == {
        "seed": 3, "compression": None, "records_per_shard": None, "split": None, "index": True, "shuffle": True,
        "formats": ["tfrecord"],
    }  # fmt: skip


def test_the_cli_refuses_a_bad_combination_in_one_line_before_any_work(seg_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(seg_data), "-o", str(out), "--num-nodes", "2", "--node-index", "5"])
    assert (result.exit_code, result.output) == (1, "Error: --node-index 5 is outside 0..1 (--num-nodes 2)\n")
    assert not out.exists()


def test_build_with_builds_what_build_builds(seg_data: Path, tmp_path: Path) -> None:
    options = BuildOptions(workers=1, seed=2, records_per_shard=8, progress=False)
    made = shardkit.build_with([seg_data / "val.txt"], tmp_path / "a", options)
    same = shardkit.build([seg_data / "val.txt"], tmp_path / "b", workers=1, seed=2, records_per_shard=8, progress=False)
    assert made.manifest is not None and same.manifest is not None
    assert [s.crc32c for s in made.manifest.splits["val"].shards] == [s.crc32c for s in same.manifest.splits["val"].shards]
