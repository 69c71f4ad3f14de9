"""The TensorFlow half of ``snapshot-materialize``, run in a child process the parent can stop.

``tf.data.Dataset.save`` is one blocking call into TensorFlow's C++ runtime: a process in it
sees Ctrl-C only when the whole save has finished. So the parent (``read.snapshot``) runs this
in a child, polls its progress, and on Ctrl-C or SIGTERM ends it and removes its temp folder
within a second. The child imports the preprocess module, refuses stateful random ops, saves,
counts what it saved, and sends back one answer: the facts for the metadata, or the error's line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from shardkit.errors import ShardkitError
from shardkit.interrupts import quiet_worker
from shardkit.read.tfdata import load

# Op types that draw from hidden state: their output differs run to run.
_STATELESS_PREFIXES = ("StatelessRandom", "StatelessTruncatedNormal", "StatelessMultinomial", "StatelessParameterized")
_RANDOM_OPS = {"TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal", "RngReadAndSkip", "RngSkip", "RandomShuffle"}



@dataclasses.dataclass(frozen=True)
class SaveRequest:
    """What the child needs, as plain values (it starts fresh: spawn, not fork)."""

    src: str
    split: str
    preprocess: str  # MODULE:FUNCTION or FILE.py:FUNCTION
    temp: str
    compression: str | None
    num_shards: int
    dispatcher: str | None


def run(request: SaveRequest, progress: Any, answer: Connection) -> None:
    """The child's entry point: save, then send ``("ok", facts)`` or ``("error", line)``."""
    quiet_worker()  # Ctrl-C reaches the whole process group: the parent decides, this child stays quiet
    try:
        answer.send(("ok", _materialize(request, progress)))
    except ShardkitError as exc:
        answer.send(("error", str(exc)))
    except Exception as exc:  # a preprocess that fails inside TensorFlow: its first line, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        answer.send(("error", f"--preprocess {request.preprocess}: {type(exc).__name__}: {first}"))


def _materialize(request: SaveRequest, progress: Any) -> dict[str, Any]:
    import tensorflow as tf

    function, identity, _ = resolve_preprocess(request.preprocess)
    source = load(request.src, request.split, decode_images=True, deterministic=True)
    bad = random_ops(function, source.element_spec)
    if bad:
        raise ShardkitError(
            f"--preprocess {identity} uses random ops ({', '.join(bad)}): a materialized random augmentation is the same "
            "in every epoch and every run. Materialize only the deterministic part, and apply random augmentation "
            "after Dataset.load (and after shuffle)."
        )
    dataset = source.map(function, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if request.dispatcher:
        _distributed_save(dataset, request.temp, request.dispatcher, request.compression)
    else:
        _save(dataset, request.temp, request.compression, request.num_shards, progress)
    return {
        "records": _count(request.temp, dataset.element_spec, request.compression),
        "element_spec": repr(dataset.element_spec),
        "tensorflow_version": tf.__version__,
    }


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


def _save(dataset: Any, path: str, compression: str | None, num_shards: int, progress: Any) -> None:
    """``Dataset.save`` with a content-hash shard function; every saved element adds one to
    ``progress`` (a shared counter the parent's progress bar reads), unless it is None."""
    import tensorflow as tf

    def tick() -> int:
        with progress.get_lock():
            progress.value += 1
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

    watched = dataset if progress is None else dataset.map(counted)
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
