"""inspect and verify on TensorFlow-written files, shardkit output, and hostile input."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardkit
from shardkit.check.verify import verify
from shardkit.cli import main
from shardkit.formats.containers import tfrecord_scan
from shardkit.formats.containers.masked_crc import masked_crc
from shardkit.formats.containers.tfrecord_io import frame
from shardkit.formats.record_survey import infer


def write_tf_records(path: Path, compression: str = "") -> None:
    """Records from TensorFlow's own writer: bytes, int64, float of varying lengths, optional keys."""
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for i in range(10):
            feature = {
                "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"item-{i}".encode()])),
                "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 4)))),
                "score": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 2])),
            }
            if i % 2 == 0:
                feature["png"] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[tf.io.encode_png(tf.zeros([4, 5, 1], tf.uint8)).numpy()])
                )
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


@pytest.mark.parametrize(("compression", "name"), [("", "tf.tfrecord"), ("GZIP", "tf.tfrecord.gz"), ("ZLIB", "tf.tfrecord.zz")])
def test_tensorflow_written_files_are_inferred_and_verified(tmp_path: Path, compression: str, name: str) -> None:
    path = tmp_path / name
    write_tf_records(path, compression)
    info = infer([str(path)])
    assert info["records_scanned"] == 10 and info["kinds"] == {"example": 10}
    assert info["files"][0]["compression"] == (compression.lower() or "none")
    f = info["features"]
    assert (f["name"]["dtype"], f["name"]["shape"], f["name"]["looks_like"]) == ("bytes", [], ["text"])
    assert (f["ids"]["dtype"], f["ids"]["ragged"], f["ids"]["min_length"], f["ids"]["max_length"]) == ("int64", True, 0, 3)
    assert (f["score"]["dtype"], f["score"]["example"]) == ("float", "0.0")
    assert (f["png"]["present"], f["png"]["optional"], f["png"]["looks_like"]) == (5, True, ["png"])
    report = verify([str(path)], deep=True)
    assert report.ok and report.files[0].records == 10


def test_sequence_examples_and_raw_records_are_named(tmp_path: Path) -> None:
    import tensorflow as tf

    seq = tf.train.SequenceExample(
        context=tf.train.Features(feature={"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))}),
        feature_lists=tf.train.FeatureLists(
            feature_list={"tokens": tf.train.FeatureList(feature=[tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))] * 3)}
        ),
    )
    path = tmp_path / "seq.tfrecord"
    path.write_bytes(frame(seq.SerializeToString()) * 2)
    info = infer([str(path)])
    assert info["kinds"] == {"sequence_example": 2}
    assert info["features"]["id"]["dtype"] == "int64" and info["feature_lists"]["tokens"]["steps"] == [3, 3]
    raw = tmp_path / "raw.tfrecord"
    raw.write_bytes(frame(b"\xff\xff\xff plain bytes"))
    info = infer([str(raw)])
    assert info["kinds"] == {"other": 1} and "not a protocol buffer" in info["not_examples"][0]


@pytest.fixture()
def built(seg_data: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shardkit.build([seg_data], out, workers=1, records_per_shard=6, progress=False)
    return out


def test_shardkit_output_verifies_and_inspects_from_the_manifest(built: Path) -> None:
    report = verify([str(built)], deep=True, workers=2)
    assert report.ok and len(report.files) == 6 and sum(f.records for f in report.files) == 32
    code, output = _cli("inspect", str(built))
    assert code == 0 and "train       4       24" in output and "mask            bytes   scalar  png, 48x64, channels 1" in output
    assert all(len(line) <= 80 for line in output.splitlines() if line.startswith("  "))  # tables fit 80 columns
    code, output = _cli("inspect", str(built), "--json")
    doc = json.loads(output)
    assert doc["outputs"][0]["splits"]["val"]["records"] == 8
    code, output = _cli("inspect", "--count", str(built))
    assert output.splitlines()[-1].split() == ["32", "records", "in", "6", "files"]


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _one_shard(out: Path) -> Path:
    return out / "train-00001-of-00004.tfrecord"


def test_verify_reports_each_kind_of_damage(built: Path) -> None:
    shard = _one_shard(built)
    original = shard.read_bytes()
    data = bytearray(original)
    (length,) = struct.unpack("<Q", data[:8])
    data[12 + length + 4 + 12 + 5] ^= 0xFF  # a payload byte of record 1
    shard.write_bytes(bytes(data))
    code, output = _cli("verify", str(built))
    assert code == 1
    assert f"FAILED  {shard}: record 1 at byte {12 + length + 4}: data CRC mismatch" in output.splitlines()
    assert output.splitlines()[-1].endswith("1 FAILED")

    shard.write_bytes(original[: len(original) // 2])
    assert "truncated record" in _cli("verify", str(built))[1]
    shutil.copy(built / "train-00000-of-00004.tfrecord", shard)  # valid framing, wrong content
    assert f"FAILED  {shard}: the manifest says" in _cli("verify", str(built))[1]
    shard.unlink()
    (built / "stray-00000-of-00001.tfrecord").write_bytes(b"")
    (built / ".val-00000-of-00002.tfrecord.incomplete-1234abcd").write_bytes(b"x")
    code, output = _cli("verify", str(built))
    assert code == 1
    assert f"FAILED  {shard}: listed in the manifest but missing" in output
    assert "stray-00000-of-00001.tfrecord: a TFRecord file the manifest does not list" in output
    assert ".incomplete-1234abcd: temporary file of an interrupted build" in output


def _header_claiming(length: int) -> bytes:

    length_bytes = struct.pack("<Q", length)
    return length_bytes + struct.pack("<I", masked_crc(length_bytes))


def test_hostile_files_each_get_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        "empty.tfrecord": b"",
        "garbage.tfrecord": b"this is not a tfrecord at all" * 10,
        "huge-length.tfrecord": _header_claiming(2**63) + b"x" * 40,
        "truncated.tfrecord": frame(b"") + frame(b"")[:-3],  # an empty payload is a valid, empty Example
        "not-protobuf.tfrecord": frame(b"\xff\xfe\xfd"),
        "odd-types.tfrecord": frame(bytes.fromhex("0a0a0a080a0161120315ffff")),
        "gzip-named-plain.tfrecord": gzip.compress(frame(b"")),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "empty-folder").mkdir()
    report = verify([str(tmp_path / n) for n in cases] + [str(tmp_path / "empty-folder"), str(tmp_path / "missing.tfrecord")], deep=True)
    problems = {Path(f.path).name: f.problem for f in report.files}
    assert problems["empty.tfrecord"] == "empty file (0 bytes): no records"
    assert problems["garbage.tfrecord"] == "record 0 at byte 0: length CRC mismatch (not a TFRecord file, or damaged)"
    assert problems["huge-length.tfrecord"].startswith("record 0 at byte 0: truncated record (length field says 9223372036854775808 bytes")
    assert problems["truncated.tfrecord"].startswith("record 1 at byte 16: truncated record")
    assert problems["not-protobuf.tfrecord"].startswith("record 0 at byte 0: not a tf.train.Example")
    assert problems["odd-types.tfrecord"].startswith("record 0 at byte 0: not a tf.train.Example")
    assert problems["gzip-named-plain.tfrecord"].startswith("GZIP-compressed, but the name does not end in .gz")
    assert report.problems == [
        f"{tmp_path / 'empty-folder'}: no shard files in this folder (names containing .tfrecord, .tfrec, .tfrecords, .array_record)",
        f"{tmp_path / 'missing.tfrecord'}: no such file or folder",
    ]
    assert not report.ok

    def no_permission(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tfrecord_scan, "open", no_permission, raising=False)
    (locked,) = verify([str(tmp_path / "garbage.tfrecord")]).files
    assert locked.problem == "cannot open: Permission denied"


def test_verify_cli_exit_codes(built: Path, tmp_path: Path) -> None:
    assert _cli("verify", str(built))[0] == 0
    assert _cli("verify", str(tmp_path / "nope"))[0] == 1
    assert _cli("verify")[0] == 2
    code, output = _cli("verify", str(built), "--json")
    assert code == 0 and json.loads(output)["ok"] is True


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    from shardkit.units import plural

    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "bad entry", "bad entries") == "1 bad entry" and plural(3, "class", "classes") == "3 classes"
    one = tmp_path / "one.tfrecord"
    one.write_bytes(frame(b"not an Example"))
    code, output = _cli("verify", str(one))
    assert code == 0 and f"OK      {one} (1 record, " in output and "\n1 file, 1 record, " in output, output
    code, output = _cli("inspect", str(one))
    assert output.startswith("1 file, 1 record scanned (every record): 1 other record\n"), output
    code, output = _cli("inspect", "--count", str(one), str(one))
    assert output.endswith("2  records in 2 files\n"), output
    code, output = _cli("inspect", "--count", str(one))
    assert output.endswith("1  record in 1 file\n"), output


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardkit import demo

    data = demo.make_segmentation(tmp_path_factory.mktemp("hyp"), train=6, val=2, width=32, height=24)
    out = tmp_path_factory.mktemp("hyp-out") / "out"
    shardkit.build([data / "train_0.txt"], out, workers=1, records_per_shard=10, progress=False)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_verify_never_passes_a_corrupted_shard(pristine: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    out = tmp_path_factory.mktemp("case") / "out"
    shutil.copytree(pristine, out)
    shard = next(out.glob("*.tfrecord"))
    original = shard.read_bytes()
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "replace"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(original) - 1))
        damaged = original[:i] + bytes([original[i] ^ data.draw(st.integers(1, 255))]) + original[i + 1 :]
    elif kind == "truncate":
        damaged = original[: data.draw(st.integers(0, len(original) - 1))]
    elif kind == "insert":
        i = data.draw(st.integers(0, len(original)))
        damaged = original[:i] + data.draw(st.binary(min_size=1, max_size=16)) + original[i:]
    else:
        damaged = data.draw(st.binary(max_size=200))
    shard.write_bytes(damaged)
    report = verify([str(out)], deep=data.draw(st.booleans()))
    assert not report.ok


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.one_of(st.binary(max_size=300), st.builds(lambda a, b: frame(a) + b, st.binary(max_size=60), st.binary(max_size=40))))
def test_random_bytes_never_crash_verify_or_inspect(tmp_path_factory: pytest.TempPathFactory, blob: bytes) -> None:
    path = tmp_path_factory.mktemp("blob") / "x.tfrecord"
    path.write_bytes(blob)
    report = verify([str(path)], deep=True)
    assert len(report.files) == 1
    info = infer([str(path)], limit=None)
    assert info["records_scanned"] == report.files[0].records or report.files[0].problem


def test_concatenated_and_truncated_gzip(tmp_path: Path) -> None:
    import base64
    import os

    def member(count: int) -> bytes:
        noise = base64.b64encode(os.urandom(3000))  # compresses a little: members inflate to MBs
        return gzip.compress(b"".join(frame(noise + str(i).encode()) for i in range(count)), compresslevel=1)

    path = tmp_path / "cat.tfrecord.gz"
    path.write_bytes(member(3000) + member(0) + member(5) + member(3000))  # `cat a.gz b.gz ...`, one empty
    result = tfrecord_scan.scan(str(path))
    assert result.ok and result.records == 6005 and result.compression == "gzip"
    path.write_bytes(member(50)[:-30])
    cut = tfrecord_scan.scan(str(path))
    assert not cut.ok and cut.records > 0 and cut.error_record == cut.records
    assert cut.describe_error().startswith(f"record {cut.records} at byte ")


def test_damaged_manifest_is_one_line(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    del manifest["splits"]["train"]["shards"][0]["records"]
    (built / "manifest.json").write_text(json.dumps(manifest))
    report = verify([str(built)])
    assert report.problems == [
        f"{built / 'manifest.json'}: damaged manifest: a shard of split 'train' lacks name, records, bytes or crc32c"
    ]
    code, output = _cli("inspect", str(built))
    assert code == 1 and output.startswith("Error: ") and "damaged manifest" in output


def test_big_records_are_deep_checked(tmp_path: Path) -> None:
    path = tmp_path / "big.tfrecord"
    path.write_bytes(frame(b"\xff" * (9 << 20)) + frame(b""))  # a 9 MB record that is no Example, then a valid one
    (file_report,) = verify([str(path)], deep=True).files
    assert file_report.problem is not None and file_report.problem.startswith("record 0 at byte 0: not a tf.train.Example")
    assert verify([str(path)]).ok  # the framing itself is whole
