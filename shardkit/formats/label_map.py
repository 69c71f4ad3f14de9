"""The TF Object Detection API's ``label_map.pbtxt``: written, and read back as the API reads it.

The API's ``label_map_util.load_labelmap`` merges the file's text into a ``StringIntLabelMap``
proto with protobuf's ``text_format`` and then refuses a negative id, and an id 0 unless the item
is named ``background`` (id 0 is the background class of its models). A name goes in single
quotes with C escapes: a quote, a backslash or a line break written raw ends the string early or
leaves it open, and the file no longer parses.

``problem`` parses with the real ``text_format`` into a message of the same shape (the proto's
fields by number and type, built here: the API itself is seldom installed), so that ``verify
--deep`` says what the API would.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

BACKGROUND = "background"  # the one name id 0 may have
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quoted(name: str) -> str:
    """``name`` as a single-quoted text-format string: C escapes for quotes, backslashes and control
    characters; other characters as UTF-8, which the parser takes as they are."""
    out = []
    for char in name:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


def text(ids: Sequence[int], names: Sequence[str], input_ids: Sequence[int] | None = None) -> str:
    """The label map for these classes; with ``input_ids``, each item says in a comment the id its
    class has in the input where the build moved it (a COCO category 0, written as 1)."""
    items = []
    for n, (i, name) in enumerate(zip(ids, names, strict=True)):
        moved = f"  # {input_ids[n]} in the input\n" if input_ids is not None and input_ids[n] != i else ""
        items.append(f"item {{\n{moved}  id: {i}\n  name: {quoted(name)}\n}}\n")
    return "".join(items)


def problem(content: bytes) -> str | None:
    """Why the API's ``load_labelmap`` would refuse this label map; None where it loads."""
    from google.protobuf import text_format

    try:
        decoded = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start})"
    message = _message_class()()
    try:
        text_format.Merge(decoded, message)
    except text_format.ParseError as exc:
        return f"does not parse as a StringIntLabelMap: {exc}"
    for n, item in enumerate(message.item):
        if item.id < 0:
            return f"item {n + 1} ({item.name!r}) has id {item.id}: ids must be 0 or more"
        if item.id == 0 and BACKGROUND not in (item.name, item.display_name):
            return f"item {n + 1} ({item.name!r}) has id 0, which the TF OD API keeps for the background"
    return None


@functools.lru_cache(maxsize=1)
def _message_class() -> Any:
    """``object_detection.protos.StringIntLabelMap`` (string_int_label_map.proto), in a pool of its own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="shardkit_label_map.proto", package="object_detection.protos", syntax="proto2")
    item = proto.message_type.add(name="StringIntLabelMapItem")
    item.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    item.field.add(name="id", number=2, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    item.field.add(name="display_name", number=3, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    keypoint = item.nested_type.add(name="KeypointMap")
    keypoint.field.add(name="id", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    keypoint.field.add(name="label", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    item.field.add(
        name="keypoints", number=4, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
        type_name=".object_detection.protos.StringIntLabelMapItem.KeypointMap",
    )  # fmt: skip
    whole = proto.message_type.add(name="StringIntLabelMap")
    whole.field.add(
        name="item",
        number=1,
        type=field.TYPE_MESSAGE,
        label=field.LABEL_REPEATED,
        type_name=".object_detection.protos.StringIntLabelMapItem",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("object_detection.protos.StringIntLabelMap"))
