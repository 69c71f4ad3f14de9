"""Building into a bucket (gs://, s3://) on real local servers: same bytes as on disk, resume after
kill -9, one build per OUT through a lock object, clear lines for what the user can fix."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shardkit
from shardkit.storage import location
from tests.arread import assert_twins, case, needs_array_record
from tests.leftovers import private_tmpdir
from tests.object_stores import Store

SEG_OPTIONS = {"records_per_shard": 8, "workers": 2, "seed": 3, "progress": False}


def _objects(url: str) -> dict[str, bytes]:
    """Every object under ``url``, by its path below it."""
    names = list(location.walk_files(url))
    data = location.read_many([f"{url}/{n}" for n in names])
    return {n: data[f"{url}/{n}"] or b"" for n in names}


SHARD_MARKERS = (".tfrecord", ".array_record")
BOTH = "tfrecord,arrayrecord"  # one build writes both containers: every shard is a .tfrecord and an .array_record


def _shards(folder: dict[str, bytes]) -> dict[str, bytes]:
    return {n: b for n, b in folder.items() if "/" not in n and any(m in n for m in SHARD_MARKERS)}


def _local_files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and any(m in p.name for m in SHARD_MARKERS)}


def _cli(store: Store, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **store.env}
    return subprocess.run([sys.executable, "-m", "shardkit.cli", *args], capture_output=True, text=True, env=env, timeout=300, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("formats", [case("tfrecord"), case(BOTH)])
def test_build_into_a_bucket_equals_the_local_build(seg_data: Path, store: Store, bucket: str, tmp_path: Path, formats: str) -> None:
    local = shardkit.build([seg_data], tmp_path / "local", format=formats, **SEG_OPTIONS)  # type: ignore[arg-type]
    remote = shardkit.build([seg_data], f"{bucket}/out", format=formats, **SEG_OPTIONS)  # type: ignore[arg-type]
    assert remote.out_dir == f"{bucket}/out"
    assert remote.shards_built == local.shards_built == 4
    objects = _objects(f"{bucket}/out")
    assert _shards(objects) == _local_files(tmp_path / "local")  # byte for byte: shards (each container's) and .idx files
    assert len([n for n in _shards(objects) if n.endswith(".array_record")]) == (4 if formats == BOTH else 0)
    manifest = json.loads(objects["manifest.json"])
    assert local.manifest is not None and manifest["splits"] == local.manifest.to_dict()["splits"]
    assert {"dataset_info.json", "features.json", ".shardkit/build.json"} <= set(objects)
    assert not [n for n in objects if "incomplete" in n]  # nothing unfinished is ever an object
    if formats == BOTH:
        assert_twins(str(tmp_path / "local"))  # and so the objects hold the TFRecord records too
        checked = _cli(store, "verify", f"{bucket}/out")  # each .array_record object walked and checked against the manifest
        assert checked.returncode == 0 and "8 files" in checked.stdout, checked.stdout + checked.stderr
        twin = f"{bucket}/out/train-00001-of-00003.array_record"
        damaged = bytearray(objects["train-00001-of-00003.array_record"])
        damaged[1000] ^= 0x01  # a bit of the first record's chunk
        location.put_bytes(twin, bytes(damaged))
        [bad] = [f for f in shardkit.verify([f"{bucket}/out"]).files if not f.ok]
        assert bad.path == twin
        location.put_bytes(twin, objects["train-00001-of-00003.array_record"])

    again = shardkit.build([seg_data], f"{bucket}/out", format=formats, **SEG_OPTIONS)  # type: ignore[arg-type]
    assert (again.shards_built, again.shards_reused) == (0, 4)
    assert not location.exists(f"{bucket}/out/.shardkit/lock")  # released


def test_cli_build_into_a_bucket_with_its_config_there_too(seg_data: Path, store: Store, bucket: str) -> None:
    location.put_bytes(f"{bucket}/config.yaml", b"features:\n  image: {kind: image, column: 0}\n  mask: {kind: mask, column: 1}\n")
    done = _cli(
        store, "build", str(seg_data), "-o", f"{bucket}/cli", "-c", f"{bucket}/config.yaml", "--records-per-shard", "16", "-w", "1", "-q"
    )
    assert done.returncode == 0, done.stderr
    assert {"image", "mask", "source_id"} <= {f["key"] for f in json.loads(location.read_bytes(f"{bucket}/cli/manifest.json"))["schema"]}
    missing = _cli(store, "build", str(seg_data), "-o", f"{bucket}/cli2", "-c", f"{bucket}/nope.yaml", "-q")
    assert missing.returncode == 1 and missing.stderr.startswith(f"Error: {bucket}/nope.yaml: cannot read config"), missing.stderr


def test_missing_bucket_is_one_line(seg_data: Path, store: Store) -> None:
    done = _cli(store, "build", str(seg_data), "-o", f"{store.scheme}://no-such-bucket-here/out", "-q")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "no-such-bucket-here/out: no such bucket" in done.stderr


def test_a_missing_store_package_names_the_extra(seg_data: Path, tmp_path: Path) -> None:
    blocker = "import sys; sys.modules['s3fs'] = None; sys.argv[0] = 'shardkit'; from shardkit.cli import run; run()"
    done = subprocess.run(
        [sys.executable, "-c", blocker, "build", str(seg_data), "-o", "s3://bucket/out", "-q"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: s3:// paths need s3fs: pip install 'shardkit[s3]'"


def test_unreachable_store_is_one_line(seg_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    env["SHARDKIT_STORAGE_OPTIONS"] = json.dumps({"config_kwargs": {"retries": {"max_attempts": 1}}})
    done = subprocess.run(
        [sys.executable, "-m", "shardkit.cli", "build", str(seg_data), "-o", "s3://bucket/out", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("Error: s3://bucket/out")
    assert "cannot be reached" in done.stderr


# -- the lock object --------------------------------------------------------------------------------

HOLDER = """
import sys, time
from shardkit.pipeline.state.bucket_lock import BucketLock
lock = BucketLock(sys.argv[1], "OUT")
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_build_is_refused_while_the_lock_is_held_and_takes_it_once_the_holder_died(
    seg_data: Path, store: Store, bucket: str
) -> None:
    out = f"{bucket}/out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, f"{out}/.shardkit/lock"], stdout=subprocess.PIPE, text=True, env={**os.environ, **store.env}
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(shardkit.errors.OutputError, match=rf"another build is writing here \(pid {holder.pid} on host "):
            shardkit.build([seg_data], out, **SEG_OPTIONS)  # type: ignore[arg-type]
        assert not location.exists(f"{out}/.shardkit/build.json")  # refused before any work
    finally:
        holder.kill()
        holder.wait()
    result = shardkit.build([seg_data], out, **SEG_OPTIONS)  # type: ignore[arg-type]  # its holder is gone: taken at once
    assert result.shards_built == 4


@pytest.mark.parametrize("age, taken", [(3600.0, True), (5.0, False)])
def test_a_lock_from_another_host_is_taken_over_only_when_its_heartbeat_is_stale(
    seg_data: Path, bucket: str, age: float, taken: bool
) -> None:
    out = f"{bucket}/out"
    other = {"host": "some-other-host", "pid": 4242, "started": "1", "since": "earlier", "heartbeat": time.time() - age, "token": "x"}
    location.put_bytes(f"{out}/.shardkit/lock", json.dumps(other).encode())
    if taken:
        with pytest.warns(shardkit.errors.ShardkitWarning, match=r"took over the lock .*some-other-host.*no heartbeat for 3600 s"):
            result = shardkit.build([seg_data], out, **SEG_OPTIONS)  # type: ignore[arg-type]
        assert result.shards_built == 4
    else:
        with pytest.raises(
            shardkit.errors.OutputError, match=r"pid 4242 on host some-other-host.*last heartbeat 5 s ago.*taken over 600 s after"
        ):
            shardkit.build([seg_data], out, **SEG_OPTIONS)  # type: ignore[arg-type]


def test_the_heartbeat_refreshes_the_lock_and_stops_when_taken_over(bucket: str) -> None:
    from shardkit.pipeline.state.bucket_lock import BucketLock

    url = f"{bucket}/lock"
    lock = BucketLock(url, "OUT", heartbeat=0.05)
    lock.acquire()
    first = json.loads(location.read_bytes(url))["heartbeat"]
    deadline = time.monotonic() + 30
    while json.loads(location.read_bytes(url))["heartbeat"] == first:
        assert time.monotonic() < deadline, "no heartbeat"
        time.sleep(0.02)
    location.put_bytes(url, json.dumps({"host": "h2", "pid": 1, "heartbeat": time.time(), "token": "theirs"}).encode())
    while lock.lost is None:
        assert time.monotonic() < deadline, "the takeover went unnoticed"
        time.sleep(0.02)
    lock.release()
    assert json.loads(location.read_bytes(url))["token"] == "theirs"  # not deleted: it is someone else's now


# -- kill -9, then resume ----------------------------------------------------------------------------


@pytest.mark.slow
@needs_array_record
def test_kill_9_mid_build_then_resume_gives_the_records_of_an_uninterrupted_build(
    augmented: Path, augmented_reference_both: Path, store: Store, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both containers: each shard is two objects (.tfrecord and .array_record), each uploaded whole from its staged file."""
    import tempfile

    out = f"{bucket}/out"
    command = [sys.executable, "-m", "shardkit.cli", "build", str(augmented), "-o", out, "-c", str(augmented / "config.yaml"),
               "--records-per-shard", "8", "-w", "2", "--seed", "11", "--format", BOTH, "-q"]  # fmt: skip
    tmpdir = tmp_path / "tmpdir"  # the build's and the resume's: where the shards are staged
    proc = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, **store.env, **private_tmpdir(tmpdir)},
    )  # fmt: skip
    records = f"{out}/.shardkit/shards"
    deadline = time.monotonic() + 120
    while len(location.listdir(records)) < 3:
        assert proc.poll() is None, f"the build ended before the kill point: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "kill point never reached"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI process and its pool workers, mid-upload
    proc.wait(timeout=30)

    assert not location.exists(f"{out}/manifest.json")
    committed = set(location.listdir(records))
    present = location.sizes(out)
    for name in committed:  # a record is never there without its shard, each of its files whole: the size it records
        record = json.loads(location.read_bytes(f"{records}/{name}"))
        [twin] = record["twins"]
        assert (present[record["name"]], present[twin["name"]]) == (record["bytes"], twin["bytes"])
    staging = tmpdir / f"shardkit-staging-{os.getuid()}"
    assert staging.is_dir()  # this build's staging folder, with the temp shards the kill cut short (if it met one)

    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    result = shardkit.build(
        [augmented], out, config=str(augmented / "config.yaml"), records_per_shard=8, workers=2, seed=11, progress=False, format=BOTH
    )  # the lock object of the killed build: its holder ran here and is gone, so it is taken at once
    assert result.shards_reused == len(committed)
    assert result.shards_built + result.shards_reused == 25
    assert _shards(_objects(out)) == _local_files(augmented_reference_both)  # both containers' objects, byte for byte
    assert len([n for n in _local_files(augmented_reference_both) if n.endswith(".array_record")]) == 25
    assert_twins(str(augmented_reference_both))
    assert shardkit.verify([out]).ok
    assert not list(staging.iterdir())  # the temp shards the kill left, and this build's staging folder, are gone


# -- more than one machine -----------------------------------------------------------------------------


@needs_array_record
def test_two_nodes_build_into_one_bucket_prefix(seg_data: Path, bucket: str, tmp_path: Path) -> None:
    """Both containers (the TFRecord objects are checked as before): each node uploads its shards' two files."""
    local = shardkit.build([seg_data], tmp_path / "local", format=BOTH, **SEG_OPTIONS)  # type: ignore[arg-type]
    out = f"{bucket}/nodes"
    first = shardkit.build([seg_data], out, num_nodes=2, node_index=0, format=BOTH, **SEG_OPTIONS)  # type: ignore[arg-type]
    assert first.manifest is None and first.shards_missing == 2
    with pytest.raises(shardkit.errors.OutputError, match="2 of 4 shards are not finished"):
        shardkit.finalize(out)
    second = shardkit.build([seg_data], out, num_nodes=2, node_index=1, format=BOTH, **SEG_OPTIONS)  # type: ignore[arg-type]
    assert second.manifest is not None and local.manifest is not None and second.manifest.splits == local.manifest.splits
    assert _shards(_objects(out)) == _local_files(tmp_path / "local")  # both containers' objects, where built
    location.remove(f"{out}/manifest.json")
    finalized = shardkit.finalize(out).manifest  # from the shard records alone: the twins' sizes and checksums too
    assert finalized is not None and finalized.to_dict() == json.loads(location.read_bytes(f"{out}/manifest.json"))
    assert finalized.splits == local.manifest.splits
    assert_twins(str(tmp_path / "local"))
    assert shardkit.verify([out]).ok


@pytest.mark.slow
@needs_array_record
def test_a_dask_build_into_a_bucket_equals_the_local_build(seg_data: Path, store: Store, bucket: str, tmp_path: Path) -> None:
    """Both containers, from Dask workers that stage each file locally and upload it whole."""
    from shardkit.executors import DaskExecutor
    from tests.pipeline.executors.test_cluster import ENV, dask_cluster

    local = shardkit.build([seg_data], tmp_path / "local", format=BOTH, **SEG_OPTIONS)  # type: ignore[arg-type]
    staging = tmp_path / "worker-tmp"  # empty: the workers make their own staging folder
    staging.mkdir()
    with dask_cluster(2, worker_env={**ENV, **store.env, "TMPDIR": str(staging)}) as (address, _):
        options = {k: v for k, v in SEG_OPTIONS.items() if k != "workers"}
        result = shardkit.build([seg_data], f"{bucket}/dask", executor=DaskExecutor(address), format=BOTH, **options)  # type: ignore[arg-type]
    assert result.shards_built == 4
    assert result.manifest is not None and local.manifest is not None
    assert result.manifest.splits == local.manifest.splits
    objects = _shards(_objects(f"{bucket}/dask"))
    assert objects == _local_files(tmp_path / "local") and len([n for n in objects if n.endswith(".array_record")]) == 4
    assert_twins(str(tmp_path / "local"))
    assert shardkit.verify([f"{bucket}/dask"]).ok
    staged = staging / f"shardkit-staging-{os.getuid()}"
    assert staged.is_dir() and not [p for p in staged.rglob("*") if p.is_file()]  # every staged file went up (or away)


@pytest.mark.slow
def test_the_network_failing_mid_build_is_one_line_and_keeps_finished_shards(
    augmented: Path, augmented_reference: Path, s3_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.object_stores import CuttableProxy, environment

    proxy = CuttableProxy(int(s3_store.endpoint.rsplit(":", 1)[1]))
    try:
        with environment(s3_store.env):
            bucket = s3_store.new_bucket()  # directly, not through the proxy
        env = {**os.environ, **s3_store.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}"}
        env["SHARDKIT_STORAGE_OPTIONS"] = json.dumps({"config_kwargs": {"retries": {"max_attempts": 1}}})  # s3fs still retries
        out = f"{bucket}/out"
        command = [sys.executable, "-m", "shardkit.cli", "build", str(augmented), "-o", out, "-c", str(augmented / "config.yaml"),
                   "--records-per-shard", "8", "-w", "2", "--seed", "11", "-q"]  # fmt: skip
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        with environment(s3_store.env):
            deadline = time.monotonic() + 120
            while len(location.listdir(f"{out}/.shardkit/shards")) < 3:
                assert proc.poll() is None and time.monotonic() < deadline, "the build ended before the cut"
                time.sleep(0.01)
            proxy.sever()
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 1
            assert err.count("\n") == 1 and err.startswith(f"Error: {bucket}/"), err
            committed = location.listdir(f"{out}/.shardkit/shards")
            present = location.sizes(out)
            for name in committed:  # every committed shard is whole: its object has the recorded size
                record = json.loads(location.read_bytes(f"{out}/.shardkit/shards/{name}"))
                assert present[record["name"]] == record["bytes"]
        proxy.restore()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        with environment(s3_store.env):
            assert _shards(_objects(out)) == _local_files(augmented_reference)
    finally:
        proxy.close()


def test_of_two_builds_taking_over_one_stopped_lock_only_one_wins(seg_data: Path, bucket: str) -> None:
    out = f"{bucket}/out"
    stopped = {"host": "some-other-host", "pid": 7, "since": "earlier", "heartbeat": time.time() - 3600, "token": "old"}
    location.put_bytes(f"{out}/.shardkit/lock", json.dumps(stopped).encode())
    location.put_bytes(f"{out}/.shardkit/lock.replaced-old", b"{}")  # another build won the takeover a moment ago
    with pytest.raises(shardkit.errors.OutputError, match="another build took over the lock of a stopped build just now"):
        shardkit.build([seg_data], out, **SEG_OPTIONS)  # type: ignore[arg-type]
    assert json.loads(location.read_bytes(f"{out}/.shardkit/lock"))["token"] == "old"  # untouched: not ours to delete


def test_the_staging_folder_must_be_this_users_alone(seg_data: Path, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / f"shardkit-staging-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # as if someone made it first, for everyone
    with pytest.raises(shardkit.errors.OutputError, match=r"shardkit-staging-\d+: the staging folder of bucket builds is not this user's"):
        shardkit.build([seg_data], f"{bucket}/out", **SEG_OPTIONS)  # type: ignore[arg-type]
    shared.rmdir()
    assert shardkit.build([seg_data], f"{bucket}/out", **SEG_OPTIONS).shards_built == 4  # type: ignore[arg-type]
    assert (shared.stat().st_mode & 0o777) == 0o700
