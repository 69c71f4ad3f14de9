"""``string``: UTF-8 text, one value per record (also the ``source_id`` shardkit adds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from shardkit.features.base import TFDS, BadValue, FeatureKind, FeatureSpec


class StringKind(FeatureKind):
    name: ClassVar[str] = "string"
    wire: ClassVar[str] = "bytes"
    schema_dtype: ClassVar[str] = "string"
    label_role: ClassVar[str] = "by_name"

    def typed(self, spec: FeatureSpec, raw: Any, folder: str | None) -> Any:
        if isinstance(raw, (dict, list)) or raw is None:
            raise BadValue(f"expected text, got {raw!r}")
        try:
            return str(raw).encode("utf-8")
        except UnicodeEncodeError:
            raise BadValue("text is not valid Unicode (a lone surrogate)") from None

    def tfds_feature(self, entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        return {"pythonClassName": TFDS + "text_feature.Text", "text": {}}

    def python_value(self, entry: Mapping[str, Any], values: Any, decode_images: bool) -> Any:
        texts = [v.decode("utf-8") for v in values]
        return texts[0] if entry.get("shape") == [] and len(texts) == 1 else texts
