"""The rule for what a build may read, tried with the files an attacker or a careless tool writes:
paths inside annotation files and tables that leave their dataset (absolute, ``../``, a link out,
a VOC split id, a YOLO ``path:``), and URLs of schemes beyond the stores' (a local HTTP server
stands in for a cloud's metadata address). Each is one line naming the input, the entry, the
resolved path and the flag, exit 1; nothing from outside reaches OUT; the flag allows it; and the
layouts real tools write still build."""

from __future__ import annotations

import contextlib
import http.server
import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardkit
from shardkit.errors import ShardkitError
from shardkit.storage.boundary import Boundary
from tests.detection_sets import photo, write_coco, write_od_csv, write_voc, write_yolo
from tests.hostile import digests, one_line_error, run_cli

pytestmark = pytest.mark.slow  # the shardkit command in child processes, a few seconds a test

FLAG = "--allow-outside-root"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """An image outside every dataset of the test, 64 x 48 like the sets' images: its bytes must reach no shard."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    path = outside / "private.jpg"
    photo(path, 64, 48, 12345)
    return path


def leaked(out: Path, secret: Path) -> bool:
    """Whether any file under ``out`` holds ``secret``'s bytes."""
    data = secret.read_bytes()
    return out.exists() and any(data in p.read_bytes() for p in out.rglob("*") if p.is_file())


def refused(tmp_path: Path, args: list[str], secret: Path, *named: str) -> str:
    """``shardkit build ARGS -o out``: one line naming ``named`` and the flag, exit 1, no input
    byte changed, nothing of ``secret`` in OUT."""
    before = digests(tmp_path / "data", secret)
    out = Path(tempfile.mkdtemp(prefix="refused-", dir=tmp_path))
    result = run_cli(["build", *args, "-o", out, "-w", "1"], cwd=tmp_path)
    line = one_line_error(result)
    assert result.returncode == 1
    for name in named:
        assert name in line, line
    assert digests(tmp_path / "data", secret) == before
    assert not leaked(out, secret)
    return line


def coco_naming(tmp_path: Path, name: str) -> Path:
    """The standard layout, image 2's ``file_name`` made ``name`` (its size the secret's)."""
    annotations = write_coco(tmp_path / "data" / "coco", images=3)
    document = json.loads(annotations.read_text())
    document["images"][1].update(file_name=name, width=64, height=48)
    annotations.write_text(json.dumps(document))
    return annotations


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link"])
def test_a_coco_file_name_outside_the_dataset_is_refused_and_the_flag_allows_it(tmp_path: Path, secret: Path, how: str) -> None:
    if how == "link":  # a link in the image folder, as an archive can carry one
        annotations = coco_naming(tmp_path, "000000000009.jpg")
        (tmp_path / "data" / "coco" / "val2017" / "000000000009.jpg").symlink_to(secret)
    else:
        annotations = coco_naming(tmp_path, str(secret) if how == "absolute" else "../../../elsewhere/private.jpg")  # from coco/val2017/
    line = refused(tmp_path, [str(annotations)], secret, f"{annotations.name}: ", str(secret), FLAG)
    assert line.endswith(f"is outside the dataset's root {tmp_path / 'data' / 'coco'}: refused (pass {FLAG} to read it)")

    shardkit.build([annotations], tmp_path / "out", workers=1, progress=False, allow_outside_root=True)
    assert leaked(tmp_path / "out", secret)


def test_a_refused_entry_is_skipped_and_listed_with_on_error_skip(tmp_path: Path, secret: Path) -> None:
    annotations = coco_naming(tmp_path, str(secret))
    result = shardkit.build([annotations], tmp_path / "out", workers=1, progress=False, on_error="skip")
    assert result.skipped == 1 and result.records == 2
    (listed,) = [json.loads(line) for line in (tmp_path / "out" / "errors.jsonl").read_text().splitlines()]
    assert listed["line"] == 0 and FLAG in listed["reason"]  # an image is no line of a COCO file
    assert not leaked(tmp_path / "out", secret)


def test_the_rerun_with_the_flag_resumes_the_refused_build(tmp_path: Path, secret: Path) -> None:
    """The flag is not part of the fingerprint: a refused entry is never in a committed shard, so
    the rerun the refusal asks for finishes the same build instead of asking for --overwrite."""
    annotations = coco_naming(tmp_path, str(secret))
    with pytest.raises(ShardkitError, match=FLAG):
        shardkit.build([annotations], tmp_path / "out", workers=1, progress=False)
    result = shardkit.build([annotations], tmp_path / "out", workers=1, progress=False, allow_outside_root=True)
    assert result.records == 3
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["run"]["allow_outside_root"] is True


def test_a_voc_filename_and_a_split_id_outside_the_folder_are_refused(tmp_path: Path, secret: Path) -> None:
    voc = write_voc(tmp_path / "data")
    first = (voc / "ImageSets" / "Main" / "train.txt").read_text().split()[0]
    xml = voc / "Annotations" / f"{first}.xml"
    xml.write_text(xml.read_text().replace(f"<filename>{first}.jpg</filename>", f"<filename>{secret}</filename>"))
    refused(tmp_path, [str(voc)], secret, "train.txt:1:", str(secret), FLAG)

    # A split id leading out of Annotations/: the XML there was read, and its <name> became a class.
    xml.write_text(xml.read_text().replace(f"<filename>{secret}</filename>", f"<filename>{first}.jpg</filename>"))
    evil = tmp_path / "elsewhere" / "evil.xml"
    evil.write_text(xml.read_text().replace("<name>", "<name>evil").replace(f"{first}.jpg", "evil.jpg"))
    main = voc / "ImageSets" / "Main" / "train.txt"
    main.write_text("../../../../elsewhere/evil\n" + main.read_text())
    line = refused(tmp_path, [str(voc)], secret, "train.txt:1:", str(evil), FLAG)
    assert "annotation" in line
    shardkit.build([voc], tmp_path / "out", workers=1, progress=False, on_error="skip")
    assert "evil" not in (tmp_path / "out" / "manifest.json").read_text()

    # The same through a link inside Annotations/ and "..": the OS follows the link first, then
    # climbs, so the id's text says inside while the file read is outside.
    (tmp_path / "elsewhere" / "deep").mkdir()
    (voc / "Annotations" / "link").symlink_to(tmp_path / "elsewhere" / "deep")
    main.write_text("link/../evil\n" + main.read_text().split("\n", 1)[1])
    line = refused(tmp_path, [str(voc)], secret, "train.txt:1:", str(evil), FLAG)
    assert "annotation" in line


def test_a_yolo_path_or_image_list_outside_the_yaml_folder_is_refused(tmp_path: Path, secret: Path) -> None:
    data = tmp_path / "data"
    write_yolo(data / "set")
    elsewhere = secret.parent
    (elsewhere / "images").mkdir()
    photo(elsewhere / "images" / "x.jpg", 64, 48, 7)
    (data / "set" / "data.yaml").write_text("path: ../../elsewhere\ntrain: images\nnames: [person, car, dog]\n")
    refused(tmp_path, [str(data / "set" / "data.yaml")], secret, "data.yaml", str(elsewhere), FLAG)

    (data / "set" / "data.yaml").write_text("path: .\ntrain: train.txt\nnames: [person, car, dog]\n")  # a list naming the secret
    (data / "set" / "train.txt").write_text(f"./images/train/a.jpg\n{secret}\n")
    refused(tmp_path, [str(data / "set" / "data.yaml")], secret, "train.txt:2:", str(secret), FLAG)
    result = shardkit.build([data / "set" / "data.yaml"], tmp_path / "out", workers=1, progress=False, allow_outside_root=True)
    assert result.records == 2 and leaked(tmp_path / "out", secret)


def test_an_od_csv_filename_outside_its_folder_is_refused(tmp_path: Path, secret: Path) -> None:
    csv = write_od_csv(tmp_path / "data", lines=[("raccoon-1.jpg", 64, 48, "a", 1, 1, 9, 9), (str(secret), 64, 48, "a", 1, 1, 9, 9)])
    refused(tmp_path, [str(csv)], secret, f"{csv.name}:3:", str(secret), FLAG)


@pytest.mark.parametrize("column", ["path", "struct"])
def test_a_table_naming_a_file_outside_its_folder_is_refused_for_images_and_bytes(tmp_path: Path, secret: Path, column: str) -> None:
    """A path column, and the Hub's ``{bytes, path}`` struct with no bytes; also for ``bytes``, which
    embeds any file at all (a key file, say)."""
    (tmp_path / "data").mkdir()
    photo(tmp_path / "data" / "ok.jpg", 64, 48, 1)
    paths = ["ok.jpg", str(secret)]
    hub = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets' Image() feature, as the Hub stores it
    values = pa.array(paths) if column == "path" else pa.array([{"bytes": None, "path": p} for p in paths], hub)
    pq.write_table(pa.table({"image": values, "label": [0, 1]}), tmp_path / "data" / "train.parquet")
    for i, feature in enumerate(["{kind: image, column: image, encoding: raw}", "{kind: bytes, column: image}"]):
        config = tmp_path / f"config{i}.yaml"
        config.write_text(f"features:\n  blob: {feature}\n")
        refused(tmp_path, [str(tmp_path / "data" / "train.parquet"), "-c", str(config)], secret, "train.parquet:2:", str(secret), FLAG)


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1, a free port, serving ``folder``: its base URL."""
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(folder))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_http_url_is_refused_in_index_and_annotation_files_unless_its_scheme_is_allowed(tmp_path: Path, secret: Path) -> None:
    pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem: without it, no URL of the kind is read at all
    (tmp_path / "data").mkdir()
    with served(secret.parent) as base:
        url = f"{base}/private.jpg"
        index = tmp_path / "data" / "train.txt"
        index.write_text(f"{url} 0\n")
        line = refused(tmp_path, [str(index)], secret, "train.txt:1:", url, "--allow-scheme http")
        assert "http:// URLs are not read unless allowed" in line
        annotations = coco_naming(tmp_path, url)
        refused(tmp_path, [str(annotations)], secret, f"{annotations.name}: ", url, "--allow-scheme http")
        # Allowed in the user's own index file, by scheme; in an annotation file, it is outside the dataset too.
        shardkit.build([index], tmp_path / "out", workers=1, progress=False, allow_schemes=["http"])
        assert leaked(tmp_path / "out", secret)
        with pytest.raises(ShardkitError, match=FLAG):
            shardkit.build([annotations], tmp_path / "out2", workers=1, progress=False, allow_schemes=["http"])


def test_the_layouts_real_tools_write_still_build(tmp_path: Path) -> None:
    """COCO's standard layout (the root holds annotations/ and val2017/), a YOLO YAML with ``path: .``
    and an image list of ``./images/...`` lines, Pascal VOC, the OD API's CSV: no flag needed."""
    coco = write_coco(tmp_path / "coco", images=3)
    assert shardkit.build([coco], tmp_path / "o1", workers=1, progress=False).records == 3
    yolo = write_yolo(tmp_path / "yolo")
    (tmp_path / "yolo" / "train.txt").write_text("./images/train/a.jpg\nimages/train/b.jpg\n")
    yolo.write_text("path: .\ntrain: train.txt\nval: images/val\nnames: [person, car, dog]\n")
    assert shardkit.build([yolo], tmp_path / "o2", workers=1, progress=False).records == 4
    voc = write_voc(tmp_path / "voc")
    assert shardkit.build([voc], tmp_path / "o3", workers=1, progress=False).records > 0
    csv = write_od_csv(tmp_path / "csv")
    assert shardkit.build([csv], tmp_path / "o4", workers=1, progress=False).records == 3


def test_the_boundary_follows_links_and_keeps_to_its_root(tmp_path: Path) -> None:
    root = tmp_path / "set"
    (root / "images").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (root / "linked").symlink_to(tmp_path / "other")  # a folder linked out
    (root / "images" / "inner").symlink_to(root / "images")  # a link that stays in
    rule = Boundary({"a.json": str(root)})
    assert rule.refusal(str(root / "images" / "x.jpg"), "a.json") is None
    assert rule.refusal(str(root / "images" / "inner" / "x.jpg"), "a.json") is None
    assert f"(a link to {tmp_path / 'other' / 'x.jpg'})" in (rule.refusal(str(root / "linked" / "x.jpg"), "a.json") or "")
    assert rule.refusal(str(tmp_path / "set2" / "x.jpg"), "a.json") is not None  # a sibling sharing the root's name as a prefix
    assert rule.refusal("/etc/passwd", "index.txt") is None  # the user's own index file: anywhere
    assert "--allow-scheme http" in (rule.refusal("http://169.254.169.254/latest/meta-data/", "index.txt") or "")
    assert rule.refusal("s3://bucket/x.jpg", "index.txt") is None
    in_bucket = Boundary({"s3://b/ds/a.json": "s3://b/ds"})
    assert in_bucket.refusal("s3://b/ds/images/x.jpg", "s3://b/ds/a.json") is None
    assert in_bucket.refusal("s3://b/other/x.jpg", "s3://b/ds/a.json") is not None
    assert in_bucket.refusal("s3://b/ds/../other/x.jpg", "s3://b/ds/a.json") is not None
    assert in_bucket.refusal("/etc/passwd", "s3://b/ds/a.json") is not None


def test_a_preview_reads_only_what_the_build_may_read(tmp_path: Path, secret: Path) -> None:
    """A preview draws what the build would write: a picture is shared as readily as shards."""
    annotations = coco_naming(tmp_path, str(secret))
    before = digests(tmp_path / "data", secret)
    picture = tmp_path / "look.png"
    line = one_line_error(run_cli(["preview", annotations, "-o", picture], tmp_path))
    assert f"{annotations.name}: " in line and str(secret) in line and FLAG in line
    assert not picture.exists()
    allowed = run_cli(["preview", annotations, "-o", picture, FLAG], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert picture.exists() and digests(tmp_path / "data", secret) == before


def test_a_preview_of_a_yolo_set_whose_path_leads_out_takes_the_flag(tmp_path: Path, secret: Path) -> None:
    """What a format reads while reading rows (YOLO's ``path:``) is allowed by the preview's flag too."""
    data = tmp_path / "data"
    write_yolo(data / "set")
    (data / "set" / "data.yaml").write_text("path: ../../elsewhere\ntrain: images\nnames: [person, car, dog]\n")
    (secret.parent / "images").mkdir()
    photo(secret.parent / "images" / "x.jpg", 64, 48, 7)
    picture = tmp_path / "look.png"
    assert FLAG in one_line_error(run_cli(["preview", data / "set" / "data.yaml", "-o", picture], tmp_path))
    allowed = run_cli(["preview", data / "set" / "data.yaml", "-o", picture, FLAG], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
