"""The few exceptions shardkit raises; the CLI turns each into one clear line."""

from __future__ import annotations

import errno
import re
import reprlib
import signal

# How much of one value a message shows: a file name, an id, a bbox. Annotation files come from
# anywhere, and a 20 MB file_name must not become a 20 MB error line (or errors.jsonl entry).
VALUE_CHARS = 200
_RUN_CHARS = 500  # a run of characters with no space in a message: a path, a value shown by str
_MESSAGE_CHARS = 2000
_LONG_RUN = re.compile(rf"\S{{{_RUN_CHARS + 1},}}")


def _bounded_repr() -> reprlib.Repr:
    found = reprlib.Repr()
    found.maxlevel, found.maxlist, found.maxtuple, found.maxdict = 3, 20, 20, 10
    found.maxstring = found.maxother = found.maxlong = VALUE_CHARS
    return found


_REPR = _bounded_repr()


def quoted(value: object) -> str:
    """``repr(value)`` for a message, bounded: a longer string is cut with the cut said
    (``'aaaa…' (20,000,000 characters)``), a long list shows its first items and ``...``."""
    if isinstance(value, str):
        if len(value) <= VALUE_CHARS:
            return repr(value)
        shown = repr(value[:VALUE_CHARS])
        return f"{shown[:-1]}…{shown[-1]} ({len(value):,} characters)"
    text = _REPR.repr(value)
    return text if len(text) <= VALUE_CHARS else f"{text[:VALUE_CHARS]}… ({type(value).__name__})"


def cut(text: str) -> str:
    """``text`` at a readable length, each cut said: a run of more than 500 characters without a
    space (a path, a value) keeps its start, and a message over 2000 characters its start and end."""
    text = _LONG_RUN.sub(_cut_run, text)
    if len(text) <= _MESSAGE_CHARS:
        return text
    half = _MESSAGE_CHARS // 2
    return f"{text[:half]} … ({len(text) - 2 * half:,} characters cut) … {text[-half:]}"


def _cut_run(match: re.Match[str]) -> str:
    run = match.group()
    end = run[-1] if run[-1] in ":,;)" else ""  # what follows a path in a message stays
    return f"{run[: _RUN_CHARS - 1]}… ({len(run) - len(end):,} characters){end}"  # 500 long: not cut again


def printable(text: str) -> str:
    """``text`` with lone surrogates shown: a file name's bytes that are not UTF-8 (``os`` hands
    them over as surrogate escapes) as ``\\xNN``, any other surrogate as ``\\uNNNN``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class ShardkitError(Exception):
    """Base class: a problem the user can act on, with a message that says how. Its text is
    ``cut`` to a readable length, whatever a message was made from."""

    def __str__(self) -> str:
        return cut(super().__str__())


class ConfigError(ShardkitError):
    """The config is invalid; the message starts with the key path, e.g. ``features.image.kind``."""

    def __init__(self, path: str, reason: str, source: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{path}: {reason}" if path else f"{where}{reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None]]:
        return (type(self), (self.path, self.reason, self.source))


class EntryError(ShardkitError):
    """One input entry (an index line or a folder image) cannot become a record. ``line`` 0: a
    part of the input with no line of its own (a COCO annotation that names no image), which
    ``reason`` names itself."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = cut(reason)  # also what errors.jsonl lists
        super().__init__(f"{source}:{line}: {reason}" if line else f"{source}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:  # exceptions cross process boundaries
        return (type(self), (self.source, self.line, self.reason))

    @classmethod
    def of_entry(cls, source: str, line: int, identity: str, reason: str) -> EntryError:
        """The error of an entry read from ``source``: one with no line (an image of a COCO file, a
        LabelMe folder's file) is named by its ``identity`` where ``reason`` does not name it already."""
        shown = printable(identity)
        return cls(source, line, reason if line or not shown or shown in reason else f"{shown}: {reason}")


class UsageError(ShardkitError):
    """A bad option, combination of options or argument the caller gave (``--workers 0``,
    index files and ``--from-folder`` at once, a picture path that is one of the inputs)."""


class OutputError(ShardkitError):
    """The output folder cannot be used: it cannot be created or written (``WriteError``), or its
    state forbids the operation (``StateError``)."""


class StateError(OutputError):
    """OUT, or the build state in it, forbids the operation: another build holds it, a different
    build is there (without ``overwrite``), the nodes of a build disagree, nothing is there to finalize.

    An ``OutputError``, as these were before this class existed: ``except OutputError`` still catches them.
    """


# What to do about a failed write, by errno; the rest get the generic advice.
_WRITE_ADVICE = {
    errno.ENOSPC: "free space",
    errno.EDQUOT: "free space or raise the quota",
    errno.EROFS: "make the folder writable",
    errno.EACCES: "fix the permissions",
    errno.EPERM: "fix the permissions",
    errno.EIO: "check the disk",
}


class WriteError(OutputError):
    """Writing a file failed: a full disk, a quota, a read-only or vanished folder. ``kept`` says
    what finished work survives (``"6 of 40 shards finished and kept"``), once the build knows."""

    def __init__(self, path: str, reason: str, code: int | None = None, kept: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.code = code
        self.kept = kept
        message = f"{reason} writing {path}"
        if kept is not None:
            message += f": {kept}; {_WRITE_ADVICE.get(code or 0, 'fix the cause')} and rerun the same command to resume"
        super().__init__(message)

    @classmethod
    def from_os_error(cls, path: str, exc: OSError) -> WriteError:
        reason = exc.strerror or str(exc)
        return cls(path, reason[:1].lower() + reason[1:], exc.errno)

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None, str | None]]:
        return (type(self), (self.path, self.reason, self.code, self.kept))


class CorruptShardError(ShardkitError):
    """A TFRecord file fails its framing or CRC checks."""

    def __init__(self, path: str, reason: str, record: int | None = None, offset: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.record = record
        self.offset = offset
        where = ""
        if record is not None:
            where = f" (record {record}, byte offset {offset})"
        super().__init__(f"{path}: {reason}{where}")

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None, int | None]]:
        return (type(self), (self.path, self.reason, self.record, self.offset))


class WorkerError(ShardkitError):
    """A worker process failed in a way that is not an input problem."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the work; what finished is kept, and the message says how much.

    A ``KeyboardInterrupt``, so that code which stops on Ctrl-C stops on it too. ``signum`` is
    the signal (the CLI exits with 128 + signum: 130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, message: str = "interrupted", signum: int = signal.SIGINT) -> None:
        self.signum = signum
        super().__init__(message)

    @classmethod
    def after(cls, interrupt: KeyboardInterrupt, message: str) -> Interrupted:
        """``message`` for the interrupt just caught: Ctrl-C (a bare KeyboardInterrupt) or a signal the CLI raised."""
        return cls(message, getattr(interrupt, "signum", signal.SIGINT))

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return (type(self), (str(self), self.signum))


class ShardkitWarning(UserWarning):
    """Something the user should know before a long run, e.g. that the output may not fit on the disk."""
