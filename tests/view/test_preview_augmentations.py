"""``shardkit preview`` before a build: the tiles are the records the build writes, bad inputs fail as the build does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shardkit
from shardkit.errors import ConfigError, EntryError
from shardkit.formats.containers.tfrecord_io import read_records
from shardkit.formats.example_proto import decode_example
from shardkit.pipeline.plan.arithmetic import record_key
from shardkit.reader import ShardReader
from shardkit.view.augmentations import augmentation_records, augmentation_sheet, sheet_rows, title
from tests.tfread import shard_files

SEED = 7


@pytest.fixture(scope="module")
def built_val(augmented: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 40 val entries of ``augmented`` (an original and 3 copies each), built with ``SEED``."""
    out = tmp_path_factory.mktemp("preview-build") / "out"
    shardkit.build([augmented / "val.txt"], out, config=str(augmented / "config.yaml"), seed=SEED, workers=1, progress=False)
    return out


def _built_by_source(out: Path) -> dict[str, list[bytes]]:
    groups: dict[str, list[bytes]] = {}
    for path in shard_files(str(out), "val"):
        for record in read_records(path):
            [source_id] = decode_example(record)["source_id"][1]
            groups.setdefault(source_id.decode(), []).append(record)  # type: ignore[union-attr]
    return groups


def test_preview_records_are_the_records_the_build_writes(augmented: Path, built_val: Path) -> None:
    preview = augmentation_records([augmented / "val.txt"], config=augmented / "config.yaml", entries=6, copies=3, seed=SEED)
    built = _built_by_source(built_val)
    assert len(preview.entries) == 6 and preview.built_copies == 3
    for entry in preview.entries:
        assert [r.copy for r in entry.records] == [-1, 0, 1, 2]
        # A shuffled shard holds one entry's records in the order of their record keys.
        in_shard_order = sorted(entry.records, key=lambda r: record_key(SEED, entry.identity, r.copy))
        assert [r.data for r in in_shard_order] == built[entry.identity]


def test_preview_pixels_equal_the_decoded_shards_for_any_number_of_copies(augmented: Path, built_val: Path) -> None:
    """Decoded by the random-access reader (no TensorFlow), independently of the preview's decode."""
    built: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for record in ShardReader(str(built_val), "val", decode_images=True):
        built.setdefault(record["source_id"], []).append((record["image"], record["mask"]))
    for copies in (1, 5):  # fewer than the build makes, and more: the copies both have are the same pixels
        preview = augmentation_records([augmented / "val.txt"], config=augmented / "config.yaml", copies=copies, seed=SEED)
        for entry in preview.entries:
            assert len(entry.records) == 1 + copies and len(built[entry.identity]) == 4
            for shown in entry.records[: 1 + min(copies, 3)]:
                image, mask = shown.pixels["image"], shown.pixels["mask"]
                assert image.shape == (120, 160, 3) and mask.shape == (120, 160)
                same = [i for i, (b_image, b_mask) in enumerate(built[entry.identity]) if np.array_equal(b_image, image)]
                assert len(same) == 1, f"{entry.identity} copy {shown.copy}"
                assert np.array_equal(built[entry.identity][same[0]][1], mask)


def test_another_seed_gives_other_copies_and_the_same_originals(augmented: Path) -> None:
    one, other = (augmentation_records([augmented / "val.txt"], config=augmented / "config.yaml", entries=2, seed=s) for s in (1, 2))
    assert [e.identity for e in one.entries] == [e.identity for e in other.entries]
    for a, b in zip(one.entries, other.entries, strict=True):
        assert a.records[0].data == b.records[0].data
        assert any(x.data != y.data for x, y in zip(a.records[1:], b.records[1:], strict=True))


def test_entries_are_spread_over_the_inputs_first_and_last_included(seg_data: Path) -> None:
    preview = augmentation_records([seg_data], config=None, entries=4)  # 24 train rows in two files, then 8 val
    assert [e.identity for e in preview.entries] == ["train_0.txt:2", "train_0.txt:12", "train_1.txt:11", "val.txt:9"]
    assert title(preview).startswith("shardkit preview: 4 entries of train (3), val (1), originals only (the config has no augment")
    assert len(augmentation_records([seg_data], entries=64).entries) == 32


def test_many_rows_are_sampled_in_bounded_memory(seg_data: Path, tmp_path: Path) -> None:
    image = seg_data / "images" / "train_00000.jpg"
    (tmp_path / "train.txt").write_text("".join(f"{image}\n" for _ in range(1001)))
    preview = augmentation_records([tmp_path / "train.txt"], entries=7)
    lines = [e.line for e in preview.entries]
    assert lines[0] == 1 and lines[-1] == 1001 and lines == sorted(set(lines)) and len(lines) == 7
    assert all(abs(line - 1 - i * 1000 / 6) <= 1000 / 6 / 4 for i, line in enumerate(lines))


def test_classification_captions_name_the_classes(cls_data: Path) -> None:
    preview = augmentation_records(from_folder=cls_data, entries=6, copies=4)
    assert preview.copies == 0 and preview.config.feature("label").classes == ("cat", "dog", "fox")
    rows = sheet_rows(preview)
    assert len(rows) == 6 and all(len(row) == 1 for row in rows)
    for entry, [tile] in zip(preview.entries, rows, strict=True):
        folder_class = entry.identity.split("/")[1]
        assert list(tile.caption) == ["original", folder_class, entry.identity]
        assert entry.records[0].features["label"] == ("int64", [["cat", "dog", "fox"].index(folder_class)])
    assert {row[0].caption[1] for row in rows} == {"cat", "dog", "fox"}


def test_the_sheet_is_a_picture_of_bounded_size(augmented: Path) -> None:
    picture = augmentation_sheet([augmented], config=str(augmented / "config.yaml"), entries=6, copies=4, seed=SEED)
    assert isinstance(picture, Image.Image) and picture.mode == "RGB"
    assert 600 <= picture.width <= 2000 and 6 * 120 <= picture.height <= 1400
    preview = augmentation_records([augmented], config=str(augmented / "config.yaml"), entries=6, copies=4, seed=SEED)
    rows = sheet_rows(preview)
    assert [len(row) for row in rows] == [5] * 6 and all(t.mask is not None for row in rows for t in row)
    assert [t.caption[0] for t in rows[0]] == ["original", "copy 1", "copy 2", "copy 3", "copy 4"]
    assert rows[0][0].caption[-1] == preview.entries[0].identity
    assert "original + 4 copies (the build makes 3), seed 7, config config.yaml" in title(preview)


def test_a_missing_image_is_the_build_error(seg_copy: Path, tmp_path: Path) -> None:
    first = (seg_copy / "val.txt").read_text().splitlines()[1].split()[0]
    (seg_copy / first).unlink()
    with pytest.raises(EntryError) as built:
        shardkit.build([seg_copy / "val.txt"], tmp_path / "out", workers=1, progress=False)
    with pytest.raises(EntryError) as previewed:
        augmentation_sheet([seg_copy / "val.txt"])
    assert str(previewed.value) == str(built.value) == f"{seg_copy / 'val.txt'}:2: image: {seg_copy / first}: file not found"


def test_a_bad_config_is_the_build_error(seg_data: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("features:\n  image: {kind: image, column: 0}\naugmnt: {copies: 2}\n")
    with pytest.raises(ConfigError) as built:
        shardkit.build([seg_data / "val.txt"], tmp_path / "out", config=config, workers=1, progress=False)
    with pytest.raises(ConfigError) as previewed:
        augmentation_records([seg_data / "val.txt"], config=config)
    assert str(previewed.value) == str(built.value)
    assert str(built.value).startswith(f"{config}: ")


def test_a_bad_row_is_the_build_error_even_when_not_drawn(seg_copy: Path, tmp_path: Path) -> None:
    with open(seg_copy / "val.txt", "a") as f:
        f.write("only-one-column.jpg\n")
    shutil.rmtree(seg_copy / "masks")  # no entry is drawn: the bad row is found first, as planning finds it
    with pytest.raises(EntryError) as built:
        shardkit.build([seg_copy / "val.txt"], tmp_path / "out", workers=1, progress=False)
    with pytest.raises(EntryError) as previewed:
        augmentation_records([seg_copy / "val.txt"], entries=1)
    assert str(previewed.value) == str(built.value) == f"{seg_copy / 'val.txt'}:10: 1 columns, but line 2 has 2"


def test_preview_does_not_import_tensorflow(augmented: Path) -> None:
    code = (
        "import sys; from shardkit.view.augmentations import augmentation_sheet; "
        f"augmentation_sheet([{str(augmented / 'val.txt')!r}], config={str(augmented / 'config.yaml')!r}, entries=2, copies=2); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
