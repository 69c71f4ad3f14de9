"""Rows -> entries: each input line's values typed and checked against the config, in the parent.

Everything that can be checked without opening an image is checked here, before any work starts,
so a bad line is reported with its file and line number and never reaches a worker.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from shardkit.errors import ConfigError, EntryError
from shardkit.pipeline.config import Config, FeatureSpec
from shardkit.pipeline.inputs.index_files import Row
from shardkit.storage import location

SOURCE_ID = "source_id"
IDENTITY_COLUMN = "@identity"  # the column of a feature filled with the entry's identity, not an input value


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


def _number_list(value: Any, spec: FeatureSpec, row: Row) -> list[Any]:
    cast = int if spec.kind == "int64" else float
    items = value if isinstance(value, list) else [value]
    out: list[Any] = []
    for item in items:
        if isinstance(item, (bool, list, dict)) or item is None:
            raise EntryError(row.source, row.line, f"{spec.key}: expected {spec.kind}, got {item!r}")
        if cast is int and isinstance(item, float) and not item.is_integer():
            raise EntryError(row.source, row.line, f"{spec.key}: {item!r} is not an integer")
        try:
            out.append(cast(item))
        except (TypeError, ValueError, OverflowError):
            raise EntryError(row.source, row.line, f"{spec.key}: {_short_repr(item)} is not a valid {spec.kind}") from None
    if cast is int and any(not -(2**63) <= v < 2**63 for v in out):
        raise EntryError(row.source, row.line, f"{spec.key}: value out of int64 range")
    if cast is float and any(abs(v) > _FLOAT32_MAX and v not in (float("inf"), float("-inf")) for v in out):
        raise EntryError(row.source, row.line, f"{spec.key}: value out of float32 range")
    return out


_FLOAT32_MAX = 3.4028234663852886e38


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def typed_value(row: Row, spec: FeatureSpec, txt_names: tuple[str, ...] | None, folder: str | None) -> Any:
    """The value of ``spec`` for ``row``, converted and checked; file paths joined to ``folder``
    (absolute: the index file's own), or left as written when ``folder`` is None."""
    raw = row.get(spec.column, txt_names)
    if spec.kind in ("image", "mask", "bytes"):
        if not isinstance(raw, str) or not raw:
            raise EntryError(row.source, row.line, f"{spec.key}: expected a file path, got {raw!r}")
        # Relative paths resolve against the index file's folder, not the working directory.
        if folder is None:
            return raw
        if "://" in raw or "://" in folder:  # a URL, or a path in an index file in a bucket
            return _resolve_url(row, spec, folder, raw)
        path = raw if raw[0] == "/" else f"{folder}/{raw}"
        return os.path.normpath(path) if "/." in path or "//" in path or path[-1] == "/" else path
    if spec.kind in ("int64", "float"):
        return _number_list(raw, spec, row)
    if spec.kind == "string":
        if isinstance(raw, (dict, list)) or raw is None:
            raise EntryError(row.source, row.line, f"{spec.key}: expected text, got {raw!r}")
        try:
            return str(raw).encode("utf-8")
        except UnicodeEncodeError:
            raise EntryError(row.source, row.line, f"{spec.key}: text is not valid Unicode (a lone surrogate)") from None
    # class_name
    if isinstance(raw, (dict, list, bool)) or raw is None or raw == "":
        raise EntryError(row.source, row.line, f"{spec.key}: expected a class name, got {raw!r}")
    name = str(raw)
    if spec.classes is not None and name not in spec.classes:
        raise EntryError(row.source, row.line, f"{spec.key}: unknown class {name!r} (the config lists {len(spec.classes)} classes)")
    return name


def _resolve_url(row: Row, spec: FeatureSpec, folder: str, raw: str) -> str:
    """A file path where a URL is involved: a URL as written; a relative path against a bucket
    folder; a ``file://`` path as the local path it names."""
    if location.is_url(raw):
        return raw
    path = location.local_path(raw)
    if not path:
        raise EntryError(row.source, row.line, f"{spec.key}: expected a file path, got {raw!r}")
    if location.is_url(folder):
        return location.resolve(folder, path)
    return os.path.normpath(path if path[0] == "/" else f"{folder}/{path}")


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
    rows: Iterable[Row | EntryError], config: Config, on_error: str, errors: list[EntryError], classes: dict[str, set[str]]
) -> Iterator[Row]:
    """The rows that pass every check ``to_entry`` makes (planning builds no entries: a worker
    does, from the plan); with ``on_error='skip'`` bad rows go to ``errors`` instead of raising.
    The names seen for each class_name feature the config leaves open go to ``classes``.

    The first row of each index file also checks that every configured column exists: a wrong
    column name is a config mistake, reported as such even with ``skip``, not one error per line.
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
    txt_checks = [c for c in checks if c[0].kind not in ("image", "mask", "bytes", "class_name")]
    txt_classes = [
        (txt_spec, txt_spec.column, set(spec.classes or ()), seen)
        for spec, txt_spec, seen in checks
        if spec.kind == "class_name" and isinstance(txt_spec.column, int)
    ]
    txt_checks += [c for c in checks if c[0].kind == "class_name" and not isinstance(c[1].column, int)]
    checked: set[str] = set()
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
                    seen.add(value)
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


def with_classes(config: Config, classes: Mapping[str, Iterable[str]]) -> Config:
    """Fill each class_name feature's class list that the config leaves open with ``classes[key]``, sorted."""
    features = tuple(
        dataclasses.replace(spec, classes=tuple(sorted(classes.get(spec.key, ()))))
        if spec.kind == "class_name" and spec.classes is None
        else spec
        for spec in config.features
    )
    return dataclasses.replace(config, features=features)


def with_source_id(config: Config) -> Config:
    """The config plus a ``source_id`` string feature: each record's input, as its identity."""
    if any(spec.key == SOURCE_ID for spec in config.features):
        raise ConfigError(
            f"features.{SOURCE_ID}",
            "shardkit adds a source_id feature naming each record's input: rename this feature, or build with --no-source-id",
            config.source,
        )
    spec = FeatureSpec(key=SOURCE_ID, kind="string", column=IDENTITY_COLUMN)
    return dataclasses.replace(config, features=(*config.features, spec))
