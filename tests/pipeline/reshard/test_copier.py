"""The copier's two routes write the same bytes: TFRecord frames copied whole (TFRecord into
TFRecord) and payloads framed again (any other pair), for small records and records read with pread."""

from __future__ import annotations

from pathlib import Path

import pytest

import shardkit
from shardkit.pipeline.reshard import copier
from tests.pipeline.reshard.foreign import examples, write_tfrecords


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file() and p.name.startswith("train-")}


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_copied_frames_are_the_bytes_framing_again_writes(tmp_path: Path, compression: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tfrecords(tmp_path / "in" / "train-00000-of-00002.tfrecord", examples(range(0, 300)))
    write_tfrecords(tmp_path / "in" / "train-00001-of-00002.tfrecord", examples(range(300, 340), size=40_000))  # pread, not sliced
    options = {"shards": 5, "workers": 1, "progress": False, "compression": compression}
    taken: list[bool] = []
    real = copier._copies_frames
    monkeypatch.setattr(copier, "_copies_frames", lambda task: taken.append(real(task)) or taken[-1])
    shardkit.reshard([tmp_path / "in"], tmp_path / "frames", **options)  # type: ignore[arg-type]
    assert taken and all(taken)
    monkeypatch.setattr(copier, "_copies_frames", lambda task: False)
    shardkit.reshard([tmp_path / "in"], tmp_path / "payloads", **options)  # type: ignore[arg-type]
    frames, payloads = _files(tmp_path / "frames"), _files(tmp_path / "payloads")
    assert len(frames) == (5 if compression else 10) and frames == payloads
    assert shardkit.verify([str(tmp_path / "frames")]).ok


def test_only_a_single_tfrecord_output_of_tfrecord_inputs_copies_frames(tmp_path: Path) -> None:
    from shardkit.formats.containers import registry
    from shardkit.pipeline.reshard.task import ReshardSettings, ReshardTask

    def task(formats: tuple[str, ...], inputs: tuple[str, ...]) -> ReshardTask:
        settings = ReshardSettings(str(tmp_path), registry.configured(formats), "f", "plan")
        return ReshardTask("train", 0, 1, (0, 1), "train.plan", tuple({"container": c} for c in inputs), settings)

    assert copier._copies_frames(task(("tfrecord",), ("tfrecord", "tfrecord")))
    assert not copier._copies_frames(task(("tfrecord",), ("tfrecord", "arrayrecord")))
    assert not copier._copies_frames(task(("arrayrecord",), ("arrayrecord",)))
    assert not copier._copies_frames(task(("tfrecord", "arrayrecord"), ("tfrecord",)))


def test_a_flush_that_fails_in_the_commit_is_one_write_error_naming_the_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool worker flushes each shard while it writes the next: a disk failing then is the shard's
    error, as a failed write is, and the shard is not committed."""
    import errno

    from shardkit.errors import WriteError
    from shardkit.executors import PoolExecutor
    from shardkit.storage import atomic

    def failing(path: str) -> None:
        raise OSError(errno.EIO, "Input/output error")

    write_tfrecords(tmp_path / "in" / "train-00000-of-00001.tfrecord", examples(range(50)))
    monkeypatch.setattr(atomic, "flush_file", failing)  # inherited by the forked workers
    with pytest.raises(WriteError, match=r"input/output error writing .*/out/train-0000\d-of-00002\.tfrecord: ") as caught:
        shardkit.reshard([tmp_path / "in"], tmp_path / "out", shards=2, executor=PoolExecutor(2, "fork"), progress=False)
    assert "0 of 2 shards finished and kept" in str(caught.value)
    assert not list((tmp_path / "out").glob("train-*")) and not (tmp_path / "out" / "manifest.json").exists()
