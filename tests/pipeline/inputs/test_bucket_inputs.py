"""A build's inputs in a bucket (index files, the files they list, an ImageFolder tree) give the
records the same inputs on a local disk give, on a real local S3 server and GCS emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shardkit
from shardkit.errors import EntryError, ShardkitError
from shardkit.pipeline.inputs.entries import Entry
from shardkit.pipeline.inputs.index_files import IndexFile, discover
from shardkit.pipeline.plan import planner
from shardkit.pipeline.shard.fetch import Fetcher
from shardkit.storage import location
from tests.object_stores import Store
from tests.paths import REPO
from tests.tfread import raw_records

SPLITS = ("train", "val")
ENV = {"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


def upload(store: Store, local: Path, url: str) -> str:
    """``local`` (a folder) copied to ``url``; returns ``url``."""
    store.fs().put(str(local), url.split("://", 1)[1], recursive=True)
    return url


def records(out: Path | str) -> dict[str, list[bytes]]:
    return {split: raw_records(str(out), split) for split in SPLITS}


@pytest.fixture(scope="module")
def seg_reference(seg_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    """The local build of the segmentation set that every bucket build must equal, record for record."""
    out = tmp_path_factory.mktemp("seg-reference") / "out"
    shardkit.build([seg_data], out, records_per_shard=10, workers=1, seed=5, progress=False)
    return records(out)


def test_index_files_in_a_bucket(
    store: Store, bucket: str, seg_data: Path, seg_reference: dict[str, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = upload(store, seg_data, f"{bucket}/data")
    # Small pieces: large index files are cut and planned on processes, which read their piece from the bucket.
    monkeypatch.setattr(planner, "PARALLEL_BYTES", 100)
    monkeypatch.setattr(planner, "PIECE_BYTES", (200, 200))
    result = shardkit.build([data], tmp_path / "out", records_per_shard=10, workers=2, seed=5, progress=False)
    assert result.records == 32 and result.skipped == 0
    assert records(tmp_path / "out") == seg_reference  # relative paths resolved in the bucket; same source_ids


def test_index_files_named_by_url_glob_and_folder(store: Store, bucket: str, seg_data: Path) -> None:
    data = upload(store, seg_data, f"{bucket}/data")
    expected = [(f"{data}/train_0.txt", "train"), (f"{data}/train_1.txt", "train"), (f"{data}/val.txt", "val")]
    for given in ([data], [data + "/"], [f"{data}/*.txt"], [f"{data}/train_*.txt", f"{data}/val.txt", f"{data}/train_0.txt"]):
        assert [(f.path, f.split) for f in discover(given)] == expected, given
    assert [f.path for f in discover([data], ignore=["train_*"])] == [f"{data}/val.txt"]
    with pytest.raises(ShardkitError, match=r"no index files \(.*\) match this pattern"):
        discover([f"{data}/*.csv"])


def test_an_index_file_in_a_bucket_read_whole_and_in_pieces(store: Store, bucket: str, tmp_path: Path) -> None:
    text = "".join(f"img/{i}.jpg {i % 7}\r\n" if i % 5 else f"# comment {i}\n" for i in range(3000)) + "last.jpg 1"
    (tmp_path / "train.txt").write_bytes(text.encode())
    url = f"{bucket}/train.txt"
    location.put_bytes(url, text.encode())
    local, remote = IndexFile(tmp_path / "train.txt", "train"), IndexFile(url, "train")
    pieces = remote.pieces(4000)
    assert len(pieces) > 5
    assert [(p.start, p.stop, p.first_line, p.context) for p in pieces] == [
        (p.start, p.stop, p.first_line, p.context) for p in local.pieces(4000)
    ]
    whole = [(r.line, r.values) for r in local.rows()]
    assert [(r.line, r.values) for p in pieces for r in remote.rows(p)] == whole
    assert [(r.line, r.values) for r in remote.rows()] == whole


def test_a_local_index_file_listing_urls(store: Store, bucket: str, seg_data: Path, tmp_path: Path) -> None:
    data = upload(store, seg_data, f"{bucket}/data")
    lines = [line for line in (seg_data / "train_0.txt").read_text().splitlines() if line and not line.startswith("#")]
    (tmp_path / "local").mkdir()
    (tmp_path / "remote").mkdir()
    # The same file name and line numbers: the same source_id, so the same records.
    (tmp_path / "local" / "train.txt").write_text("".join(" ".join(f"{seg_data}/{p}" for p in line.split()) + "\n" for line in lines))
    (tmp_path / "remote" / "train.txt").write_text("".join(" ".join(f"{data}/{p}" for p in line.split()) + "\n" for line in lines))
    args: dict[str, Any] = {"records_per_shard": 5, "workers": 2, "seed": 1, "progress": False}
    local = shardkit.build([tmp_path / "local" / "train.txt"], tmp_path / "out-local", **args)
    remote = shardkit.build([tmp_path / "remote" / "train.txt"], tmp_path / "out-remote", **args)
    assert remote.records == local.records == len(lines)
    assert raw_records(str(tmp_path / "out-remote"), "train") == raw_records(str(tmp_path / "out-local"), "train")


def test_from_folder_in_a_bucket(store: Store, bucket: str, cls_data: Path, tmp_path: Path) -> None:
    photos = upload(store, cls_data, f"{bucket}/photos")
    local = shardkit.build(out=tmp_path / "local", from_folder=cls_data, workers=1, progress=False)
    remote = shardkit.build(out=tmp_path / "remote", from_folder=photos + "/", workers=2, progress=False)
    assert remote.manifest is not None and remote.manifest.classes == {"label": ("cat", "dog", "fox")}
    assert remote.records == local.records == 3 * (6 + 1)
    assert records(tmp_path / "remote") == records(tmp_path / "local")  # source_id: the path under ROOT, the same
    flat = upload(store, cls_data / "val", f"{bucket}/flat")  # ROOT/<class>/<img>: one split, train
    result = shardkit.build(out=tmp_path / "flat", from_folder=flat, workers=1, progress=False)
    assert result.manifest is not None and list(result.manifest.splits) == ["train"] and result.records == 3
    with pytest.raises(ShardkitError, match=r"/nothing: no such folder \(no objects under it\)$"):
        shardkit.build(out=tmp_path / "none", from_folder=f"{bucket}/nothing", workers=1, progress=False)


def test_a_missing_image_object_is_an_entry_error_then_skipped(store: Store, bucket: str, seg_data: Path, tmp_path: Path) -> None:
    data = upload(store, seg_data, f"{bucket}/data")
    number, image = next((n, line.split()[0]) for n, line in enumerate((seg_data / "train_1.txt").read_text().splitlines(), 1) if n == 5)
    location.remove(f"{data}/{image}")
    out = tmp_path / "out"
    with pytest.raises(EntryError) as info:
        shardkit.build([data], out, workers=2, records_per_shard=4, progress=False)
    reason = f"image: {data}/{image}: file not found"
    assert str(info.value) == f"{data}/train_1.txt:{number}: {reason}"
    result = shardkit.build([data], out, workers=2, records_per_shard=4, on_error="skip", progress=False)
    assert (result.records, result.skipped) == (31, 1)
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert errors == [{"split": "train", "source": f"{data}/train_1.txt", "line": number, "reason": reason}]


def test_missing_index_files_and_buckets_are_one_line(store: Store, bucket: str, tmp_path: Path) -> None:
    location.put_bytes(f"{bucket}/data/notes.md", b"not an index\n")
    nowhere = f"{store.scheme}://no-such-bucket-7f3a/train.txt"
    cases = {
        f"{bucket}/data/train.txt": f"{bucket}/data/train.txt: no such file or folder",
        f"{bucket}/elsewhere": f"{bucket}/elsewhere: no such file or folder",
        nowhere: f"{nowhere}: no such bucket, or no permission to see it",
        f"{bucket}/data": f"{bucket}/data: no index files (.txt, .csv, .tsv, .jsonl, .parquet) in this folder",
        f"{bucket}/data/notes.md": f"{bucket}/data/notes.md: unknown index format '.md' (known: .txt, .csv, .tsv, .jsonl, .parquet)",
    }
    for given, message in cases.items():
        with pytest.raises(ShardkitError) as info:
            shardkit.build([given], tmp_path / "out", workers=1, progress=False)
        assert str(info.value) == message


def test_the_cli_builds_from_a_bucket(
    store: Store, bucket: str, seg_data: Path, seg_reference: dict[str, list[bytes]], tmp_path: Path
) -> None:
    data = upload(store, seg_data, f"{bucket}/data")
    env = {**os.environ, **store.env, **ENV}
    cli = [sys.executable, "-m", "shardkit.cli", "build"]
    done = subprocess.run([*cli, f"{data}/*.txt", "-o", str(tmp_path / "out"), "-w", "2", "--records-per-shard", "10", "--seed", "5", "-q"],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert records(tmp_path / "out") == seg_reference
    done = subprocess.run([*cli, f"{data}/test.txt", "-o", str(tmp_path / "other")], env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (1, f"Error: {data}/test.txt: no such file or folder\n")


def test_a_workers_files_in_a_bucket_are_fetched_ahead_concurrently(store: Store, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    urls = [f"{bucket}/f/{i:03d}.bin" for i in range(100)]
    for i, url in enumerate(urls):
        location.put_bytes(url, bytes([i]) * (i + 1))
    calls: list[int] = []
    read_many = location.read_many

    def counted(paths: list[str]) -> dict[str, bytes | None]:
        calls.append(len(paths))
        return read_many(paths)

    def one_by_one(*args: Any) -> bytes:
        raise AssertionError("a prefetched file was read again")

    monkeypatch.setattr(location, "read_many", counted)
    monkeypatch.setattr(location, "read_bytes", one_by_one)
    entries = [Entry("train.txt", i + 1, str(i), (url, b"text")) for i, url in enumerate(urls)]
    fetcher = Fetcher([0])
    seen = [(entry, fetcher.read(entry.values[0], "image")) for entry in fetcher.ahead(entries)]
    assert [entry for entry, _ in seen] == entries  # in order, each once
    assert [data for _, data in seen] == [bytes([i]) * (i + 1) for i in range(100)]
    assert sum(calls) == 100 and len(calls) < 10  # in batches, not a request per file
