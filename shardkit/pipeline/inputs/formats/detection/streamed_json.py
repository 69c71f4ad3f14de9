"""A large JSON file read in bounded memory with ijson's C parser (yajl): the items of one top-level
array per pass, nothing else built; an array near the start read without parsing the rest of the
file, and one at the very end from the file's tail; the top level's shape, to say what a file that
is not the format lacks; and a syntax error as one line with its line and column.

yajl names neither the line nor the byte it rejects. A failed pass knows which block it had read,
so the byte is found again by feeding the parser that block one byte at a time (errors only).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

import ijson

from shardkit.errors import ShardkitError
from shardkit.pipeline.inputs.formats import bounded_json
from shardkit.storage import location

BOM = bounded_json.BOM
BLOCK = 1 << 20
TAIL = 4 << 20  # where a file's last top-level array is looked for: COCO's categories are a few kB
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character
_KINDS = {"start_map": "an object", "start_array": "an array", "string": "a string", "number": "a number", "boolean": "a boolean"}


class _Counted:
    """A binary file that counts the bytes it has handed the parser (where a pass failed, to a
    block), checks each block against ``bounded_json``'s limits first, and drops a UTF-8 BOM
    (which ``json.load`` with ``utf-8-sig`` takes, and yajl does not)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.offset = 0
        self.last = 0
        self._limits = bounded_json.Limits()

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self.last = len(data)
        if not self.offset and data.startswith(bounded_json.BOM):
            data = data[len(bounded_json.BOM) :]
            self._limits.offset = len(bounded_json.BOM)
        self.offset += self.last
        self._limits.feed(data)
        return data


@contextlib.contextmanager
def parsing(path: str) -> Iterator[_Counted]:
    """``path`` opened for one pass of ijson; a syntax error or a failed read in it -> one line."""
    try:
        handle = location.open_read(path)
    except OSError as exc:
        raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle, _explained(path):
        counted = _Counted(handle)
        try:
            yield counted
        except ijson.JSONError as exc:
            raise ShardkitError(syntax_error(path, counted.offset - counted.last, exc)) from None
        except bounded_json.Exceeded as exc:
            line, column = line_and_column(path, exc.offset)
            raise ShardkitError(f"{path}:{line}:{column}: {exc.reason}") from None
        except OSError as exc:
            raise ShardkitError(f"{path}: cannot read: {exc.strerror or exc}") from None


def items(path: str, key: str) -> Iterator[Any]:
    """The items of the top-level array ``key``, one C pass over the whole file (which checks
    its syntax all through); none where there is no such array."""
    with parsing(path) as f:
        yield from ijson.items(f, f"{key}.item", use_float=True)


def trailing_array(path: str, key: str) -> list[Any] | None:
    """The top-level array ``key`` where it is the file's last member (COCO files end with their
    categories), read from the file's last ``TAIL`` bytes alone; None where it is not found there
    (then ``items`` reads it). The rest of the file's syntax is left to the passes that read it."""
    size = location.size(path)
    if not size:
        return None
    try:
        tail = location.read_bytes(path, max(0, size - TAIL), size)
    except OSError:
        return None
    # A member's key follows "{" or ","; an escaped quote inside a string (\"key\") does not.
    found = list(re.finditer(rb'[{,]\s*"' + re.escape(key.encode("utf-8")) + rb'"\s*:\s*(\[)', tail))
    if not found:
        return None
    try:
        bounded_json.check(tail[found[-1].start(1) :])  # past a limit: the pass that reads it says where
        text = tail[found[-1].start(1) :].decode("utf-8")
        value, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, bounded_json.Exceeded):  # UnicodeDecodeError is a ValueError
        return None
    # Only the top-level object's own "}" can end a valid file: then the array is one of its members.
    return value if isinstance(value, list) and text[end:].strip() == "}" else None


def leading_items(path: str, key: str, what: str, large: Iterable[str] = ()) -> Iterator[Any]:
    """The items of the top-level array ``key``, reading no further than its end where it comes
    before the top-level keys in ``large`` (those are walked event by event in Python, which
    costs little until a large value; past one of ``large``, a C pass over the whole file does
    it instead). Raises ``ShardkitError`` ("not ``what``") where the file has no such array."""
    large = set(large)
    with parsing(path) as f:
        events = ijson.parse(f, use_float=True)
        first = next(events, None)
        if first is None or first[1] != "start_map":
            raise ShardkitError(f"{path}: not {what}: expected an object at the top level, got {_kind(first)}")
        for prefix, event, value in events:
            if prefix or event != "map_key":
                continue
            if value in large:
                break  # the rest in one C pass
            if value == key:
                start = next(events)
                if start[1] != "start_array":
                    raise ShardkitError(f"{path}: not {what}: {key!r} is {_kind(start)}, not an array")
                yield from ijson.items(_until_closed(events, key), f"{key}.item", use_float=True)
                return
        else:
            raise ShardkitError(f"{path}: not {what}: no {key!r} array")
    found = False
    for item in items(path, key):
        found = True
        yield item
    if not found:
        check_array(path, key, what, required=True)


def _until_closed(events: Iterator[tuple[str, str, Any]], key: str) -> Iterator[tuple[str, str, Any]]:
    """The events of the array ``key``, just opened, until it closes: the rest of the file is left unread."""
    yield (key, "start_array", None)
    for event in events:
        yield event
        if event[0] == key:  # its end_array: nothing else has this prefix
            return


def check_array(path: str, key: str, what: str, required: bool) -> None:
    """Where a pass found no item of the array ``key``: that it is an empty array (or, unless
    ``required``, missing), else ``ShardkitError`` saying what the file has instead. Walks the
    whole file event by event: for files that lack the array, or hold it empty."""
    found = shape(path).get(key)
    if found == "start_array" or (found is None and not required):
        return
    problem = f"no {key!r} array" if found is None else f"{key!r} is {_KINDS.get(found, found)}, not an array"
    raise ShardkitError(f"{path}: not {what}: {problem}")


def shape(path: str) -> dict[str, str]:
    """The top-level keys and the first event of each one's value (``start_array``, ``string``...)."""
    found: dict[str, str] = {}
    with parsing(path) as f:
        pending = None
        for prefix, event, value in ijson.parse(f, use_float=True):
            if pending is not None:
                found[pending], pending = event, None
            elif not prefix and event == "map_key":
                pending = value
    return found


def _kind(event: tuple[str, str, Any] | None) -> str:
    if event is None:
        return "nothing"
    return _KINDS.get(event[1], "null")


def _explained(path: str) -> contextlib.AbstractContextManager[None]:
    return location.explained(path) if location.is_url(path) else contextlib.nullcontext()


# -- a syntax error, placed ---------------------------------------------------------------------


def syntax_error(path: str, block_start: int, exc: Exception) -> str:
    """The one line for ``exc``, raised by a pass whose last block read began at ``block_start``."""
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    reason = (text.strip().splitlines() or ["not valid"])[0].rstrip(".")
    if reason.endswith("premature EOF"):
        reason = "it ends before its last value does (cut short?)"
    line, column = line_and_column(path, rejected_at(path, block_start))
    return f"{path}:{line}:{column}: not valid JSON: {reason}"


def rejected_at(path: str, block_start: int) -> int:
    """The offset of the byte yajl rejects (the file's size where the file ends too soon):
    whole blocks up to ``block_start``, then a byte at a time."""
    events = ijson.sendable_list()
    parser = ijson.basic_parse_coro(events, use_float=True)
    offset = 0
    with location.open_read(path) as f, _explained(path):
        if f.read(len(bounded_json.BOM)) == bounded_json.BOM:
            offset = len(bounded_json.BOM)
        else:
            f.seek(0)
        while data := f.read(min(BLOCK, block_start - offset) if offset < block_start else 1):
            try:
                parser.send(data)
            except ijson.JSONError:
                return offset if len(data) == 1 else rejected_at(path, offset)  # earlier than the pass said: again, from that block
            del events[:]
            offset += len(data)
    with contextlib.suppress(ijson.JSONError):  # cut short: yajl says so only now, at the end
        parser.close()
    return offset


def line_and_column(path: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of the byte at ``offset``, as ``json`` reports them."""
    line, column = 1, 1
    done = 0
    with location.open_read(path) as f, _explained(path):
        if f.read(len(bounded_json.BOM)) == bounded_json.BOM:
            column = 0  # json.load with utf-8-sig does not count it
        f.seek(0)
        while done < offset and (data := f.read(min(BLOCK, offset - done))):
            done += len(data)
            newline = data.rfind(b"\n")
            if newline >= 0:
                line += data.count(b"\n")
                column = 1
                data = data[newline + 1 :]
            column += len(data.translate(None, _CONTINUATION))
    return line, column
