"""Augmenting detection data: boxes, instance masks and keypoints move with the image, and an
object a transform drops goes whole (class, text, crowd flag, area, mask, keypoints). TensorFlow
reads the records back; the references are builds of the same COCO set without augmentation."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

import shardkit
from shardkit.cli import main
from shardkit.errors import ConfigError
from shardkit.features import annotations
from shardkit.pipeline.config import parse_config
from shardkit.pipeline.inputs.formats.detection.annotations import DEFAULT_CONFIG
from tests.detection_sets import write_coco

tf = pytest.importorskip("tensorflow")

P = "image/object"
PER_OBJECT = ("bbox/xmin", "bbox/ymin", "bbox/xmax", "bbox/ymax", "class/label", "class/text", "is_crowd", "area", "mask")
HEAVY = [
    # fill_mask: what a semantic mask marks "ignore" with; padding is no part of an instance.
    {"__class_fullname__": "Affine", "scale": [0.5, 1.5], "rotate": [-40, 40], "translate_percent": 0.3, "fill_mask": 255, "p": 0.9},
    {"__class_fullname__": "RandomResizedCrop", "size": [40, 56], "scale": [0.1, 1.0], "p": 0.6},
    {"__class_fullname__": "Perspective", "scale": [0.05, 0.2], "p": 0.5},
    {"__class_fullname__": "HorizontalFlip", "p": 0.5},
    {"__class_fullname__": "VerticalFlip", "p": 0.5},
    {"__class_fullname__": "ColorJitter", "p": 0.5},
]


def _config(augment: dict[str, Any] | None) -> dict[str, Any]:
    """The detection formats' default config with masks, jpeg images and ``augment``."""
    features = {key: dict(value) for key, value in DEFAULT_CONFIG["features"].items()}
    features["image/encoded"]["encoding"] = "jpeg"
    features[P]["masks"] = True
    return {"features": features, **({"augment": augment} if augment is not None else {})}


def _build(coco: Path, out: Path, config: dict[str, Any], **options: Any) -> Path:
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    shardkit.build([coco], out, config=path, progress=False, **{"workers": 1, **options})
    return out


def _records(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every record of OUT by its image/filename, each as {key: values}, as TensorFlow parses it."""
    found: dict[str, list[dict[str, Any]]] = {}
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            values = {key: list(getattr(f, f.WhichOneof("kind")).value) for key, f in feature.items()}
            found.setdefault(values["image/filename"][0].decode(), []).append(values)
    return found


def _masks(record: dict[str, Any]) -> list[np.ndarray]:
    return [tf.io.decode_png(png).numpy()[..., 0] for png in record.get(f"{P}/mask", [])]


def _points(record: dict[str, Any]) -> np.ndarray:
    """(objects, K, 3): normalized x, y and visibility."""
    keys = (f"{P}/keypoint/x", f"{P}/keypoint/y", f"{P}/keypoint/visibility")
    n = len(record.get(f"{P}/class/text", []))
    if keys[0] not in record or not n:  # a record without objects has empty keypoint lists: K unknown
        return np.zeros((n, 0, 3))
    flat = np.stack([np.asarray(record[k], dtype=np.float64) for k in keys], axis=1)
    return flat.reshape(n, -1, 3)


def _check_consistent(record: dict[str, Any]) -> None:
    """What every augmented record must hold: per-object lists of one length, boxes with width
    and height inside [0, 1], 0/1 masks of the image's size whose pixel sum is the area (an
    original keeps the input's areas), keypoints inside the image or (0, 0) and invisible."""
    n = len(record.get(f"{P}/class/text", []))
    for sub in PER_OBJECT:
        assert len(record.get(f"{P}/{sub}", [])) == n, sub
    boxes = np.array([record.get(f"{P}/bbox/{k}", []) for k in ("xmin", "ymin", "xmax", "ymax")]).T.reshape(-1, 4)
    assert ((boxes >= 0) & (boxes <= 1)).all()
    assert (boxes[:, 0] < boxes[:, 2]).all() and (boxes[:, 1] < boxes[:, 3]).all()
    height, width = record["image/height"][0], record["image/width"][0]
    image = tf.io.decode_jpeg(record["image/encoded"][0]).numpy()
    assert image.shape[:2] == (height, width)
    masks = _masks(record)
    for mask, area in zip(masks, record.get(f"{P}/area", []), strict=True):
        assert mask.shape == (height, width) and set(np.unique(mask)) <= {0, 1}
        assert area == mask.sum()
    assert f"{P}/keypoint/x" in record  # the set has keypoints: every record has the keys, if empty
    points = _points(record)
    assert points.shape[0] == n
    visible = points[..., 2] > 0
    assert ((points[..., :2] >= 0) & (points[..., :2] < 1)).all()
    assert (points[~visible][:, :2] == 0).all()


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"))


@pytest.fixture(scope="module")
def reference(coco: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The unaugmented records, one per image."""
    out = _build(coco, tmp_path_factory.mktemp("reference") / "out", _config(None))
    return {name: records[0] for name, records in _records(out).items()}


def test_a_flip_mirrors_every_box_mask_and_keypoint(coco: Path, reference: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    flip = {"copies": 1, "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 1.0}]}
    flipped = _records(_build(coco, tmp_path / "out", _config(flip)))
    assert sorted(flipped) == sorted(reference)
    seen_points = 0
    for name, (record,) in flipped.items():
        ref = reference[name]
        _check_consistent(record)
        assert record[f"{P}/class/text"] == ref[f"{P}/class/text"] and record[f"{P}/is_crowd"] == ref[f"{P}/is_crowd"]
        np.testing.assert_allclose(record[f"{P}/bbox/xmin"], 1 - np.array(ref[f"{P}/bbox/xmax"]), atol=1e-6)
        np.testing.assert_allclose(record[f"{P}/bbox/xmax"], 1 - np.array(ref[f"{P}/bbox/xmin"]), atol=1e-6)
        assert record[f"{P}/bbox/ymin"] == ref[f"{P}/bbox/ymin"] and record[f"{P}/bbox/ymax"] == ref[f"{P}/bbox/ymax"]
        for mask, original in zip(_masks(record), _masks(ref), strict=True):
            np.testing.assert_array_equal(mask, original[:, ::-1])
        # albumentations flips a keypoint as it flips the pixel it sits on: x -> width - 1 - x.
        width = ref["image/width"][0]
        points, original = _points(record), _points(ref)
        visible = original[..., 2] > 0
        np.testing.assert_allclose(points[visible][:, 0], 1 - original[visible][:, 0] - 1 / width, atol=1e-6)
        np.testing.assert_allclose(points[..., 1:], np.where(visible[..., None], original[..., 1:], 0), atol=1e-6)
        seen_points += int(visible.sum())
    assert seen_points == 8  # the person's two visible keypoints in each of 4 images


@pytest.mark.parametrize(("min_visibility", "person_kept"), [(0.0, True), (0.25, False)])
def test_a_crop_drops_the_objects_it_cuts_out_with_everything_they_carry(
    coco: Path, reference: dict[str, dict[str, Any]], tmp_path: Path, min_visibility: float, person_kept: bool
) -> None:
    # The left 10 pixels: the crowd (x 0-3) stays whole, the person (x 5.5-25.75) keeps 22% of
    # its box, the car (x 30-) is cut out.
    crop = {"__class_fullname__": "Crop", "x_min": 0, "y_min": 0, "x_max": 10, "y_max": 48, "p": 1.0}
    augment = {"copies": 1, "boxes": {"min_visibility": min_visibility}, "pipeline": [crop]}
    out = _build(coco, tmp_path / "out", _config(augment))
    records = _records(out)
    for name, (record,) in records.items():
        _check_consistent(record)
        ref = reference[name]
        left = np.array(ref[f"{P}/bbox/xmin"]) * ref["image/width"][0]
        kept = [j for j, x in enumerate(left) if x < 3 or (x < 10 and person_kept)]
        for sub in ("class/label", "class/text", "is_crowd"):
            assert record.get(f"{P}/{sub}", []) == [ref[f"{P}/{sub}"][j] for j in kept], sub
        ref_masks, ref_points = _masks(ref), _points(ref)
        for mask, j in zip(_masks(record), kept, strict=True):
            np.testing.assert_array_equal(mask, ref_masks[j][:, :10])
        points = _points(record)
        assert points.shape[0] == len(kept) and (not kept or points.shape[1] == ref_points.shape[1])
        for i, j in enumerate(kept):
            inside = (ref_points[j, :, 0] * ref["image/width"][0] < 10) & (ref_points[j, :, 2] > 0)
            assert (points[i, :, 2] == np.where(inside, ref_points[j, :, 2], 0)).all()
    counts = json.loads((out / "manifest.json").read_text())["splits"]["val"]["labels"]
    assert counts[f"{P}/dropped"] == {"car": 3, **({} if person_kept else {"person": 4})}  # with image 5's box outside it
    assert counts[P] == {"train": 1, **({"person": 4} if person_kept else {})}


def test_the_summary_says_augmentation_drops_objects_too(coco: Path, tmp_path: Path) -> None:
    config = tmp_path / "crop.yaml"
    crop = {"__class_fullname__": "Crop", "x_min": 0, "y_min": 0, "x_max": 10, "y_max": 48, "p": 1.0}
    config.write_text(yaml.safe_dump(_config({"copies": 1, "pipeline": [crop]})))
    result = CliRunner().invoke(main, ["build", str(coco), "-o", str(tmp_path / "out"), "-w", "1", "-c", str(config)])
    assert result.exit_code == 0, result.output
    line = "dropped 3 objects left with no area inside its image or cut off by augmentation: counted by class under image/object/dropped"
    assert line in result.output


def test_heavy_augmentation_never_writes_a_degenerate_box(coco: Path, tmp_path: Path) -> None:
    augment = {"copies": 12, "boxes": {"min_area": 2}, "pipeline": HEAVY}
    made = hidden = dropped = 0
    for seed in (0, 1):
        out = _build(coco, tmp_path / f"out{seed}", _config(augment), seed=seed)
        for records in _records(out).values():
            assert len(records) == 12
            for record in records:
                _check_consistent(record)
                made += 1
                people = np.array([t == b"person" for t in record.get(f"{P}/class/text", [])], dtype=bool)
                hidden += int((_points(record)[people][..., 2] == 0).sum()) - int(people.sum())  # each has 1 unlabelled
        dropped += sum(json.loads((out / "manifest.json").read_text())["splits"]["val"]["labels"][f"{P}/dropped"].values())
    assert made == 2 * 6 * 12
    # Objects were pushed out (beyond image 5's box outside it), and keypoints of people who stayed.
    assert dropped > 2 * 12 and hidden > 0


def test_workers_and_seeds_decide_the_bytes(coco: Path, tmp_path: Path) -> None:
    augment = {"copies": 3, "keep_original": True, "pipeline": HEAVY}
    options = {"records_per_shard": 5}
    one = _build(coco, tmp_path / "one", _config(augment), **options)
    shards = sorted(p.name for p in one.glob("*.tfrecord"))
    assert len(shards) >= 2
    again = _build(coco, tmp_path / "again", _config(augment), **options)
    two = _build(coco, tmp_path / "two", _config(augment), workers=2, **options)
    other = _build(coco, tmp_path / "other", _config(augment), seed=1, **options)
    for name in shards:
        assert (two / name).read_bytes() == (one / name).read_bytes() == (again / name).read_bytes()
    assert b"".join((other / n).read_bytes() for n in shards) != b"".join((one / n).read_bytes() for n in shards)


def test_masks_are_drawn_once_an_entry_not_once_a_copy(coco: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []
    draw = annotations.instance_mask

    def counting(objects: annotations.Objects, i: int, width: int, height: int) -> np.ndarray:
        drawn.append(objects.ref(i))
        return draw(objects, i, width, height)

    monkeypatch.setattr(annotations, "instance_mask", counting)
    augment = {"copies": 3, "keep_original": True, "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 0.5}]}
    _build(coco, tmp_path / "out", _config(augment))
    assert len(drawn) == len(set(drawn)) == 7  # the 7 objects inside their images, each once


@pytest.mark.parametrize(
    "last",
    [
        {"__class_fullname__": "HorizontalFlip", "p": 0.5},
        # An upscale after the downscale: the filter after the downscale must have dropped the crowd.
        {"__class_fullname__": "Resize", "height": 96, "width": 128, "p": 1.0},
    ],
)
def test_a_leading_downscale_moves_the_objects_as_decoding_whole_does(tmp_path: Path, last: dict[str, Any]) -> None:
    """``decode: reduced`` shrinks the JPEGs at decode and scales the objects to the shrunk image;
    the boxes, masks and keypoints are those albumentations gives when it resizes everything,
    box filters included: the crowd's box is 0.75 x 48 pixels after the downscale, under
    ``min_area``, and the person's 5.06 x 7.5, over it."""
    coco = write_coco(tmp_path / "coco", width=256, height=192)
    pipeline = [{"__class_fullname__": "SmallestMaxSize", "max_size": 48, "p": 1.0}, last]
    built = {}
    for decode in ("reduced", "exact"):
        out = _build(coco, tmp_path / decode, _config({"copies": 2, "decode": decode, "boxes": {"min_area": 37}, "pipeline": pipeline}))
        counts = json.loads((out / "manifest.json").read_text())["splits"]["val"]["labels"]
        assert counts[f"{P}/dropped"] == {"car": 2, "train": 2}  # in each copy: image 5's box outside it, the crowd
        built[decode] = _records(out)
    pairs = [(e, r) for name, records in built["exact"].items() for e, r in zip(records, built["reduced"][name], strict=True)]
    assert any(e["image/encoded"] != r["image/encoded"] for e, r in pairs)  # the JPEGs were decoded shrunk
    for name, records in built["exact"].items():
        for exact, reduced in zip(records, built["reduced"][name], strict=True):
            _check_consistent(reduced)
            assert reduced["image/height"] == exact["image/height"] != [192]
            for key, values in exact.items():
                if key.startswith(f"{P}/") and key.endswith(("min", "max", "/x", "/y")):
                    np.testing.assert_allclose(reduced[key], values, atol=1e-6)
                elif key.startswith(P):
                    assert reduced[key] == values, key


@pytest.mark.parametrize(
    ("boxes", "message"),
    [
        ({"min_visibility": 1.5}, "augment.boxes.min_visibility: expected a number from 0 to 1, got 1.5"),
        ({"min_visibility": "half"}, "augment.boxes.min_visibility: expected a number from 0 to 1, got 'half'"),
        ({"min_area": -1}, "augment.boxes.min_area: expected a number, 0 or more, got -1"),
        ({"min_area": True}, "augment.boxes.min_area: expected a number, 0 or more, got True"),
        ({"min_area": float("inf")}, "augment.boxes.min_area: expected a number, 0 or more, got inf"),
        ({"min_width": 3}, "augment.boxes.min_width: unknown key (allowed: min_visibility, min_area)"),
        ([0.3], "augment.boxes: expected a mapping, got list"),
    ],
)
def test_box_filter_mistakes_are_one_line_with_the_key_path(boxes: object, message: str) -> None:
    raw = _config({"boxes": boxes, "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 0.5}]})
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "c.yaml")
    assert str(info.value) == f"c.yaml: {message}"


def test_box_filters_need_objects_and_shardkit_sets_the_box_parameters() -> None:
    flip = {"__class_fullname__": "HorizontalFlip", "p": 0.5}
    no_objects = {"features": {"image": {"kind": "image"}}, "augment": {"boxes": {"min_area": 4}, "pipeline": [flip]}}
    with pytest.raises(ConfigError) as info:
        parse_config(no_objects, "c.yaml")
    assert str(info.value) == "c.yaml: augment.boxes: filters the boxes of an objects feature, and this config has none"
    own = {"transform": {"__class_fullname__": "Compose", "transforms": [flip], "bbox_params": {"format": "coco"}, "p": 1.0}}
    with pytest.raises(ConfigError) as info:
        parse_config(_config({"pipeline": own}), "c.yaml")
    assert str(info.value).startswith("c.yaml: augment.pipeline.bbox_params: shardkit sets these for the objects feature")
    assert "\n" not in str(info.value)


def test_the_fingerprinted_config_has_boxes_only_where_they_filter() -> None:
    flip = [{"__class_fullname__": "HorizontalFlip", "p": 0.5}]
    plain = parse_config(_config({"pipeline": flip})).to_dict()["augment"]
    assert "boxes" not in plain
    assert parse_config(_config({"boxes": {"min_visibility": 0}, "pipeline": flip})).to_dict()["augment"] == plain
    filtered = parse_config(_config({"boxes": {"min_area": 4}, "pipeline": flip})).to_dict()["augment"]
    assert filtered["boxes"] == {"min_visibility": 0.0, "min_area": 4.0}


def test_raw_images_keep_their_bytes_and_augmented_copies_take_their_sources_format(tmp_path: Path) -> None:
    """The shipped instance-mask config (encoding: raw) with an augment section: each original's
    bytes as they are in its file, each copy encoded anew in its source's format (a JPEG as JPEG,
    a PNG as PNG, any other format as PNG)."""
    from PIL import Image

    from tests.paths import REPO

    annotation = write_coco(tmp_path / "coco", images=4)
    document = json.loads(annotation.read_text())
    folder = annotation.parent.parent / "val2017"
    for image, suffix in zip(document["images"][1:3], (".png", ".bmp"), strict=True):  # PNG and BMP sources
        jpeg = folder / image["file_name"]
        image["file_name"] = jpeg.with_suffix(suffix).name
        with Image.open(jpeg) as im:
            im.save(folder / image["file_name"])
        jpeg.unlink()
    annotation.write_text(json.dumps(document))
    config = yaml.safe_load((REPO / "configs" / "coco-instance-masks.yaml").read_text())
    assert config["features"]["image/encoded"]["encoding"] == "raw"
    config["augment"] = {"copies": 2, "keep_original": True, "pipeline": [{"__class_fullname__": "HorizontalFlip", "p": 1.0}]}
    out = _build(annotation, tmp_path / "out", config)
    records = _records(out)
    expect = {".jpg": b"jpeg", ".png": b"png", ".bmp": b"png"}
    assert sorted(records) == sorted(image["file_name"] for image in document["images"])
    for name, copies in records.items():
        source = (folder / name).read_bytes()
        assert len(copies) == 3
        originals = [r for r in copies if r["image/encoded"][0] == source]
        assert len(originals) == 1  # the original's bytes, untouched
        assert originals[0]["image/format"] == [Path(name).suffix[1:].replace("jpg", "jpeg").encode()]
        with Image.open(folder / name) as im:
            mirrored = np.asarray(im.convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT))
        for copy in (r for r in copies if r is not originals[0]):
            data = copy["image/encoded"][0]
            assert copy["image/format"] == [expect[Path(name).suffix]]
            decoded = (tf.io.decode_jpeg if expect[Path(name).suffix] == b"jpeg" else tf.io.decode_png)(data, channels=3).numpy()
            assert decoded.shape == (copy["image/height"][0], copy["image/width"][0], 3) == mirrored.shape
            if expect[Path(name).suffix] == b"png":
                np.testing.assert_array_equal(decoded, mirrored)  # lossless
            else:  # JPEG at the feature's quality (95), as Pillow writes it
                again = io.BytesIO()
                Image.fromarray(mirrored).save(again, format="JPEG", quality=95)
                np.testing.assert_array_equal(decoded, tf.io.decode_jpeg(again.getvalue(), channels=3).numpy())
    schema = {entry["key"]: entry for entry in json.loads((out / "manifest.json").read_text())["schema"]}
    assert schema["image/encoded"]["encoding"] == "raw"
