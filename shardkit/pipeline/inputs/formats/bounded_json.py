"""JSON bytes checked, block by block before a parser sees them, for two shapes no annotation file
a tool writes has, and that make parsers take the machine down: arrays and objects nested deeper
than ``MAX_DEPTH``, and a string longer than ``MAX_STRING``.

Why these limits: real COCO nests 5 deep (the document, ``annotations``, an annotation, its
``segmentation``, a polygon), VOC-, YOLO- and Hub-metadata JSON as little; Python's ``json``,
``pickle`` and ``repr`` recurse once a level and fail near 1000, and ijson keeps a prefix string a
level whose total grows with the square of the depth (20,000 levels: 1 GB). 100 is twenty times
what real files use and far from both. The longest string a real annotation file holds is a
compressed RLE, about a byte a run: 16 MB is every pixel of a 4K image a run of its own, while
yajl copies a string that spans its reads over and over (200 MB: minutes).

The check is a few C-speed passes over each block (escapes out, everything but quotes and
brackets out, whole strings out) and a running depth; the exact byte of a problem is found again
one byte at a time, on the error path only.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

MAX_DEPTH = 100
MAX_STRING = 16 << 20
BOM = b"\xef\xbb\xbf"

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_QUOTED = re.compile(rb'"[^"]*"')
_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)  # a string's content, up to its closing quote
_OTHER = bytes(range(256)).translate(None, b'"[]{}')  # every byte but quotes and brackets
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


class Exceeded(Exception):
    """The JSON at byte ``offset`` is past a limit; ``reason`` says which, for a message."""

    def __init__(self, offset: int, reason: str) -> None:
        self.offset = offset
        self.reason = reason
        super().__init__(f"byte {offset}: {reason}")


class _TooDeep(Exception):
    pass


def too_deep() -> str:
    return f"arrays and objects nested more than {MAX_DEPTH} deep (files tools write nest a few levels: this one is broken or hostile)"


def too_long() -> str:
    return f"a string longer than {MAX_STRING >> 20} MiB (files tools write hold none: this one is broken or hostile)"


@dataclasses.dataclass
class _State:
    depth: int = 0
    in_string: bool = False
    escaped: bool = False  # in a string whose last byte so far is an escaping backslash
    string_start: int = 0  # offset of the open string's quote
    string_length: int = 0


class Limits:
    """A JSON byte stream's running check: ``feed`` each block in order, before it is parsed;
    it raises ``Exceeded`` at the first block past a limit. Strings are measured where they span
    blocks: one a block holds whole is shorter than ``MAX_STRING`` anyway (reads are far smaller)."""

    def __init__(self) -> None:
        self.offset = 0
        self._state = _State()

    def feed(self, data: bytes) -> None:
        if not data:
            return
        before = dataclasses.replace(self._state)
        try:
            self._feed(data)
        except _TooDeep:  # where exactly: found again, byte by byte
            raise Exceeded(self.offset + _deep_at(data, before), too_deep()) from None
        self.offset += len(data)

    def _feed(self, data: bytes) -> None:
        state = self._state
        start = 0
        if state.in_string:
            end = _REST.match(data, 1 if state.escaped else 0).end()  # type: ignore[union-attr]
            if end == len(data) or data[end] != ord('"'):  # the string goes on into the next block
                state.string_length += len(data)
                state.escaped = end < len(data)  # stopped at a lone backslash: the block's last byte
                self._check_string()
                return
            state.string_length += end
            self._check_string()
            state.in_string = state.escaped = False
            start = end + 1
        rest = data[start:] if start else data
        brackets = (_ESCAPE.sub(b"", rest) if b"\\" in rest else rest).translate(None, _OTHER)
        if b'"' in brackets:
            brackets = _QUOTED.sub(b"", brackets)
            opened = brackets.find(b'"')
            if opened >= 0:  # a string left open at the block's end
                brackets = brackets[:opened]
                quote = _last_quote(rest)
                state.in_string = True
                state.string_start = self.offset + start + quote
                state.string_length = len(rest) - quote - 1
                trailing = len(rest) - len(rest.rstrip(b"\\"))
                state.escaped = trailing % 2 == 1 and trailing < len(rest) - quote
                self._check_string()
        opens = brackets.count(b"[") + brackets.count(b"{")
        if state.depth + opens > MAX_DEPTH:
            depths = state.depth + np.cumsum(_STEP[np.frombuffer(brackets, dtype=np.uint8)])
            if int(depths.max()) > MAX_DEPTH:
                raise _TooDeep
        state.depth = max(0, state.depth + 2 * opens - len(brackets))  # below 0 is a syntax error: the parser's to report

    def _check_string(self) -> None:
        if self._state.string_length > MAX_STRING:
            raise Exceeded(self._state.string_start, too_long())


def _last_quote(data: bytes) -> int:
    """The offset of the last quote in ``data`` that no backslash escapes."""
    end = len(data)
    while True:
        quote = data.rfind(b'"', 0, end)
        backslashes = len(data[:quote]) - len(data[:quote].rstrip(b"\\"))
        if backslashes % 2 == 0:
            return quote
        end = quote


def _deep_at(data: bytes, state: _State) -> int:
    """Where in ``data``, read from ``state``, the nesting first goes past ``MAX_DEPTH`` (errors only)."""
    depth, in_string, escaped = state.depth, state.in_string, state.escaped
    for i, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string, escaped = True, False
        elif byte in b"[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif byte in b"]}":
            depth = max(0, depth - 1)
    return len(data) - 1


def check(data: bytes) -> None:
    """One whole JSON text (a line, a metadata value) checked at once; raises ``Exceeded``."""
    limits = Limits()
    limits.feed(data[len(BOM) :] if data.startswith(BOM) else data)
