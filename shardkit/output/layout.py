"""Every name in an output folder: shards, sidecars, metadata, state, locks, plans, temp files.

OUT/
  train-00000-of-00004.tfrecord      finished shards (final names appear only when complete), named by their
                                     container's adapter (``formats.containers``): its suffix, its sidecar
  train-00000-of-00004.tfrecord.idx  a TFRecord shard's index (offset and length per record), uncompressed only
  .train-00001-of-00004.tfrecord.incomplete-1a2b3c4d   a shard being written
  manifest.json                      written last, atomically
  errors.jsonl                       entries skipped with --on-error skip
  dataset_info.json, features.json   TFDS metadata (uncompressed shards only)
  KEY.labels.txt                     the class names of each class_name feature, for TFDS (a/b: a.b.labels.txt)
  metadata.json, KEY.text.subwords   what else TFDS reads beside dataset_info.json, copied from a TFDS folder resharded
  .shardkit/build.json               the build's fingerprint, resolved parameters and plan
  .shardkit/shards/NAME.json         one record per finished shard (the commit point)
  .shardkit/lock                     held (flock) by the one build running into OUT
  .shardkit/lock.node-K              held by node K of a multi-node build, beside the shared lock
  .shardkit/plan-<fingerprint>/      the plan: one SPLIT.plan file per split, its entries in shard order
  .shardkit/plan-<fingerprint>/SPLIT.plan.rows/   a table's mapped columns staged for the shards (rows with files), until the manifest
  .shardkit/tmp/                     scratch space while planning

Shards, ``.idx`` files, metadata, the build state and the shard records are each written under a
temp name beside their own, ``.NAME.incomplete-XXXXXXXX`` (at OUT's top, in ``.shardkit/`` and in
``.shardkit/shards/``), and renamed when whole: a build removes those temp names (``temp_files``)
wherever it stops, and its rerun those a ``kill -9`` left.

When OUT is in a bucket (a ``gs://``/``s3://`` URL) the same names are objects, and what is
written before it is finished (temp shards, planning scratch) lives in a local staging folder
instead, ``$TMPDIR/shardkit-staging-<uid>/<hash of OUT>/``: objects appear whole, so nothing partial
is ever in the bucket. The temp-name pattern is ``storage.atomic``'s, and a shard's name and
sidecar are its container's (``formats.containers``: they apply to files anywhere); this module
applies them to OUT.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable

from shardkit.errors import OutputError
from shardkit.formats.containers import registry
from shardkit.storage import location
from shardkit.storage.atomic import naming, temp_name, temp_target

MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
STATE_DIR = ".shardkit"
BUILD_STATE = "build.json"  # in STATE_DIR
SHARD_RECORDS = "shards"  # in STATE_DIR
LOCK = "lock"  # in STATE_DIR
_NODE_LOCK = "lock.node-"
_PLAN = "plan-"
_RECORD = ".json"
_SPREAD = ".records"  # a shuffled shard's records, before they are spread over it
_LABELS = ".labels.txt"
_SCRATCH = "tmp"
# What a build writes at OUT's top (and --overwrite may delete): shards with their .idx, and the metadata.
LABEL_MAP = "label_map.pbtxt"  # the TF Object Detection API's label map, for a build with objects
STATISTICS = "statistics.pb"  # per split and feature, a DatasetFeatureStatisticsList (TFDV, Facets)
DUPLICATES = "duplicates.jsonl"  # with --duplicates: each group of duplicate inputs, a line
METADATA_NAMES = (MANIFEST, ERRORS, DATASET_INFO, FEATURES, LABEL_MAP, STATISTICS, DUPLICATES)  # beside the shards and the class lists
TFDS_BUILDER_METADATA = "metadata.json"  # a TFDS builder's own (tfds.core.MetadataDict)
TFDS_EXTRAS_INPUT = "tfds_extra_files"  # where a reshard's build state lists the files it copied from a TFDS folder
# Files TFDS reads beside dataset_info.json: class names, a deprecated text encoder's vocabulary, the builder's metadata.
_TFDS_EXTRAS = ("*" + _LABELS, *(f"*.text.{kind}" for kind in ("subwords", "bytes", "tokens", "tokenizer")), TFDS_BUILDER_METADATA)
_SHARD = "*-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"  # and a container's suffix
_BUILT = (
    *(_SHARD + suffix for suffix in registry.built_suffixes()),
    MANIFEST,
    ERRORS,
    DATASET_INFO,
    FEATURES,
    LABEL_MAP,
    STATISTICS,
    DUPLICATES,
    *_TFDS_EXTRAS,
)


def is_tfds_extra(name: str) -> bool:
    """Whether ``name`` beside ``dataset_info.json`` is a file TFDS reads with the dataset (class
    names, a text encoder's vocabulary, the builder's metadata), which travels with its shards."""
    return not name.startswith(".") and any(fnmatch.fnmatchcase(name, p) for p in _TFDS_EXTRAS)


def labels_name(key: str) -> str:
    """The class names of feature ``key``, one per line, where TFDS' ``ClassLabel`` reads them: a
    ``/`` in a key becomes ``.``, as TFDS names the file (``convert_feature_name_to_filename``)."""
    return key.replace("/", ".") + _LABELS


def is_built_name(name: str) -> bool:
    """Whether ``name`` at OUT's top is a file a build writes; hidden names (temp files) are not."""
    return not name.startswith(".") and any(fnmatch.fnmatchcase(name, p) for p in _BUILT)


def is_written(relative: str) -> bool:
    """Whether the path ``relative`` (to OUT) is one a build writes, replaces or deletes: a built
    name or a temp name at OUT's top, or anything under ``.shardkit/``."""
    top, _, rest = relative.partition("/")
    return top == STATE_DIR or (not rest and (is_built_name(top) or is_temp_name(top)))


def manifest_path(out: str) -> str:
    return location.join(out, MANIFEST)


def state_dir(out: str) -> str:
    return location.join(out, STATE_DIR)


def build_state_path(out: str) -> str:
    return location.join(state_dir(out), BUILD_STATE)


def lock_name(node: int | None = None) -> str:
    """The lock of a single-machine build (``node`` None), or node ``node``'s of a multi-node one."""
    return LOCK if node is None else f"{_NODE_LOCK}{node}"


def lock_path(out: str, node: int | None = None) -> str:
    return location.join(state_dir(out), lock_name(node))


def is_node_lock(name: str) -> bool:
    return name.startswith(_NODE_LOCK)


def plan_name(fingerprint: str) -> str:
    """The folder under ``.shardkit`` that holds the plan of the build with ``fingerprint``."""
    return f"{_PLAN}{fingerprint[:16]}"


def plan_folders(out: str) -> list[str]:
    """Every plan folder under ``.shardkit``, this build's and others'."""
    return location.glob(location.join(glob.escape(state_dir(out)), _PLAN + "*"))


def plan_file(split: str) -> str:
    """The plan of ``split``, in the plan folder."""
    return f"{split}.plan"


def staged_rows(plan_file: str) -> str:
    """Beside the plan file ``plan_file``, the folder of its table rows staged for the shards."""
    return f"{plan_file}.rows"


def shard_records_dir(out: str) -> str:
    return location.join(state_dir(out), SHARD_RECORDS)


def shard_record_name(shard: str) -> str:
    return shard + _RECORD


def is_shard_record_name(name: str) -> bool:
    return name.endswith(_RECORD) and not name.startswith(".")


def shard_record_path(out: str, shard: str) -> str:
    return location.join(shard_records_dir(out), shard_record_name(shard))


def work_dir(out: str) -> str:
    """Where unfinished files of OUT are written: OUT itself, or a local staging folder for a bucket."""
    if not location.is_url(out):
        return out
    return os.path.join(_staging_root(), hashlib.sha256(out.encode()).hexdigest()[:16])


def _staging_root() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"shardkit-staging-{uid}")


def make_work_dir(out: str) -> str:
    """``work_dir(out)``, created; for a bucket, in a folder of this user's alone (mode 0700, owned by
    them), so no other user of a shared machine can read the shards or take the name first."""
    folder = work_dir(out)
    if location.is_url(out):
        root = _staging_root()
        with naming(root):
            os.makedirs(root, mode=0o700, exist_ok=True)
            info = os.lstat(root)
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o077):
            raise OutputError(f"{root}: the staging folder of bucket builds is not this user's alone (mode 0700): remove it, or set TMPDIR")
    with naming(folder):
        os.makedirs(folder, exist_ok=True)
    return folder


def scratch_dir(out: str) -> str:
    if location.is_url(out):
        return os.path.join(work_dir(out), _SCRATCH)
    return os.path.join(state_dir(out), _SCRATCH)


def scratch_plan_dir(out: str, tag: str) -> str:
    """A planning run's own folder in the scratch space, published as ``plan_name`` when whole."""
    return os.path.join(scratch_dir(out), f"{_PLAN}{tag}")


def temp_path(out: str, name: str, tag: str) -> str:
    return os.path.join(work_dir(out), temp_name(name, tag))


def spread_temp_path(out: str, shard: str, tag: str) -> str:
    """Where a shuffled shard's records wait before they are spread over it."""
    return temp_path(out, shard + _SPREAD, tag)


def is_temp_name(name: str) -> bool:
    return temp_target(name) is not None


def temp_files(out: str, names: Iterable[str] | None = None) -> list[str]:
    """Temp files a build of OUT writes, which an interrupted or killed one may leave: at OUT's top
    (in the staging folder, for a bucket) those of shards, their ``.idx`` and spread records, the
    manifest and the metadata; beside the build state; beside the shard records. All of them, or
    only those of the shards ``names`` (a node's own). Only names a build writes: nothing else."""
    shards = None if names is None else set(names)

    def top(target: str) -> bool:  # NAME, NAME.idx, NAME.records of a shard, or metadata
        if shards is None:
            return is_built_name(target)
        return any(target == name or target.startswith(name + ".") for name in shards)  # the shard, its sidecar, its spread records

    def records(target: str) -> bool:
        return is_shard_record_name(target) and (shards is None or target[: -len(_RECORD)] in shards)

    wanted: list[tuple[str, Callable[[str], bool]]] = [(work_dir(out), top)]
    if not location.is_url(out):  # in a bucket, the state and the records are single uploads: no temp objects
        wanted += [(state_dir(out), lambda target: shards is None and target == BUILD_STATE), (shard_records_dir(out), records)]
    found = []
    for folder, owned in wanted:
        try:
            listed = os.listdir(folder)
        except OSError:  # not made yet, or gone
            continue
        found += [os.path.join(folder, n) for n in listed if (target := temp_target(n)) is not None and owned(target)]
    return sorted(found)
