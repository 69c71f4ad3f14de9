"""A record's decoded pictures brought to one size for batching, as detection models' input
pipelines do, with its objects' boxes, keypoints and masks moved to match (``shardkit.tfdata.load(...,
image_size=(H, W))``).

The convention is TensorFlow Model Garden's ``preprocess_ops.resize_and_crop_image`` (RetinaNet,
Mask R-CNN; the TF OD API's ``keep_aspect_ratio_resizer`` with ``pad_to_max_dimension`` does the
same for a square size): the scale is ``min(H / h, W / w)``, the scaled size ``round(h * scale),
round(w * scale)`` (at least 1 pixel), resized bilinearly, then padded at the bottom and right
with zeros by ``tf.image.pad_to_bounding_box(image, 0, 0, H, W)``. Pixel values are rounded back
to the picture's own dtype (uint8), so every picture keeps the type ``load`` gives without
resizing; a picture whose values are class ids (a segmentation mask) and instance masks are
resized nearest-neighbour, as Model Garden's ``resize_and_crop_masks`` does.

Boxes and keypoints are fractions of the picture, and the picture is now the scaled image plus
padding: a fraction ``y`` of the old height is ``y * scaled_h / H`` of the new one (the same pixel,
scaled), and likewise for x. The stored ``image/height`` and ``image/width`` stay the original's, and
so does ``area`` (the original's pixels); the other lists (classes, flags, keypoint visibility) hold
no position. A list under an objects feature that is neither (a build from a later shardkit with a
position this one does not know) is refused in one line, never passed through unmoved.

TensorFlow is imported inside each function, as in ``read.tf_datasets``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shardkit.errors import UsageError
from shardkit.features.drawn import ObjectLists


def checked(image_size: Any, decode_images: bool) -> tuple[int, int] | None:
    """``load``'s ``image_size`` as (height, width), checked; None where not given."""
    if image_size is None:
        return None
    try:
        height, width = image_size
        fits = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (height, width))
    except (TypeError, ValueError):
        fits = False
    if not fits:
        raise UsageError(f"image_size must be (height, width), two positive integers, not {image_size!r}")
    if not decode_images:
        raise UsageError("image_size resizes decoded images: it cannot be used with decode_images=False")
    return int(height), int(width)


def check_movable(out: str, spec: Mapping[str, Any], objects: Sequence[ObjectLists]) -> None:
    """One line where a record holds a list under an objects feature that ``sized`` would leave
    where it is though it may be a position in the picture: resizing would misplace it silently."""
    for lists in objects:
        moved = {*lists.corners, *(lists.points or ()), *((lists.masks,) if lists.masks else ()), *lists.unplaced}
        for key in spec:
            if key.startswith(lists.key + "/") and key not in moved:
                raise UsageError(
                    f"{out}: image_size cannot move {key!r} with the resized image (this shardkit does not know what it holds): "
                    "load without image_size and resize in your own map"
                )


def sized(
    features: Mapping[str, Any], pictures: Mapping[str, bool], objects: Sequence[ObjectLists], lead: str | None, size: tuple[int, int]
) -> dict[str, Any]:
    """One record with each decoded picture in ``pictures`` (key -> whether its values are class
    ids) scaled to fit in ``size`` and padded to it, and the objects of the picture ``lead`` moved
    to match: boxes, the stored corner lists and keypoints scaled, decoded masks resized and padded."""
    import tensorflow as tf

    out = dict(features)
    for key, class_values in pictures.items():
        out[key] = _fitted(features[key], size, nearest=class_values)
    if lead is None:
        return out
    scaled = tf.cast(_scaled_size(tf.shape(features[lead])[:2], size), tf.float32)
    fy, fx = scaled[0] / size[0], scaled[1] / size[1]  # how much of the padded picture the image fills
    for lists in objects:
        out[lists.boxes] = features[lists.boxes] * tf.stack([fy, fx, fy, fx])
        for corner, factor in zip(lists.corners, (fy, fx, fy, fx), strict=True):  # ymin, xmin, ymax, xmax
            out[corner] = features[corner] * factor
        if lists.points is not None:  # x, y; a keypoint not labelled is (0, 0), and stays so
            out[lists.points[0]] = features[lists.points[0]] * fx
            out[lists.points[1]] = features[lists.points[1]] * fy
        masks = features.get(lists.masks) if lists.masks else None
        if lists.masks is not None and masks is not None and masks.dtype == tf.uint8:  # decoded: (N, h, w)
            # A zero mask first, as Model Garden does, so that a record with no objects resizes too.
            padded = tf.concat([tf.zeros_like(masks[:1]), masks], axis=0)[..., None]
            out[lists.masks] = _fitted(padded, size, nearest=True)[1:, :, :, 0]
    return out


def _scaled_size(shape: Any, size: tuple[int, int]) -> Any:
    """(scaled_h, scaled_w), int32: ``shape`` (h, w) scaled by ``min(H / h, W / w)``, rounded."""
    import tensorflow as tf

    original = tf.cast(shape, tf.float32)
    target = tf.constant(size, tf.float32)
    scale = tf.reduce_min(target / original)
    return tf.cast(tf.clip_by_value(tf.round(original * scale), 1.0, target), tf.int32)


def _fitted(image: Any, size: tuple[int, int], nearest: bool) -> Any:
    """``image`` ((h, w, c), or a batch (n, h, w, c)) scaled to fit in ``size`` and padded at the
    bottom and right with zeros, in its own dtype."""
    import tensorflow as tf

    shape = tf.shape(image)
    scaled = _scaled_size(shape[-3:-1], size)
    if nearest:
        resized = tf.image.resize(image, scaled, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    else:
        resized = tf.saturate_cast(tf.round(tf.image.resize(image, scaled, method=tf.image.ResizeMethod.BILINEAR)), image.dtype)
    padded = tf.image.pad_to_bounding_box(resized, 0, 0, size[0], size[1])
    padded.set_shape([*image.shape[:-3], size[0], size[1], image.shape[-1]])
    return padded
