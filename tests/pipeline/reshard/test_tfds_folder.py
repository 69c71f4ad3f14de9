"""TFDS prepared dataset folders, made by TFDS itself, as reshard inputs; TFDS reads the metadata
written for shards made from one (``tfds.builder_from_directory``, ``as_dataset``, ``as_data_source``)."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shardkit.errors import UsageError
from shardkit.formats.containers import registry
from shardkit.pipeline.reshard.tfds_folder import is_tfds_folder, read_tfds_folder, write_tfds_metadata
from tests.arread import has_array_record, needs_array_record

tfds = pytest.importorskip("tensorflow_datasets")

LABELS = ["cat", "dog", "fox"]


class Tiny(tfds.core.GeneratorBasedBuilder, skip_registration=True):  # type: ignore[misc,call-arg]
    """A TFDS dataset as a dataset author writes one: class names (one nested), text, a tensor, 2 splits."""

    VERSION = tfds.core.Version("1.2.0")
    code_path = None  # TFDS looks for its module's source through importlib_resources otherwise

    def _info(self) -> Any:
        features = {
            "label": tfds.features.ClassLabel(names=LABELS),
            "meta": {"kind": tfds.features.ClassLabel(names=["a", "b"]), "n": np.int64},
            "text": tfds.features.Text(),
            "x": tfds.features.Tensor(shape=(2,), dtype=np.float32),
        }
        return tfds.core.DatasetInfo(
            builder=self,
            description="tiny",
            citation="@misc{tiny}",
            features=tfds.features.FeaturesDict(features),
            metadata=tfds.core.MetadataDict(seen=3),  # TFDS writes it as metadata.json
        )

    def _split_generators(self, dl_manager: Any) -> Any:
        return {"train": self._generate_examples(30, 0), "validation": self._generate_examples(7, 100)}

    def _generate_examples(self, n: int, base: int) -> Any:
        for k in range(base, base + n):
            yield str(k), {"label": k % 3, "meta": {"kind": k % 2, "n": k}, "text": f"t{k}", "x": [k, k / 2]}


def tiny_folder(data_dir: Path, file_format: str) -> Path:
    """The folder TFDS prepares the dataset in, 3 shards a split."""
    builder = Tiny(data_dir=str(data_dir), file_format=file_format)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    return Path(builder.data_dir)


@pytest.fixture(scope="module")
def tfrecord_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tiny_folder(tmp_path_factory.mktemp("tfds"), "tfrecord")
    for name in ("notes.txt", ".label.labels.txt.incomplete-1a2b3c4d"):  # a user's, a copy cut short: not TFDS'
        (folder / name).write_text("x")
    return folder


@pytest.fixture(scope="module")
def array_record_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not has_array_record:
        pytest.skip("array-record is the arrayrecord extra (Python >= 3.11)")
    return tiny_folder(tmp_path_factory.mktemp("tfds_ar"), "array_record")


@pytest.fixture()
def folder_copy(tfrecord_folder: Path, tmp_path: Path) -> Path:
    """A private copy of the TFRecord folder that a test may damage."""
    return Path(shutil.copytree(tfrecord_folder, tmp_path / "copy"))


def canonical(value: Any) -> Any:
    """A decoded TFDS example as a hashable value, to compare examples as multisets."""
    if isinstance(value, dict):
        return tuple(sorted((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value.item() if isinstance(value, np.generic) else value


def examples(builder: Any, split: str) -> Counter[Any]:
    return Counter(canonical(x) for x in tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False)))


def source_records(path: str, container: str) -> list[bytes]:
    found: list[bytes] = []
    registry.named(container).walk(path, lambda i, offset, payload: found.append(bytes(payload)))
    return found


@pytest.mark.parametrize("file_format", ["tfrecord", pytest.param("array_record", marks=needs_array_record)])
def test_read_finds_the_files_tfds_reads_in_shard_order(file_format: str, request: pytest.FixtureRequest) -> None:
    src = request.getfixturevalue("tfrecord_folder" if file_format == "tfrecord" else "array_record_folder")
    folder = read_tfds_folder(str(src))
    assert folder.container == {"tfrecord": "tfrecord", "array_record": "arrayrecord"}[file_format]
    assert list(folder.splits) == ["train", "validation"]
    assert folder.splits["train"] == [str(src / f"tiny-train.{file_format}-0000{i}-of-00003") for i in range(3)]
    theirs = tfds.builder_from_directory(str(src)).info.splits
    assert {s: [str(p) for p in theirs[s].filepaths] for s in folder.splits} == folder.splits
    assert sum(len(source_records(p, folder.container)) for p in folder.splits["train"]) == 30
    assert folder.extra_files == ("label.labels.txt", "meta-kind.labels.txt", "metadata.json")
    assert folder.info["name"] == "tiny" and folder.info["citation"] == "@misc{tiny}"
    assert folder.features is not None and set(folder.features["featuresDict"]["features"]) == {"label", "meta", "text", "x"}
    assert is_tfds_folder(str(src)) and not is_tfds_folder(str(src.parent)) and not is_tfds_folder(folder.splits["train"][0])


def test_a_folder_resharded_with_its_metadata_reads_through_tfds_alike(tfrecord_folder: Path, tmp_path: Path) -> None:
    """The source's records in other shard counts, under shardkit's names, in both containers where
    array_record is installed: TFDS reads the same examples, names and description from OUT."""
    folder = read_tfds_folder(str(tfrecord_folder))
    formats = ["tfrecord", "arrayrecord"] if has_array_record else ["tfrecord"]
    out = tmp_path / "out"
    out.mkdir()
    splits: dict[str, list[tuple[int, int]]] = {}
    for split, num_shards in (("train", 4), ("validation", 2)):
        records = [r for path in folder.splits[split] for r in source_records(path, folder.container)]
        random.Random(split).shuffle(records)
        for container in registry.configured(formats, index=False):
            shards = []
            for i in range(num_shards):
                path = str(out / container.shard_name(split, i, num_shards))
                writer = container.open_writer(path, path)
                for record in records[i::num_shards]:
                    writer.write(record)
                written = writer.close(sync=False)
                shards.append((written.records, written.size))
            splits.setdefault(split, shards)
    assert [n for n, _ in splits["train"]] == [8, 8, 7, 7]

    written = write_tfds_metadata(str(out), folder, splits, formats, durable=False)
    assert sorted(written) == ["dataset_info.json", "features.json", "label.labels.txt", "meta-kind.labels.txt", "metadata.json"]
    assert sorted(p.name for p in out.iterdir() if "-of-" not in p.name) == sorted(written)
    assert (out / "features.json").read_bytes() == (tfrecord_folder / "features.json").read_bytes()
    source, resharded = tfds.builder_from_directory(str(tfrecord_folder)), tfds.builder_from_directory(str(out))
    assert resharded.info.name == "tiny" and str(resharded.info.version) == "1.2.0" and resharded.info.citation == "@misc{tiny}"
    assert dict(resharded.info.metadata) == {"seen": 3}
    assert resharded.info.features["label"].names == LABELS and resharded.info.features["meta"]["kind"].names == ["a", "b"]
    assert resharded.info.splits["train"].num_shards == 4 and resharded.info.splits["train"].num_examples == 30
    assert resharded.info.splits["train"].num_bytes == sum(size for _, size in splits["train"])
    for split in ("train", "validation"):
        assert examples(resharded, split) == examples(source, split)
    if has_array_record:
        assert [f.value for f in resharded.info.alternative_file_formats] == ["array_record"]
        data = tfds.builder_from_directory(str(out)).as_data_source("validation")  # picks the random-access files
        assert Counter(canonical(data[i]) for i in range(len(data))) == examples(source, "validation")


@needs_array_record
def test_tfrecord_shards_converted_to_arrayrecord_read_through_tfds_as_a_data_source(tfrecord_folder: Path, tmp_path: Path) -> None:
    folder = read_tfds_folder(str(tfrecord_folder))
    container = registry.configured(["arrayrecord"])[0]
    out = tmp_path / "out"
    out.mkdir()
    records = [r for path in folder.splits["train"] for r in source_records(path, folder.container)]
    path = str(out / container.shard_name("train", 0, 1))
    writer = container.open_writer(path, path)
    for record in records:
        writer.write(record)
    done = writer.close(sync=False)
    write_tfds_metadata(str(out), folder, {"train": [(done.records, done.size)], "validation": []}, ["arrayrecord"], durable=False)
    info = json.loads((out / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record" and "alternativeFileFormats" not in info
    assert [s["name"] for s in info["splits"]] == ["train"]  # an empty split has no shards to describe
    data = tfds.builder_from_directory(str(out)).as_data_source("train")
    assert Counter(canonical(data[i]) for i in range(len(data))) == examples(tfds.builder_from_directory(str(tfrecord_folder)), "train")


def test_a_template_of_the_split_s_own_reads_the_files_tfds_reads(folder_copy: Path) -> None:
    """``filepathTemplate`` as a Beam pipeline may set it: a folder per split, the index alone."""
    info = json.loads((folder_copy / "dataset_info.json").read_text())
    for entry in info["splits"]:
        entry["filepathTemplate"] = "{SPLIT}/{DATASET}.{FILEFORMAT}-{SHARD_INDEX}"
        (folder_copy / entry["name"]).mkdir()
        for i in range(3):
            old = folder_copy / f"tiny-{entry['name']}.tfrecord-0000{i}-of-00003"
            old.rename(folder_copy / entry["name"] / f"tiny.tfrecord-0000{i}")
    (folder_copy / "dataset_info.json").write_text(json.dumps(info, indent=2))
    folder = read_tfds_folder(str(folder_copy))
    assert folder.splits["validation"] == [str(folder_copy / "validation" / f"tiny.tfrecord-0000{i}") for i in range(3)]
    theirs = tfds.builder_from_directory(str(folder_copy)).info.splits
    assert {s: [str(p) for p in theirs[s].filepaths] for s in folder.splits} == folder.splits


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], str]:
    def damage(folder: Path) -> str:
        info = json.loads((folder / "dataset_info.json").read_text())
        change(info)
        (folder / "dataset_info.json").write_text(json.dumps(info, indent=2))
        return str(folder / "dataset_info.json")

    return damage


def _truncate(folder: Path) -> str:
    text = (folder / "dataset_info.json").read_text()
    (folder / "dataset_info.json").write_text(text[: len(text) // 2])
    return str(folder / "dataset_info.json")


def _remove_a_shard(folder: Path) -> str:
    (folder / "tiny-validation.tfrecord-00001-of-00003").unlink()
    return str(folder / "tiny-validation.tfrecord-00001-of-00003")


DAMAGE = {
    "no splits": (_edit(lambda info: info.pop("splits")), "no splits"),
    "empty splits": (_edit(lambda info: info.update(splits=[])), "no splits"),
    "only empty splits": (_edit(lambda info: [s.pop("shardLengths") for s in info["splits"]]), "no splits with shards"),
    "parquet": (_edit(lambda info: info.update(fileFormat="parquet")), "fileFormat 'parquet', which shardkit does not read"),
    "a missing shard": (_remove_a_shard, "missing, though"),
    "cut short": (_truncate, "not JSON"),
    "bad lengths": (_edit(lambda info: info["splits"][0].update(shardLengths=["10", "ten"])), "shardLengths must be"),
    "outside": (_edit(lambda info: info["splits"][1].update(filepathTemplate="../{SPLIT}-{SHARD_X_OF_Y}")), "outside the folder"),
    "unknown field": (_edit(lambda info: info["splits"][0].update(filepathTemplate="{SPLIT.__class__}-{SHARD_INDEX}")), "has {SPLIT.__"),
    "twice": (_edit(lambda info: info["splits"][1].update(name="train")), "split 'train' is listed twice"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_folder_is_one_line_naming_the_file(case: str, folder_copy: Path) -> None:
    damage, reason = DAMAGE[case]
    named = damage(folder_copy)
    with pytest.raises(UsageError) as caught:
        read_tfds_folder(str(folder_copy))
    message = str(caught.value)
    assert message.startswith(named + ":") and reason in message and "\n" not in message
    if case == "cut short":  # the line where the JSON stops, a line of the file
        line = int(message[len(named) + 1 :].split(":", 1)[0])
        assert 1 < line <= len(Path(named).read_text().splitlines())


def test_without_features_json_the_splits_still_read(folder_copy: Path, tmp_path: Path) -> None:
    (folder_copy / "features.json").unlink()
    folder = read_tfds_folder(str(folder_copy))
    assert folder.features is None and len(folder.splits["train"]) == 3
    written = write_tfds_metadata(str(tmp_path / "out"), folder, {"train": [(30, 100)]}, ["tfrecord"], durable=False)
    assert written == ["dataset_info.json", "label.labels.txt", "meta-kind.labels.txt", "metadata.json"]
    assert not (tmp_path / "out" / "features.json").exists()


def test_a_folder_in_a_bucket_reads_and_its_metadata_writes_as_a_local_one(tfrecord_folder: Path, bucket: str, tmp_path: Path) -> None:
    from shardkit.storage import location

    src = location.join(bucket, "tiny", "1.2.0")
    fs, key = location.filesystem(src)
    fs.put(str(tfrecord_folder) + "/", key, recursive=True)
    local, remote = read_tfds_folder(str(tfrecord_folder)), read_tfds_folder(src)
    assert remote.container == "tfrecord" and remote.info == local.info and remote.features == local.features
    assert remote.splits == {s: [location.join(src, Path(p).name) for p in files] for s, files in local.splits.items()}
    assert remote.extra_files == local.extra_files

    splits = {"train": [(15, 1000), (15, 999)], "validation": [(7, 300)]}
    out = location.join(bucket, "out")
    assert write_tfds_metadata(out, remote, splits, ["tfrecord"]) == write_tfds_metadata(str(tmp_path), local, splits, ["tfrecord"])
    for name in (*local.extra_files, "dataset_info.json", "features.json"):
        assert location.read_bytes(location.join(out, name)) == (tmp_path / name).read_bytes()

    fs.rm_file(key + "/tiny-train.tfrecord-00002-of-00003")
    with pytest.raises(UsageError, match=r"^s3://|^gs://") as caught:
        read_tfds_folder(src)
    assert str(caught.value).startswith(location.join(src, "tiny-train.tfrecord-00002-of-00003") + ": missing, though")


def test_reshard_of_a_tfds_folder_reads_through_tfds_with_the_same_examples(tfrecord_folder: Path, tmp_path: Path) -> None:
    import shardkit

    out = tmp_path / "out"
    result = shardkit.reshard([tfrecord_folder], out, shards=3, workers=1, progress=False)
    assert result.manifest is not None and {s: len(e.shards) for s, e in result.manifest.splits.items()} == {"train": 3, "validation": 3}
    source, resharded = tfds.builder_from_directory(str(tfrecord_folder)), tfds.builder_from_directory(str(out))
    assert resharded.info.features["label"].names == LABELS and dict(resharded.info.metadata) == {"seen": 3}
    assert [str(p) for p in resharded.info.splits["train"].filepaths] == [str(out / f"train-0000{i}-of-00003.tfrecord") for i in range(3)]
    for split in ("train", "validation"):
        assert examples(resharded, split) == examples(source, split)


def test_a_gzip_reshard_of_a_tfds_folder_writes_no_tfds_metadata(tfrecord_folder: Path, tmp_path: Path) -> None:
    """TFDS reads TFRecord files uncompressed only: metadata naming GZIP shards would fail in ``as_dataset``."""
    import shardkit

    shardkit.reshard([tfrecord_folder], tmp_path / "out", shards=2, compression="gzip", workers=1, progress=False)
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert "manifest.json" in names and "train-00000-of-00002.tfrecord.gz" in names
    assert not names & {"dataset_info.json", "features.json", "label.labels.txt", "metadata.json"}


def test_overwrite_removes_the_tfds_files_a_reshard_of_a_tfds_folder_copied(tfrecord_folder: Path, tmp_path: Path) -> None:
    """OUT resharded from a TFDS folder, then from foreign files with ``overwrite``: no class names
    or builder metadata of the first stay to describe records they do not describe."""
    import shardkit

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for path in read_tfds_folder(str(tfrecord_folder)).splits["train"]:
        shutil.copy(path, foreign)
    out = tmp_path / "out"
    shardkit.reshard([tfrecord_folder], out, shards=2, workers=1, progress=False)
    assert {"label.labels.txt", "meta-kind.labels.txt", "metadata.json"} <= {p.name for p in out.iterdir()}
    shardkit.reshard([foreign], out, shards=2, workers=1, progress=False, overwrite=True)
    assert not {"label.labels.txt", "meta-kind.labels.txt", "metadata.json"} & {p.name for p in out.iterdir()}
    assert json.loads((out / "dataset_info.json").read_text())["name"] != "tiny"  # the foreign records' own
