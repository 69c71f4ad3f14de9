"""A TFDS prepared dataset folder as a reshard input, and TFDS metadata for the OUT made from one.

A folder that ``download_and_prepare`` wrote (``~/tensorflow_datasets/mnist/3.0.1/``) holds
``dataset_info.json`` (the file format; each split's shard lengths and file template),
``features.json`` (the schema as TFDS describes it), the shard files, and a few files its
features and builder read beside them (``output.layout.is_tfds_extra``): a ``ClassLabel``'s
names (``label.labels.txt``, nested ``parent-child.labels.txt``), a deprecated text encoder's
vocabulary (``NAME.text.subwords``), the builder's ``metadata.json``. The shard paths are the template formatted as TFDS formats it
(``tfds.core.naming.ShardedFileTemplate``): ``{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}``
where a split names none, shard numbers five digits at least. Nothing here imports TFDS.

The OUT made from one keeps the source's description (name, version, citation, supervised keys,
features, class names) with its own splits: shardkit's shard names, which the template
``{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}`` matches, the shard lengths it wrote, its containers.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.errors import UsageError, quoted
from shardkit.formats.containers import registry
from shardkit.output import layout
from shardkit.storage import atomic, location

DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"  # TFDS' own, where a split names no template
OUT_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"  # shardkit's shard names, train-00000-of-00064.tfrecord
METADATA_LIMIT = 64 << 20  # bytes of one metadata file: real ones are kilobytes, statistics included
SHARD_LIMIT = 100_000  # shard files in one folder: TFDS writes about a thousand per split at most
_FIELD = re.compile(r"\{([^{}]*)\}")
_VARIABLES = frozenset({"DATASET", "SPLIT", "FILEFORMAT", "SHARD_INDEX", "NUM_SHARDS", "SHARD_X_OF_Y"})
_SPLIT_NAME = re.compile(r"[\w-]+")  # what TFDS' templates match as {SPLIT}
# dataset_info.json's fields about the files, replaced for OUT (protobuf's JSON takes either spelling)
_FILE_FIELDS = frozenset({"splits", "fileFormat", "file_format", "alternativeFileFormats", "alternative_file_formats"})


@dataclasses.dataclass(frozen=True)
class TfdsFolder:
    path: str  # the folder (local path or gs:// / s3:// URL)
    container: str  # shardkit container name of its files: "tfrecord" or "arrayrecord"
    splits: dict[str, list[str]]  # split name -> its shard file paths, in shard order
    info: dict[str, Any]  # dataset_info.json as read
    features: dict[str, Any] | None  # features.json as read (None when absent)
    extra_files: tuple[str, ...]  # other files TFDS reads beside them, which travel with the data: names only


def is_tfds_folder(path: str) -> bool:
    """Whether ``path`` is a folder with a ``dataset_info.json``. A shardkit OUT is one too (a build
    writes TFDS metadata): ask whether a path is a shardkit OUT first."""
    return location.isfile(location.join(path, layout.DATASET_INFO))


def read_tfds_folder(path: str) -> TfdsFolder:
    """The splits, shard files and metadata of the TFDS folder ``path``; every shard file it lists
    must be there. A problem is one line naming the file and what is wrong with it."""
    info_path = location.join(path, layout.DATASET_INFO)
    listed = location.sizes(path)
    if layout.DATASET_INFO not in listed:
        raise UsageError(f"{info_path}: missing: {path} is no TFDS prepared dataset folder")
    info = _json_object(info_path, listed[layout.DATASET_INFO])
    container, suffix = _container(info_path, info)
    splits = _shard_paths(path, info_path, info, suffix)
    _check_present(info_path, splits)
    features = None
    if layout.FEATURES in listed:
        features = _json_object(location.join(path, layout.FEATURES), listed[layout.FEATURES])
    shards = {p for files in splits.values() for p in files}
    extra = tuple(n for n in sorted(listed) if layout.is_tfds_extra(n) and location.join(path, n) not in shards)
    for name in extra:
        if listed[name] > METADATA_LIMIT:
            raise UsageError(f"{location.join(path, name)}: {listed[name]:,} bytes, more than a TFDS metadata file holds: remove it")
    return TfdsFolder(path, container, splits, info, features, extra)


def write_tfds_metadata(
    out_dir: str,
    source: TfdsFolder,
    splits: Mapping[str, Sequence[tuple[int, int]]],
    formats: Sequence[str],
    durable: bool = True,
    compression: str | None = None,
) -> list[str]:
    """TFDS metadata for OUT made from ``source``: ``splits`` gives (records, bytes) of each output
    shard in order, ``formats`` the output's containers, the first the primary. ``dataset_info.json``
    is the source's with its splits and file formats replaced; ``features.json`` and the extra files
    are copied as they are. Returns the names written (none for GZIP shards: TFDS reads TFRecord
    files uncompressed only)."""
    if compression == "gzip":
        return []
    primary, *others = (registry.named(name).tfds_file_format for name in formats)
    info = {key: value for key, value in source.info.items() if key not in _FILE_FIELDS}
    info["fileFormat"] = primary
    if others:  # as_dataset reads the primary (TFRecord), as_data_source the ArrayRecord files
        info["alternativeFileFormats"] = others
    info["splits"] = [
        {
            "filepathTemplate": OUT_TEMPLATE,
            "name": name,
            "numBytes": str(sum(size for _, size in shards)),
            "shardLengths": [str(records) for records, _ in shards],
        }
        for name, shards in splits.items()
        if shards
    ]
    written = []
    copied = (*((layout.FEATURES,) if source.features is not None else ()), *source.extra_files)
    for name in copied:  # before dataset_info.json, which tells TFDS the folder is a dataset
        atomic.write_atomic(location.join(out_dir, name), location.read_bytes(location.join(source.path, name)), durable)
        written.append(name)
    atomic.write_json(location.join(out_dir, layout.DATASET_INFO), dict(sorted(info.items())), durable)
    return [layout.DATASET_INFO, *written]


def _json_object(path: str, size: int) -> dict[str, Any]:
    if size > METADATA_LIMIT:
        raise UsageError(f"{path}: {size:,} bytes, more than a TFDS metadata file holds ({METADATA_LIMIT >> 20} MiB)")
    try:
        found = json.loads(location.read_bytes(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not JSON ({exc.msg}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8; nested deeper than Python recurses
        raise UsageError(f"{path}: not JSON ({type(exc).__name__})") from None
    if not isinstance(found, dict):
        raise UsageError(f"{path}: a JSON {type(found).__name__}, where TFDS writes an object")
    return found


def _field(entry: Mapping[str, Any], name: str, snake: str) -> Any:
    """A field by its JSON name or its proto name: TFDS (protobuf's ``json_format``) reads either."""
    return entry.get(name, entry.get(snake))


def _container(info_path: str, info: Mapping[str, Any]) -> tuple[str, str]:
    """The shardkit container of the folder's files and their ``{FILEFORMAT}`` (``tfrecord``, ``array_record``)."""
    value = _field(info, "fileFormat", "file_format") or registry.named(registry.DEFAULT).tfds_file_format
    known = {container.tfds_file_format: name for name, container in registry.CONTAINERS.items()}
    if not isinstance(value, str) or value not in known:
        raise UsageError(
            f"{info_path}: fileFormat {quoted(value)}, which shardkit does not read (it reads {', '.join(known)}): "
            "convert the folder with `tfds convert_format --out_file_format array_record` first"
        )
    return known[value], value


def _shard_paths(path: str, info_path: str, info: Mapping[str, Any], suffix: str) -> dict[str, list[str]]:
    entries = info.get("splits")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{info_path}: no splits: a TFDS folder lists its splits and their shards; prepare it again")
    found: dict[str, list[str]] = {}
    total = 0
    for i, entry in enumerate(entries):
        name, lengths, template = _split_entry(info_path, i, entry)
        total += len(lengths)
        if total > SHARD_LIMIT:
            raise UsageError(f"{info_path}: more than {SHARD_LIMIT:,} shard files in its splits, more than shardkit reads from one folder")
        if name in found:
            raise UsageError(f"{info_path}: splits[{i}]: split {name!r} is listed twice")
        if lengths:  # an empty split has no files
            relative = _template_paths(info_path, f"splits[{i}] ({name})", template, info.get("name"), name, suffix, len(lengths))
            found[name] = [location.join(path, p) for p in relative]
    if not found:
        raise UsageError(f"{info_path}: no splits with shards: every split it lists is empty")
    return found


def _split_entry(info_path: str, i: int, entry: Any) -> tuple[str, list[int], str]:
    """One split of ``dataset_info.json``: its name, shard lengths and file template."""
    where = f"{info_path}: splits[{i}]"
    if not isinstance(entry, dict):
        raise UsageError(f"{where}: a JSON {type(entry).__name__}, where TFDS writes an object")
    name = entry.get("name")
    if not isinstance(name, str) or not _SPLIT_NAME.fullmatch(name):
        raise UsageError(f"{where}: split name {quoted(name)} is no TFDS split name (letters, digits, _ and -)")
    where = f"{where} ({name})"
    lengths = _field(entry, "shardLengths", "shard_lengths")
    if lengths is None:
        if _count(_field(entry, "numShards", "num_shards")):
            raise UsageError(f"{where}: numShards without shardLengths: prepared by a TFDS before 4.0; prepare it again with a newer one")
        lengths = []
    counts = [_count(n) for n in lengths] if isinstance(lengths, list) else [None]
    if any(n is None for n in counts):
        raise UsageError(f"{where}: shardLengths must be a list of record counts, not {quoted(lengths)}")
    template = _field(entry, "filepathTemplate", "filepath_template") or DEFAULT_TEMPLATE
    if not isinstance(template, str):
        raise UsageError(f"{where}: filepathTemplate {quoted(template)} is not a string")
    return name, [n for n in counts if n is not None], template


def _count(value: Any) -> int | None:
    """A record or shard count as protobuf's JSON writes an int64 (a string of digits) or a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def _template_paths(info_path: str, where: str, template: str, dataset: Any, split: str, suffix: str, num_shards: int) -> list[str]:
    """Every shard's path relative to the folder, in shard order, as TFDS formats ``template``."""
    fields = set(_FIELD.findall(template))
    unknown = sorted(fields - _VARIABLES)
    problem = None
    if unknown or "{" in _FIELD.sub("", template) or "}" in _FIELD.sub("", template):
        problem = f"has {'{' + unknown[0] + '}' if unknown else 'a stray brace'} (TFDS fills {', '.join(sorted(_VARIABLES))})"
    elif not fields & {"SHARD_INDEX", "SHARD_X_OF_Y"}:
        problem = "numbers no shard ({SHARD_INDEX} or {SHARD_X_OF_Y})"
    elif "DATASET" in fields and not (isinstance(dataset, str) and _SPLIT_NAME.fullmatch(dataset)):
        problem = f"names the dataset, and the dataset's name is {quoted(dataset)}"
    if problem:
        raise UsageError(f"{info_path}: {where}: filepathTemplate {quoted(template)} {problem}")
    digits = max(len(str(num_shards)), 5)  # naming._num_digits_needed
    values = {"DATASET": dataset, "SPLIT": split, "FILEFORMAT": suffix, "NUM_SHARDS": f"{num_shards:0{digits}d}"}
    paths = []
    for index in range(num_shards):
        number = f"{index:0{digits}d}"
        values.update(SHARD_INDEX=number, SHARD_X_OF_Y=f"{number}-of-{values['NUM_SHARDS']}")
        paths.append(_FIELD.sub(lambda match: str(values[match.group(1)]), template))
    parts = posixpath.normpath(paths[0]).split("/")  # only the numbers differ from one shard to the next
    if paths[0].startswith(("/", "\\")) or ".." in parts or "://" in paths[0] or "\\" in paths[0]:
        raise UsageError(f"{info_path}: {where}: filepathTemplate {quoted(template)} names a file outside the folder ({quoted(paths[0])})")
    return paths


def _check_present(info_path: str, splits: Mapping[str, list[str]]) -> None:
    """Every shard file is there (one listing a folder on a store), else one line naming the first missing."""
    every = [p for files in splits.values() for p in files]
    sizes = location.sizes_of(every)
    for split, files in splits.items():
        for index, shard in enumerate(files):
            if sizes[shard] is None:
                raise UsageError(
                    f"{shard}: missing, though {info_path} lists it as shard {index + 1} of {len(files)} of split {split!r}: "
                    "copy the whole folder, or prepare it again"
                )
