"""``shardkit verify``: prove that shard files (and a shardkit folder) are whole.

Each file is walked by its container's adapter (``formats.containers``): for TFRecord every
record's length and data CRC, its ``.idx``; for any container truncation, and for a shardkit folder each shard's count,
size and checksum against the manifest, missing shards, unlisted shards and leftover temp files.
``deep`` also parses every record as ``tf.train.Example`` against the schema and decodes every
image, and reads a folder's ``label_map.pbtxt`` as the TF OD API loads it. Files are checked in
parallel, one process per file at a time. A folder or file may be a URL (``gs://``, ``s3://``):
objects are streamed in block reads, and a folder is checked against its manifest from one listing.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.errors import Interrupted, ShardkitError
from shardkit.features.registry import of_entry
from shardkit.formats import label_map
from shardkit.formats.containers import registry
from shardkit.formats.containers.adapter import ScanResult, ShardContainer
from shardkit.formats.example_proto import BYTES, DecodeError, decode_example
from shardkit.formats.image_headers import ImageProblem, decoded_size
from shardkit.formats.record_survey import sniff
from shardkit.interrupts import pool_map
from shardkit.output import layout
from shardkit.output.found import Output, expand
from shardkit.output.shard_record import ShardFile
from shardkit.storage import location
from shardkit.units import plural


@dataclasses.dataclass(frozen=True)
class FileReport:
    path: str
    records: int
    bytes: int
    compression: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    files: list[FileReport]
    problems: list[str]  # about a folder as a whole: missing, unlisted or temporary files
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems and all(f.ok for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files": [dataclasses.asdict(f) | {"ok": f.ok} for f in self.files],
            "problems": self.problems,
            "records": sum(f.records for f in self.files),
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
        }


@dataclasses.dataclass(frozen=True)
class _Job:
    path: str
    container: ShardContainer
    deep: bool
    expected: ShardFile | None = None  # the manifest's entry for the file
    records: int | None = None  # ... and its shard's record count
    schema: Sequence[Mapping[str, Any]] | None = None


def verify(paths: Sequence[str], *, deep: bool = False, workers: int = 1, compression: str = "auto") -> VerifyReport:
    """Check every file under ``paths``; never raises for bad data or paths, it reports them."""
    started = time.perf_counter()
    jobs: list[_Job] = []
    problems: list[str] = []
    for given in paths:
        try:
            targets = expand([given])
        except ShardkitError as exc:  # a missing path or an empty folder is a failed check, not a crash
            problems.append(str(exc))
            continue
        for output in targets.outputs:
            jobs.extend(_output_jobs(output, deep, compression, problems))
            if deep:
                problems.extend(_label_map_problems(output))
        jobs.extend(_Job(path, registry.of_file(path, compression), deep) for path in targets.files)
    try:
        reports = pool_map(_check, jobs, workers)
    except KeyboardInterrupt as exc:  # the pool's workers are gone; nothing was written
        stopped = f"interrupted: verify stopped before it checked all {plural(len(jobs), 'file')}; it changes nothing"
        raise Interrupted.after(exc, stopped) from exc
    return VerifyReport(reports, problems, time.perf_counter() - started)


def _output_jobs(output: Output, deep: bool, compression: str, problems: list[str]) -> list[_Job]:
    if location.is_url(output.path):
        return _bucket_output_jobs(output, deep, compression, problems)
    listed = set()
    jobs = []
    for file, job in _listed_jobs(output, deep, compression):
        listed.add(file.name)
        if not os.path.exists(job.path):
            problems.append(f"{job.path}: listed in the manifest but missing")
            continue
        jobs.append(job)
    for name in sorted(os.listdir(output.path)):
        if registry.is_shard_file(name) and name not in listed and not name.startswith("."):
            problems.append(f"{os.path.join(output.path, name)}: a {registry.of_file(name).title} file the manifest does not list")
    for temp in layout.temp_files(output.path):
        problems.append(f"{temp}: temporary file of an interrupted build (rerun the build to resume and clean up)")
    return jobs


def _listed_jobs(output: Output, deep: bool, compression: str) -> list[tuple[ShardFile, _Job]]:
    """A job for every file the manifest lists: each shard in each of its split's formats."""
    jobs = []
    schema = output.manifest.schema
    for split, shard in output.shards():
        for format in output.manifest.splits[split].formats:
            file = shard.file(format)
            path = location.join(output.path, file.name)
            jobs.append((file, _Job(path, registry.named(format, compression), deep, file, shard.records, schema)))
    return jobs


def _label_map_problems(output: Output) -> list[str]:
    """The folder's label map, where it has one, as the TF OD API's ``load_labelmap`` reads it."""
    path = location.join(output.path, layout.LABEL_MAP)
    if not location.isfile(path):
        return []
    found = label_map.problem(location.read_bytes(path))
    return [] if found is None else [f"{path}: {found}"]


def _bucket_output_jobs(output: Output, deep: bool, compression: str, problems: list[str]) -> list[_Job]:
    """``_output_jobs`` for an output in a bucket: one listing instead of a request per shard."""
    names = set(location.listdir(output.path))
    listed = set()
    jobs = []
    for file, job in _listed_jobs(output, deep, compression):
        listed.add(file.name)
        if file.name not in names:
            problems.append(f"{job.path}: listed in the manifest but missing")
            continue
        jobs.append(job)
    for name in sorted(names - listed):
        where = location.join(output.path, name)
        if layout.is_temp_name(name):
            problems.append(f"{where}: temporary object of an interrupted build (rerun the build to resume and clean up)")
        elif registry.is_shard_file(name) and not name.startswith("."):
            problems.append(f"{where}: a {registry.of_file(name).title} object the manifest does not list")
    return jobs


def _check(job: _Job) -> FileReport:
    checker = _DeepChecker(job.schema) if job.deep else None
    result, own_problem = job.container.check(job.path, checker, _sidecar(job))
    if checker is not None and checker.problem and (result.ok or checker.record < result.records):
        return FileReport(job.path, result.records, result.file_bytes, result.compression, checker.problem)
    if not result.ok and not _listed_empty(job, result):
        return FileReport(job.path, result.records, result.file_bytes, result.compression, result.describe_error())
    report = FileReport(job.path, result.records, result.file_bytes, result.compression)
    problem = _manifest_problem(job, result) or own_problem
    return dataclasses.replace(report, problem=problem) if problem else report


def _listed_empty(job: _Job, result: ScanResult) -> bool:
    """A 0-byte file the manifest lists as 0 bytes and no records: a reshard's shard of more hosts than records."""
    return job.expected is not None and job.records == 0 and job.expected.bytes == 0 and result.file_bytes == 0 and not result.records


def _sidecar(job: _Job) -> str | None:
    """The sidecar to check: the one the manifest lists, or one lying beside a plain file."""
    if job.expected is not None:
        name = job.expected.index
        return location.join(location.dirname(job.path), name) if name else None
    for candidate in job.container.owned_sidecars(job.path):
        try:
            if location.exists(candidate):
                return candidate
        except ShardkitError:  # a store that fails this question fails the read of the file too, and says why there
            return None
    return None


def _manifest_problem(job: _Job, result: ScanResult) -> str | None:
    expected = job.expected
    if expected is None or job.records is None:
        return None
    if result.records != job.records:
        return f"the manifest says {plural(job.records, 'record')}, the file has {result.records}"
    if result.file_bytes != expected.bytes:
        return f"the manifest says {plural(expected.bytes, 'byte')}, the file has {result.file_bytes}"
    if result.crc32c != expected.crc32c:
        return f"checksum mismatch: the manifest says crc32c {expected.crc32c}, the file has {result.crc32c}"
    return None


class _DeepChecker:
    """Parses each record as an Example, checks it against the schema, decodes its images."""

    def __init__(self, schema: Sequence[Mapping[str, Any]] | None) -> None:
        self.schema = {f["key"]: f for f in schema} if schema else None
        # Each feature once, by its config key, for the checks its kind makes on a record as a whole (objects).
        self.features = {of_entry(f).feature_key(f): of_entry(f) for f in schema or ()}
        self.record = -1
        self.problem: str | None = None

    def __call__(self, index: int, offset: int, payload: memoryview) -> None:
        if self.problem is None:
            try:
                self._check(bytes(payload))
            except _Bad as exc:
                self.record = index
                self.problem = f"record {index} at byte {offset}: {exc}"

    def _check(self, data: bytes) -> None:
        try:
            features = decode_example(data)
        except DecodeError as exc:
            raise _Bad(f"not a tf.train.Example ({exc})") from None
        if self.schema is None:
            for key, (dtype, values) in features.items():
                if dtype == BYTES and values and sniff(values[0]) in ("jpeg", "png"):  # type: ignore[arg-type]
                    _decode_image(key, values[0])  # type: ignore[arg-type]
            return
        for key, spec in self.schema.items():
            kind = of_entry(spec, spec["dtype"])
            if key not in features:
                raise _Bad(f"feature {key!r} is missing")
            dtype, values = features[key]
            wire = kind.wire_of(spec)  # text is a bytes list
            if dtype != wire and values:
                raise _Bad(f"feature {key!r} is {dtype}, the schema says {spec['dtype']}")
            shape = spec.get("shape")
            if shape is not None and len(values) != (shape[0] if shape else 1):
                raise _Bad(f"feature {key!r} has {len(values)} values, the schema says shape {shape}")
        leads, followers = set(), {}
        for key, spec in self.schema.items():
            kind = of_entry(spec)
            try:
                size = kind.decoded_size(key, features)
            except ImageProblem as exc:
                raise _Bad(str(exc)) from None
            if size is None:  # no pixels
                continue
            if kind.leads:
                leads.add(size)
            if kind.follows_lead:
                followers[key] = size
        for key, size in followers.items():
            if leads and size not in leads:
                raise _Bad(f"mask {key!r} is {size[0]}x{size[1]}, its image is not")
        lead = next(iter(leads)) if len(leads) == 1 else None
        for key, kind in self.features.items():
            problem = kind.record_problem(key, features, lead)
            if problem is not None:
                raise _Bad(problem)


class _Bad(Exception):
    pass


def _decode_image(key: str, data: bytes) -> tuple[int, int]:
    try:
        return decoded_size(data)
    except ImageProblem as exc:
        raise _Bad(f"image {key!r} {exc}") from None
