"""The JSON limits, checked block by block, agree with a plain byte-by-byte reading of the same
text however it is cut into blocks: the first byte nested past the limit, the first string past
its length, escapes and brackets inside strings included; COCO's own shapes pass."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.pipeline.inputs.formats.bounded_json import Exceeded, Limits


def oracle(data: bytes, max_depth: int, max_string: int) -> tuple[int, str] | None:
    """(offset, which) of the first limit passed, reading a byte at a time."""
    depth, in_string, escaped, start = 0, False, False, 0
    for i, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == ord("\\"):
                escaped = True
            elif byte == ord('"'):
                in_string = False
                continue
            if i - start > max_string:
                return start, "string"
        elif byte == ord('"'):
            in_string, start = True, i
        elif byte in b"[{":
            depth += 1
            if depth > max_depth:
                return i, "depth"
        elif byte in b"]}":
            depth -= 1
    return None


def fed(data: bytes, cuts: list[int]) -> tuple[int, str] | None:
    limits = Limits()
    at = 0
    try:
        for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
            limits.feed(data[at:cut] if cut > at else b"")
            at = max(at, cut)
    except Exceeded as exc:
        return exc.offset, "depth" if exc.reason == bounded_json.too_deep() else "string"
    return None


def values(max_depth: int) -> st.SearchStrategy[object]:
    text = st.text(alphabet='ab[]{}"\\\n\u00e9', max_size=12)
    return st.recursive(
        st.none() | st.integers() | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=max_depth * 3,
    )


@settings(max_examples=150, deadline=None)
@given(value=values(12), depth=st.integers(0, 12), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_blocks_find_what_a_byte_by_byte_reading_finds(value: object, depth: int, cuts: list[int]) -> None:
    data = ("[" * depth + json.dumps(value, ensure_ascii=False) + "]" * depth).encode()
    # A whole string in one block is measured only when it spans blocks: cut every 4 bytes too.
    cuts = cuts + list(range(0, len(data), 4))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounded_json, "MAX_DEPTH", 6)
        patch.setattr(bounded_json, "MAX_STRING", 5)
        assert fed(data, cuts) == oracle(data, 6, 5)


def test_coco_shapes_pass_and_a_bom_is_not_json() -> None:
    coco = {"images": [{"id": 1}], "annotations": [{"segmentation": [[1, 2, 3]], "bbox": [1, 2, 3, 4]}],
            "categories": [{"id": 1, "skeleton": [[1, 2]]}], "rle": {"counts": "[\\]^_`\\\\[[[[[[[[[[[[[[[[[[[[["}}  # fmt: skip
    bounded_json.check(bounded_json.BOM + json.dumps(coco).encode())
    with pytest.raises(Exceeded, match="nested more than 100 deep") as caught:
        bounded_json.check(b'{"a": "[[[[", "b": ' + b"[" * 100 + b"]" * 100 + b"}")
    assert caught.value.offset == len(b'{"a": "[[[[", "b": ') + 99


def test_an_escape_that_ends_a_block_inside_a_string_does_not_shift_where_nesting_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A string ``"a\\\\"`` cut after its first backslash: once it closes, the next string's first
    byte is not escaped (a review found the report 5 bytes late)."""
    monkeypatch.setattr(bounded_json, "MAX_DEPTH", 1)
    data = b'{"a\\\\": "", "b": [[1]]}'
    json.loads(data)
    limits = Limits()
    with pytest.raises(Exceeded) as found:
        for block in (data[:4], data[4:8], data[8:]):
            limits.feed(block)
    assert found.value.offset == data.index(b"[[")
