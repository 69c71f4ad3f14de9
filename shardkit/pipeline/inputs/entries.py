"""Rows -> entries: each input line's values typed and checked against the config, in the parent.

Everything that can be checked without opening an image is checked here, before any work starts,
so a bad line is reported with its file and line number and never reaches a worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

from shardkit.errors import ConfigError, EntryError
from shardkit.features.base import BadValue, FeatureSpec
from shardkit.pipeline.config import IDENTITY_COLUMN, Config
from shardkit.pipeline.inputs.formats.input_format import Row


@dataclasses.dataclass(slots=True)  # not frozen: a frozen init costs 1 us an entry
class Entry:
    """One input: where it came from, its identity for seeding, and one value per config feature.

    Values: an absolute path for image/mask/bytes features, a list of ints or floats for numeric
    ones, a UTF-8 ``bytes`` for string, and the class name (``str``) for class_name features.
    """

    source: str
    line: int
    identity: str
    values: tuple[Any, ...]


def typed_value(row: Row, spec: FeatureSpec, txt_names: tuple[str, ...] | None, folder: str | None) -> Any:
    """The value of ``spec`` for ``row``, converted and checked by its kind; file paths joined to
    ``folder`` (absolute: the index file's own), or left as written when ``folder`` is None."""
    raw = row.get(spec.column, txt_names)
    if raw is None and spec.default is not None:
        raw = spec.default
    try:
        return spec.kind.typed(spec, raw, folder)
    except BadValue as exc:
        raise EntryError.of_entry(row.source, row.line, row.identity, f"{spec.key}: {null_reason(spec) if raw is None else exc}") from None


def null_reason(spec: FeatureSpec) -> str:
    """Why a row with no value for ``spec`` is bad input, and what to do about it."""
    return f"column {spec.column!r} is null: give the feature a 'default:' in the config, or build with --on-error skip"


def check_columns(row: Row, config: Config) -> None:
    for spec in config.features:
        if spec.column == IDENTITY_COLUMN:
            continue
        try:
            row.get(spec.column, config.columns)
        except EntryError as exc:
            raise ConfigError(f"features.{spec.key}.column", f"{exc.reason} in {row.source}", config.source) from None


def to_entry(row: Row, config: Config, folder: str | None = None) -> Entry:
    identity = row.identity
    values = tuple(
        # Any file name is an identity, also one that is not valid UTF-8: its bytes are kept.
        identity.encode("utf-8", "surrogateescape") if spec.column == IDENTITY_COLUMN else typed_value(row, spec, config.columns, folder)
        for spec in config.features
    )
    return Entry(source=row.source, line=row.line, identity=identity, values=values)


def checked_rows(
    rows: Iterable[Row | EntryError],
    config: Config,
    on_error: str,
    errors: list[EntryError],
    classes: dict[str, set[str]],
    checked: set[str] | None = None,
) -> Iterator[Row]:
    """The rows that pass every check ``to_entry`` makes (planning builds no entries: a worker
    does, from the plan); with ``on_error='skip'`` bad rows go to ``errors`` instead of raising.
    The names seen for each class_name feature the config leaves open go to ``classes``.

    The first row of each index file also checks that every configured column exists: a wrong
    column name is a config mistake, reported as such even with ``skip``, not one error per line.
    ``checked``: the files whose first row was checked already (rows read a block at a time).
    """
    positions = {name: i for i, name in enumerate(config.columns or ())}
    checks = []  # (spec, the same with a .txt column name made a position, where its class names go)
    for spec in config.features:
        if spec.column == IDENTITY_COLUMN:
            continue
        txt_spec = spec
        if isinstance(spec.column, str) and spec.column in positions:
            txt_spec = dataclasses.replace(spec, column=positions[spec.column])
        checks.append((spec, txt_spec, classes.get(spec.key) if spec.classes is None else None))
    # In a .txt row every value is a non-empty string: its file paths need no check, and a
    # class name only the config's list (the fast path matters: planning runs it 10M times).
    txt_checks = [c for c in checks if not c[0].kind.plain_text_ok and not c[0].kind.has_classes]
    txt_classes = [
        (txt_spec, txt_spec.column, set(spec.classes or ()), seen)
        for spec, txt_spec, seen in checks
        if spec.kind.has_classes and isinstance(txt_spec.column, int)
    ]
    txt_checks += [c for c in checks if c[0].kind.has_classes and not isinstance(c[1].column, int)]
    checked = set() if checked is None else checked
    for row in rows:
        try:
            if isinstance(row, EntryError):
                raise row
            if row.source not in checked:
                checked.add(row.source)
                check_columns(row, config)
            txt = row.names is None
            for spec, txt_spec, seen in txt_checks if txt else checks:
                value = typed_value(row, txt_spec if txt else spec, config.columns, None)
                if seen is not None:
                    seen.update(spec.kind.class_names(value))
            if txt:
                for txt_spec, column, known, seen in txt_classes:
                    name = row.values[column]
                    if seen is not None:
                        seen.add(name)
                    elif name not in known:
                        typed_value(row, txt_spec, config.columns, None)  # raises, naming the class
            yield row
        except EntryError as exc:
            if on_error != "skip":
                raise
            errors.append(exc)
