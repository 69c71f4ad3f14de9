"""Kinds of features are classes in one table: a new kind is a class and a registry line."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import pytest

import shardkit
from shardkit.features import registry
from shardkit.features.base import FeatureSpec
from shardkit.features.text import StringKind
from shardkit.pipeline.config import parse_config
from tests.tfread import read_split


class LowercaseKind(StringKind):
    """Text stored lower-cased: a kind made the way docs/developing.md says."""

    name: ClassVar[str] = "lowercase"

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        return super().typed(spec, raw, folder).lower()


def test_a_new_kind_is_a_class_and_one_registry_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.KINDS, LowercaseKind.name, LowercaseKind())
    (tmp_path / "train.csv").write_text("word,n\nHeLLo,1\nWORLD,2\n")
    config = parse_config({"features": {"word": {"kind": "lowercase"}, "n": {"kind": "int64"}}})
    result = shardkit.build([tmp_path / "train.csv"], tmp_path / "out", config=config, workers=1, progress=False)
    records = sorted(read_split(str(tmp_path / "out"), "train"), key=lambda r: int(r["n"]))
    assert [r["word"] for r in records] == [b"hello", b"world"]  # TensorFlow reads what the kind wrote
    assert result.manifest is not None
    word = next(f for f in result.manifest.schema if f["key"] == "word")
    assert word == {"key": "word", "dtype": "string", "kind": "lowercase", "shape": []}


def test_unknown_kinds_name_every_registered_one() -> None:
    from shardkit.errors import ConfigError

    with pytest.raises(ConfigError, match="known: image, mask, int64, float, bytes, string, class_name"):
        parse_config({"features": {"x": {"kind": "boxes"}}})


def test_a_spec_pickled_to_a_worker_equals_the_parents() -> None:
    config = parse_config({"features": {"image": {"kind": "image"}, "mask": {"kind": "mask"}, "label": {"kind": "class_name"}}})
    assert pickle.loads(pickle.dumps(config)) == config
    assert {f.kind.name for f in config.features} == {"image", "mask", "class_name"}


@pytest.mark.parametrize(
    ("name", "wire", "schema_dtype"),
    [("image", "bytes", "bytes"), ("mask", "bytes", "bytes"), ("int64", "int64", "int64"), ("float", "float", "float"),
     ("bytes", "bytes", "bytes"), ("string", "bytes", "string"), ("class_name", "int64", "int64")],
)  # fmt: skip
def test_every_kind_says_how_it_is_stored(name: str, wire: str, schema_dtype: str) -> None:
    kind = registry.kind_named(name)
    assert (kind.name, kind.wire, kind.schema_dtype) == (name, wire, schema_dtype)


def test_a_schema_entry_of_an_unknown_kind_is_read_by_its_wire_type() -> None:
    assert registry.of_entry({"key": "x", "kind": "from-a-newer-shardkit"}, "int64").name == "int64"
    assert registry.of_entry(None, "float").name == "float"
    assert registry.of_entry(None).name == "bytes"
