"""Every shard container by name: what ``--format`` takes, and which container a file is.

A build names its containers (``--format tfrecord``, ``--format tfrecord,arrayrecord``); the
first is the split's primary container. The TFRecord settings (compression, ``.idx``) are given
to the TFRecord adapter alone, and refused where they mean nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from shardkit.errors import UsageError
from shardkit.formats.containers import idx_sidecar
from shardkit.formats.containers.adapter import ShardContainer
from shardkit.formats.containers.arrayrecord_shards import ArrayRecordShards
from shardkit.formats.containers.idx_sidecar import IndexReport as IndexReport  # what shardkit.write_idx_files returns
from shardkit.formats.containers.tfrecord_shards import TFRecordShards

CONTAINERS: dict[str, type[ShardContainer]] = {TFRecordShards.name: TFRecordShards, ArrayRecordShards.name: ArrayRecordShards}
DEFAULT = TFRecordShards.name


def names_of(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"tfrecord,arrayrecord"`` or ``["tfrecord", "arrayrecord"]`` as known names, in order, each once."""
    given = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(dict.fromkeys(n.strip().lower() for n in given if n.strip()))
    if not names:
        raise UsageError(f"--format needs a container name (known: {', '.join(CONTAINERS)})")
    unknown = [n for n in names if n not in CONTAINERS]
    if unknown:
        raise UsageError(f"unknown --format {unknown[0]!r} (known: {', '.join(CONTAINERS)}; several with a comma: tfrecord,arrayrecord)")
    return names


def configured(names: Sequence[str], compression: str | None = None, index: bool = True) -> tuple[ShardContainer, ...]:
    """The adapters of ``names``, each with its own settings."""
    return tuple(CONTAINERS[name].with_settings(compression, index) for name in names)


def named(name: str, compression: str = "auto") -> ShardContainer:
    """The container ``name`` (a split's format in a manifest) to read files with."""
    try:
        return CONTAINERS[name].for_reading(compression)
    except KeyError:
        raise UsageError(
            f"shards in container {name!r}, which this shardkit does not know (known: {', '.join(CONTAINERS)}): upgrade shardkit"
        ) from None


def of_file(path: str, compression: str = "auto") -> ShardContainer:
    """The container a file is in, by its name, to read it with; a name no container's fits is
    read as TFRecord (whose walk says in one line when a file is not one)."""
    name = path.rsplit("/", 1)[-1]
    for container in CONTAINERS.values():
        if container.names_file(name):
            return container.for_reading(compression)
    return CONTAINERS[DEFAULT].for_reading(compression)


def recognised(head: bytes) -> tuple[ShardContainer, str] | None:
    """The container (to read with) and compression of a file that starts with ``head``, told by
    its content alone (a GZIP TFRecord file with any name, an ArrayRecord file renamed); None: no
    container's file starts so."""
    for container in sorted(CONTAINERS.values(), key=lambda c: c.name != ArrayRecordShards.name):  # its signature is exact
        compression = container.recognises(head)
        if compression is not None:
            return container.for_reading(compression), compression
    return None


def is_shard_file(name: str) -> bool:
    """Whether a file named ``name`` is a shard of some container's."""
    return any(container.names_file(name) for container in CONTAINERS.values())


def markers() -> tuple[str, ...]:
    """What a shard file's name holds, for every container (for saying what a folder lacked)."""
    return tuple(m for container in CONTAINERS.values() for m in container.markers)


def write_indexes(paths: Sequence[str], workers: int = 1, compression: str = "auto") -> list[IndexReport]:
    """``shardkit index``: a ``.idx`` beside each TFRecord file, in parallel; a file of a container
    that carries its own index gets a report saying so, and nothing is written for it."""
    own = {path: of_file(path) for path in paths if of_file(path).indexes_itself}
    written = iter(idx_sidecar.write_idx_files([p for p in paths if p not in own], workers, compression))
    return [
        IndexReport(path, 0, None, skipped=f"an {own[path].title} file carries its own index") if path in own else next(written)
        for path in paths
    ]


def built_suffixes() -> tuple[str, ...]:
    """Globs of the ends of every shard name (with sidecars) any container writes in OUT."""
    return tuple(p for container in CONTAINERS.values() for p in container.suffixes)
