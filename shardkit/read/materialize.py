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
  augmentation is frozen forever (the snapshot-before-shuffle pitfall);
* TensorFlow runs in a child process (``read.snapshot_save``): a save is one blocking call that
  would see Ctrl-C only at its end, while the parent can stop the child at once, remove the temp
  folder and say that nothing was published.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import tokenize
import uuid
from pathlib import Path
from typing import Any

from shardkit.errors import Interrupted, OutputError, ShardkitError, StateError, UsageError
from shardkit.interrupts import held
from shardkit.output.manifest import Manifest
from shardkit.read import snapshot_save
from shardkit.read.tf_datasets import read_manifest
from shardkit.storage import atomic, location, protected
from shardkit.version import __version__

METADATA = "shardkit-snapshot.json"
DEFAULT_NUM_SHARDS = 64  # a 16-core reader interleaves many files; the saving host's core count is irrelevant


@dataclasses.dataclass(frozen=True)
class SnapshotResult:
    path: str
    records: int
    bytes: int
    seconds: float
    up_to_date: bool  # True when an existing snapshot already matched and nothing was done
    metadata: dict[str, Any]


def preprocess_identity(spec: str) -> tuple[str, str]:
    """``module:function`` or ``path/to/file.py:function`` -> (identity, sha256 of its module's source).

    Read from the source file, not by importing it: a preprocess module imports TensorFlow, which
    belongs in the child that saves, and a rerun that finds the snapshot up to date needs none.
    """
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise UsageError(f"--preprocess {spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    if module_name.endswith(".py"):
        if not os.path.isfile(module_name):
            raise ShardkitError(f"--preprocess {spec!r}: no such file {module_name}")
        path, identity = module_name, f"{os.path.basename(module_name)}:{function_name}"
    else:
        try:
            found = importlib.util.find_spec(module_name)
        except Exception as exc:  # finding a.b imports package a here, and its import may fail any way
            raise ShardkitError(f"--preprocess {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
        if found is None or not found.origin or not os.path.isfile(found.origin):
            raise ShardkitError(f"--preprocess {spec!r}: no module {module_name} with a source file on the Python path")
        path, identity = found.origin, spec
    with tokenize.open(path) as f:  # as inspect.getsource reads it: the same hash as before this change
        source = f.read()
    return identity, hashlib.sha256(source.encode()).hexdigest()


def source_fingerprint(manifest: Manifest, split: str) -> str:
    shards = [(s.name, s.records, s.crc32c) for s in manifest.splits[split].shards]
    blob = json.dumps({"build": manifest.fingerprint, "split": split, "shards": shards}, sort_keys=True)
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
        raise UsageError("--num-shards must be at least 1")
    manifest = read_manifest(src)
    if split not in manifest.splits:
        raise ShardkitError(f"{src}: no split {split!r} (splits: {', '.join(manifest.splits)})")
    expected = manifest.splits[split].records
    identity, code_hash = preprocess_identity(preprocess)
    source = location.absolute(src)  # a gs:// URL stays one: the child's TensorFlow reads it
    wanted = {"source": source, "source_fingerprint": source_fingerprint(manifest, split), "split": split,
              "preprocess": identity, "preprocess_sha256": code_hash, "compression": compression or "NONE"}  # fmt: skip

    snap = os.path.abspath(snap)
    existing = _existing(snap)
    if existing is not None and all(existing.get(k) == v for k, v in wanted.items() if k != "source"):
        return SnapshotResult(snap, existing["records"], existing["bytes"], time.perf_counter() - started, True, existing)
    _check_replaceable(snap, existing, wanted, overwrite, [src, preprocess.rpartition(":")[0]])

    for stale in glob.glob(glob.escape(snap) + ".incomplete-" + "[0-9a-f]" * 8):  # this command's temp names alone
        shutil.rmtree(stale, ignore_errors=True)  # left by a killed run: never published, safe to drop
    temp = f"{snap}.incomplete-{uuid.uuid4().hex[:8]}"
    show = sys.stderr.isatty() if progress is None else progress
    request = snapshot_save.SaveRequest(source, split, preprocess, identity, temp, compression, num_shards, dispatcher, show,
                                        [os.path.abspath(p) if p else p for p in sys.path])  # fmt: skip
    try:
        facts = _save_in_child(request, expected, snap)
        count = facts["records"]
        if count != expected:
            raise ShardkitError(f"{snap}: the save wrote {count} elements but {src} has {expected} {split} records; nothing was published")
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(temp) for f in files)
        metadata = {
            **wanted,
            "format": "shardkit.snapshot",
            "version": 1,
            "shardkit_version": __version__,
            "tensorflow_version": facts["tensorflow_version"],
            "element_spec": facts["element_spec"],
            "records": count,
            "bytes": size,
            "num_shards": None if dispatcher else num_shards,
            "dispatcher": dispatcher,
            "seconds": round(time.perf_counter() - started, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic.write_json(os.path.join(temp, METADATA), metadata)
        _publish(temp, snap)
    except KeyboardInterrupt as exc:
        raise Interrupted.after(exc, f"interrupted: nothing was published at {snap}; run the same command to start again") from exc
    finally:
        if os.path.exists(temp):
            shutil.rmtree(temp, ignore_errors=True)
    return SnapshotResult(snap, count, size, time.perf_counter() - started, False, metadata)


def _save_in_child(request: snapshot_save.SaveRequest, expected: int, snap: str) -> dict[str, Any]:
    """Run the TensorFlow save as a child program, drawing its progress; stop it on an interrupt."""
    from tqdm import tqdm

    package_root = str(Path(__file__).resolve().parents[2])  # the child runs this same shardkit
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    with held():  # the child starts with Ctrl-C held, until it has chosen to leave it to us
        child = subprocess.Popen([sys.executable, "-m", "shardkit.read.snapshot_save"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    answer: dict[str, Any] | None = None
    try:
        assert child.stdin is not None and child.stdout is not None
        with child.stdin:
            child.stdin.write(json.dumps(dataclasses.asdict(request)))
        with tqdm(total=expected, unit="rec", disable=not request.progress, dynamic_ncols=True) as bar:
            for line in child.stdout:
                kind, _, payload = line.partition(" ")
                if kind == "progress":
                    bar.update(int(payload) - bar.n)
                elif kind == "answer":
                    answer = json.loads(payload)
                    bar.update(expected - bar.n if "facts" in answer else 0)
        child.wait()
    finally:
        if child.poll() is None:
            with held():
                child.terminate()
                try:
                    child.wait(5)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    if answer is None:
        raise ShardkitError(
            f"the process saving the snapshot ended without an answer (exit status {child.returncode}), most often killed for "
            "using too much memory (see `dmesg`); nothing was published: rerun to start again"
        )
    if "facts" in answer:
        facts: dict[str, Any] = answer["facts"]
        return facts
    cause = _ChildTraceback(answer["traceback"])  # shown with --debug
    if answer["kind"] == "no-space":
        message = f"no space left on device writing {snap}: nothing was published; free space and run the same command again"
        raise OutputError(message) from cause
    if answer["kind"] == "source":
        message = f"{request.src}: a shard cannot be read ({answer['error']}); shardkit verify {request.src} finds which"
        raise ShardkitError(message) from cause
    if answer["kind"] == "preprocess":
        raise ShardkitError(f"--preprocess {request.preprocess}: {answer['error']}") from cause
    raise ShardkitError(answer["error"]) from cause


class _ChildTraceback(Exception):
    """The traceback of the child that saved, as text: the cause of the one-line error."""


def _existing(snap: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(snap, METADATA), encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def _check_replaceable(snap: str, existing: dict[str, Any] | None, wanted: dict[str, Any], overwrite: bool, inputs: list[str]) -> None:
    """``snap`` may be written: it is missing or an empty folder, or a snapshot this command wrote
    (replaced with ``overwrite``); never anything else, never a folder holding an input."""
    if not os.path.lexists(snap):
        return
    # The source shards and the preprocess file (a module name is no path: it names no file here).
    protected.refuse_replacing(snap, protected.Inputs(p for p in inputs if location.is_url(p) or os.path.exists(p)),
                               command="snapshot-materialize", remedy="give -o a new folder")  # fmt: skip
    if os.path.isdir(snap) and not os.path.islink(snap) and not os.listdir(snap):
        return
    if existing is None:
        raise StateError(
            f"{snap}: exists and is not a shardkit snapshot (no {METADATA}); snapshot-materialize replaces only the snapshots it "
            "wrote, --overwrite or not: give -o a new folder, or remove this one yourself"
        )
    if not overwrite:
        raise StateError(f"{snap}: {_why_stale(existing, wanted)}; use --overwrite to rebuild it, or another path")


def _why_stale(existing: dict[str, Any], wanted: dict[str, Any]) -> str:
    if existing.get("source_fingerprint") != wanted["source_fingerprint"] or existing.get("split") != wanted["split"]:
        return "is stale: the source shards changed since it was materialized"
    if existing.get("preprocess") != wanted["preprocess"] or existing.get("preprocess_sha256") != wanted["preprocess_sha256"]:
        return f"is stale: the preprocess code changed ({existing.get('preprocess')} was materialized)"
    return f"was saved with compression {existing.get('compression')}, not {wanted['compression']}"


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
