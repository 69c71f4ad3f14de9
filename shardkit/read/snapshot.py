"""``shardkit snapshot-materialize``: run deterministic preprocessing once, save it in TensorFlow's format.

The result is written with ``tf.data.Dataset.save`` (or ``tf.data.experimental.distributed_save``
on a tf.data service cluster), so training code reads it with plain ``tf.data.Dataset.load(SNAP)``
and no shardkit import. ``save`` over ``snapshot`` because ``save`` writes a self-describing
directory that ``load`` reads anywhere, while ``snapshot`` is a pass-through op that silently
recomputes when its fingerprint changes and leaves the staleness question open.

Safety rules:
* it materializes into ``SNAP.incomplete-XXXX`` beside SNAP and renames it into place only when
  the save returned and the element count matches the source's record count: TensorFlow's
  loader does not check that a save finished, so a killed save never sits at SNAP;
* ``SNAP/shardkit-snapshot.json`` records the source manifest's fingerprint and the preprocess
  function's identity and source hash: a rerun with the same inputs is a no-op, a changed source
  or preprocess is refused (or rebuilt with ``overwrite``) instead of serving stale data;
* the default is no compression, so ``tf.data.Dataset.load(SNAP)`` reads it as is; with
  ``compression="GZIP"`` the reader must pass ``compression="GZIP"`` to ``load`` too (TensorFlow
  does not detect it, and fails with a DataLossError);
* a preprocess function with a stateful random op is refused: a materialized random
  augmentation is frozen forever (the snapshot-before-shuffle pitfall).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from shardkit.errors import ShardkitError
from shardkit.read.tfdata import load, read_manifest
from shardkit.storage import atomic
from shardkit.version import __version__

METADATA = "shardkit-snapshot.json"
DEFAULT_NUM_SHARDS = 64  # a 16-core reader interleaves many files; the saving host's core count is irrelevant

# Op types that draw from hidden state: their output differs run to run.
_STATELESS_PREFIXES = ("StatelessRandom", "StatelessTruncatedNormal", "StatelessMultinomial", "StatelessParameterized")
_RANDOM_OPS = {"TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal", "RngReadAndSkip", "RngSkip", "RandomShuffle"}


@dataclasses.dataclass(frozen=True)
class SnapshotResult:
    path: str
    records: int
    bytes: int
    seconds: float
    up_to_date: bool  # True when an existing snapshot already matched and nothing was done
    metadata: dict[str, Any]


def resolve_preprocess(spec: str) -> tuple[Callable[..., Any], str, str]:
    """``module:function`` or ``path/to/file.py:function`` -> (function, identity, sha256 of its module's source)."""
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise ShardkitError(f"--preprocess {spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    try:
        if module_name.endswith(".py"):
            if not os.path.isfile(module_name):
                raise ShardkitError(f"--preprocess {spec!r}: no such file {module_name}")
            name = "shardkit_preprocess_" + hashlib.sha256(os.path.abspath(module_name).encode()).hexdigest()[:12]
            loader_spec = importlib.util.spec_from_file_location(name, module_name)
            if loader_spec is None or loader_spec.loader is None:
                raise ShardkitError(f"--preprocess {spec!r}: cannot load {module_name}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ShardkitError:
        raise
    except Exception as exc:
        raise ShardkitError(f"--preprocess {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ShardkitError(f"--preprocess {spec!r}: {module_name} has no function {function_name!r}")
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        source = inspect.getsource(function)
    return (
        function,
        f"{os.path.basename(module_name) if module_name.endswith('.py') else module_name}:{function_name}",
        (hashlib.sha256(source.encode()).hexdigest()),
    )


def random_ops(preprocess: Callable[..., Any], element_spec: Any) -> list[str]:
    """Stateful random op types in the traced preprocess graph, including nested functions."""
    import tensorflow as tf

    concrete = tf.function(preprocess, autograph=True).get_concrete_function(element_spec)
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    found = set()
    for node in nodes:
        op = node.op
        if op.startswith(_STATELESS_PREFIXES):
            continue
        if op in _RANDOM_OPS or op.startswith("Random") or (op.startswith("Stateful") and "Call" not in op):
            found.add(op)
    return sorted(found)


def source_fingerprint(manifest: dict[str, Any], split: str) -> str:
    shards = [(s["name"], s["records"], s["crc32c"]) for s in manifest["splits"][split]["shards"]]
    blob = json.dumps({"build": manifest["fingerprint"], "split": split, "shards": shards}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def materialize_snapshot(
    src: str,
    snap: str,
    preprocess: str,
    *,
    split: str = "train",
    compression: str | None = None,
    num_shards: int = DEFAULT_NUM_SHARDS,
    overwrite: bool = False,
    progress: bool | None = None,
    dispatcher: str | None = None,
) -> SnapshotResult:
    """Materialize ``preprocess`` over ``src``'s split into ``snap`` (see the module docstring)."""
    started = time.perf_counter()
    if num_shards < 1:
        raise ShardkitError("--num-shards must be at least 1")
    manifest = read_manifest(src)
    if split not in manifest["splits"]:
        raise ShardkitError(f"{src}: no split {split!r} (splits: {', '.join(manifest['splits'])})")
    expected = manifest["splits"][split]["records"]
    function, identity, code_hash = resolve_preprocess(preprocess)
    wanted = {"source": os.path.abspath(src), "source_fingerprint": source_fingerprint(manifest, split), "split": split,
              "preprocess": identity, "preprocess_sha256": code_hash, "compression": compression or "NONE"}  # fmt: skip

    snap = os.path.abspath(snap)
    existing = _existing(snap)
    if existing is not None and all(existing.get(k) == v for k, v in wanted.items() if k != "source"):
        return SnapshotResult(snap, existing["records"], existing["bytes"], time.perf_counter() - started, True, existing)
    if os.path.exists(snap) and not overwrite:
        raise ShardkitError(f"{snap}: {_why_stale(existing, wanted)}; use --overwrite to rebuild it, or another path")

    import tensorflow as tf

    for stale in glob.glob(glob.escape(snap) + ".incomplete-*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by a killed run: never published, safe to drop
    source = load(src, split, decode_images=True, deterministic=True)
    bad = random_ops(function, source.element_spec)
    if bad:
        raise ShardkitError(
            f"--preprocess {identity} uses random ops ({', '.join(bad)}): a materialized random augmentation is the same "
            "in every epoch and every run. Materialize only the deterministic part, and apply random augmentation "
            "after Dataset.load (and after shuffle)."
        )
    dataset = source.map(function, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    temp = f"{snap}.incomplete-{uuid.uuid4().hex[:8]}"
    try:
        if dispatcher:
            _distributed_save(dataset, temp, dispatcher, compression)
        else:
            _save(dataset, temp, compression, num_shards, expected, progress)
        count = _count(temp, dataset.element_spec, compression)
        if count != expected:
            raise ShardkitError(f"{snap}: the save wrote {count} elements but {src} has {expected} {split} records; nothing was published")
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(temp) for f in files)
        metadata = {
            **wanted,
            "format": "shardkit.snapshot",
            "version": 1,
            "shardkit_version": __version__,
            "tensorflow_version": tf.__version__,
            "element_spec": repr(dataset.element_spec),
            "records": count,
            "bytes": size,
            "num_shards": None if dispatcher else num_shards,
            "dispatcher": dispatcher,
            "seconds": round(time.perf_counter() - started, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic.write_json(os.path.join(temp, METADATA), metadata)
        _publish(temp, snap)
    finally:
        if os.path.exists(temp):
            shutil.rmtree(temp, ignore_errors=True)
    return SnapshotResult(snap, count, size, time.perf_counter() - started, False, metadata)


def _existing(snap: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(snap, METADATA), encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def _why_stale(existing: dict[str, Any] | None, wanted: dict[str, Any]) -> str:
    if existing is None:
        return "exists but is not a finished shardkit snapshot"
    if existing.get("source_fingerprint") != wanted["source_fingerprint"] or existing.get("split") != wanted["split"]:
        return "is stale: the source shards changed since it was materialized"
    if existing.get("preprocess") != wanted["preprocess"] or existing.get("preprocess_sha256") != wanted["preprocess_sha256"]:
        return f"is stale: the preprocess code changed ({existing.get('preprocess')} was materialized)"
    return f"was saved with compression {existing.get('compression')}, not {wanted['compression']}"


def _save(dataset: Any, path: str, compression: str | None, num_shards: int, expected: int, progress: bool | None) -> None:
    import tensorflow as tf
    from tqdm import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=expected, unit="rec", disable=not show, dynamic_ncols=True) as bar:

        def tick() -> int:
            bar.update(1)
            return 0

        def counted(*element: Any) -> Any:
            done = tf.py_function(tick, [], tf.int32)
            with tf.control_dependencies([done]):
                element = tf.nest.map_structure(tf.identity, element)
            return element[0] if len(element) == 1 else element

        def shard_of(*element: Any) -> Any:
            # Spread elements over files by content hash: any element structure, no state needed.
            parts = [tf.io.serialize_tensor(t) for t in tf.nest.flatten(element)]
            return tf.strings.to_hash_bucket_fast(tf.strings.reduce_join(tf.stack(parts)), num_shards)

        watched = dataset.map(counted) if show else dataset
        watched.save(path, compression=compression, shard_func=shard_of)


def _distributed_save(dataset: Any, path: str, dispatcher: str, compression: str | None) -> None:
    import tensorflow as tf

    address = dispatcher.removeprefix("grpc://")
    tf.data.experimental.distributed_save(dataset, path, address, compression=compression or "")
    tf.data.Dataset.load(path, wait=True).cardinality()  # blocks until every worker has finished


def _count(path: str, element_spec: Any, compression: str | None) -> int:
    import tensorflow as tf

    loaded = tf.data.Dataset.load(path, element_spec=element_spec, compression=compression)
    known = int(loaded.cardinality().numpy())
    if known >= 0:
        return known
    return int(loaded.reduce(0, lambda n, _: n + 1).numpy())


def _publish(temp: str, snap: str) -> None:
    """Rename the finished snapshot into place; an older one is moved aside first, then removed."""
    old = None
    if os.path.exists(snap):
        old = f"{snap}.replaced-{uuid.uuid4().hex[:8]}"
        os.replace(snap, old)
    os.replace(temp, snap)
    atomic.fsync_dir(os.path.dirname(snap) or ".")
    if old:
        shutil.rmtree(old, ignore_errors=True)
