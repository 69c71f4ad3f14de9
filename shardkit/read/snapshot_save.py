"""The TensorFlow half of ``snapshot-materialize``: a program the parent runs, and can stop.

``tf.data.Dataset.save`` is one blocking call into TensorFlow's C++ runtime: a process in it
sees Ctrl-C only when the whole save has finished. So the parent (``read.materialize``) runs
``python -m shardkit.read.snapshot_save`` (a fresh interpreter: it re-runs none of the caller's
script, as multiprocessing's spawn would, and inherits no TensorFlow state, as a fork would),
draws its progress, and on Ctrl-C or SIGTERM ends it and removes its temp folder at once.

Protocol: one JSON request on stdin; on stdout ``progress N`` lines, then one ``answer {json}``
line, with the facts for the metadata or the error (its kind, one line, the traceback). Anything
else the preprocess prints goes to stderr, beside TensorFlow's own log.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from shardkit.errors import ShardkitError
from shardkit.interrupts import quiet_worker
from shardkit.read.tf_datasets import load

# Op types that draw from hidden state: their output differs run to run.
_STATELESS_PREFIXES = ("StatelessRandom", "StatelessTruncatedNormal", "StatelessMultinomial", "StatelessParameterized")
_RANDOM_OPS = {"TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal", "RngReadAndSkip", "RngSkip", "RandomShuffle"}
PROGRESS_EVERY = 0.2  # seconds between progress lines


@dataclasses.dataclass(frozen=True)
class SaveRequest:
    """What the child needs, as plain values."""

    src: str
    split: str
    preprocess: str  # MODULE:FUNCTION or FILE.py:FUNCTION
    identity: str  # its name in messages and the metadata
    temp: str
    compression: str | None
    num_shards: int
    dispatcher: str | None
    progress: bool
    sys_path: list[str]  # the caller's, so MODULE:FUNCTION resolves as it would there


def main() -> None:
    quiet_worker()  # Ctrl-C reaches the whole process group: the parent decides, this child stays quiet
    _die_with_parent()
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of the preprocess (and TensorFlow) go to stderr: stdout is the protocol's
    request = SaveRequest(**json.loads(sys.stdin.read()))
    sys.path.extend(p for p in request.sys_path if p not in sys.path)
    try:
        answer: dict[str, Any] = {"facts": _materialize(request, _Progress(channel) if request.progress else None)}
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from an imported module included: the parent reports it
        answer = {"error": _describe(exc), "kind": _kind(exc), "traceback": traceback.format_exc()}
    channel.write(f"answer {json.dumps(answer)}\n")
    channel.flush()


class _Progress:
    """Counts saved elements and tells the parent, at most every ``PROGRESS_EVERY`` seconds."""

    def __init__(self, channel: IO[str]) -> None:
        self._channel = channel
        self._count = 0
        self._told = 0.0

    def tick(self) -> None:
        self._count += 1
        if time.monotonic() - self._told >= PROGRESS_EVERY:
            self._channel.write(f"progress {self._count}\n")
            self._told = time.monotonic()


def _die_with_parent() -> None:
    """Linux: end this process when the parent dies (even by kill -9), so no save runs on unwatched."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _kind(exc: BaseException) -> str:
    """Who the user should look at: the disk, the source shards, or (by default) the preprocess."""
    name = type(exc).__name__
    if name == "ResourceExhaustedError" and "No space left on device" in str(exc):
        return "no-space"
    if name == "DataLossError":
        return "source"
    if isinstance(exc, ShardkitError):
        return "shardkit"
    return "preprocess"


def _describe(exc: BaseException) -> str:
    """One line: TensorFlow's messages start with context ('in user code:') and end with the point."""
    if isinstance(exc, ShardkitError):
        return str(exc)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    name = type(exc).__name__
    last = lines[-1] if lines else name
    point = last if last.startswith(name) else f"{name}: {last}"
    where = next((line for line in reversed(lines) if line.startswith("File ")), None)
    return point + (f" ({where})" if where else "")


def _materialize(request: SaveRequest, progress: _Progress | None) -> dict[str, Any]:
    import tensorflow as tf

    function = load_preprocess(request.preprocess)
    source = load(request.src, request.split, decode_images=True, deterministic=True)
    bad = random_ops(function, source.element_spec)
    if bad:
        raise ShardkitError(
            f"--preprocess {request.identity} uses random ops ({', '.join(bad)}): a materialized random augmentation is the same "
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


def load_preprocess(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` or ``path/to/file.py:function`` (the parent has checked its form,
    found its source and named it: ``read.materialize.preprocess_identity``)."""
    module_name, _, function_name = spec.rpartition(":")
    try:
        if module_name.endswith(".py"):
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
    function: Callable[..., Any] | None = getattr(module, function_name, None)
    if not callable(function):
        raise ShardkitError(f"--preprocess {spec!r}: {module_name} has no function {function_name!r}")
    return function


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


def _save(dataset: Any, path: str, compression: str | None, num_shards: int, progress: _Progress | None) -> None:
    """``Dataset.save`` with a content-hash shard function; every saved element ticks ``progress``."""
    import tensorflow as tf

    def tick() -> int:
        assert progress is not None
        progress.tick()
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


if __name__ == "__main__":
    main()
