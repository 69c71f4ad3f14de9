"""The one table of feature kinds: a config's ``kind:`` and a manifest's schema name one of these.

A new kind of feature is a module with its class and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardkit.features.base import FeatureKind
from shardkit.features.files import BytesKind
from shardkit.features.images import EncodedImageKind, ImageKind, MaskKind
from shardkit.features.labels import ClassIdKind, ClassNameKind
from shardkit.features.numbers import FloatKind, Int64Kind
from shardkit.features.objects import ObjectsKind
from shardkit.features.text import StringKind

KINDS: dict[str, FeatureKind] = {
    kind.name: kind
    for kind in (
        ImageKind(),
        MaskKind(),
        Int64Kind(),
        FloatKind(),
        BytesKind(),
        StringKind(),
        ClassNameKind(),
        ClassIdKind(),
        EncodedImageKind(),
        ObjectsKind(),
    )
}
# A record's feature the manifest does not describe (a foreign file, an older build) is read by its wire type.
_BY_WIRE: dict[str, FeatureKind] = {"int64": KINDS["int64"], "float": KINDS["float"], "bytes": KINDS["bytes"]}


def kind_named(name: str) -> FeatureKind:
    """The kind called ``name``; ``KeyError`` for a name no kind has."""
    return KINDS[name]


def of_entry(entry: Mapping[str, Any] | None, wire: str = "bytes") -> FeatureKind:
    """The kind a manifest schema entry names, or the plain kind of the record's ``wire`` type
    where there is no entry or it names a kind this version does not know."""
    kind = KINDS.get(entry.get("kind", "")) if entry else None
    return kind if kind is not None else _BY_WIRE.get(wire, KINDS["bytes"])
