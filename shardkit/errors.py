"""The few exceptions shardkit raises; the CLI turns each into one clear line."""

from __future__ import annotations


class ShardkitError(Exception):
    """Base class: a problem the user can act on, with a message that says how."""


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
    """One input entry (an index line or a folder image) cannot become a record."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:  # exceptions cross process boundaries
        return (type(self), (self.source, self.line, self.reason))


class OutputError(ShardkitError):
    """The output folder is locked, holds a different build, or cannot be written."""


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
