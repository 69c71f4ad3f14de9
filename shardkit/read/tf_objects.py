"""The tensors ``shardkit.tfdata`` builds from an objects feature's lists (where they are, the
kind says: ``features.base.ObjectLists``): boxes, classes, masks decoded, all padded to a fixed
count on request; and how records whose lists vary in length keep batching through a map.

TensorFlow is imported inside each function, as in ``read.tf_datasets``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.features.drawn import ObjectLists
from shardkit.features.registry import of_entry
from shardkit.output.manifest import Manifest


def lists_of(manifest: Manifest, spec: Mapping[str, Any]) -> list[ObjectLists]:
    """Each objects feature's lists, where the parse ``spec`` reads them (masks and keypoints only
    where stored)."""
    configs = manifest.config.get("features", {})
    found: dict[str, ObjectLists] = {}
    for entry in manifest.schema:
        kind = of_entry(entry)
        key = kind.feature_key(entry)
        lists = kind.object_lists(key, configs.get(key, {})) if key not in found else None
        if lists is not None and all(k in spec for k in (*lists.corners, lists.label)):
            masks = lists.masks if lists.masks in spec else None
            points = lists.points if lists.points and all(k in spec for k in lists.points) else None
            found[key] = dataclasses.replace(lists, masks=masks, points=points)
    return list(found.values())


def built(features: Mapping[str, Any], objects: Sequence[ObjectLists]) -> dict[str, Any]:
    """Parsed records (a batch: lists as ``RaggedTensor`` rows) with each objects feature's boxes,
    ``[batch, None, 4]`` (ymin, xmin, ymax, xmax), and classes, ``[batch, None]`` (places in the
    class list: the ids the records hold need not be 0, 1, ...; -1 for an id not in the list)."""
    import tensorflow as tf

    out = dict(features)
    for lists in objects:
        out[lists.boxes] = tf.stack([features[key] for key in lists.corners], axis=-1)
        out[lists.classes] = tf.ragged.map_flat_values(_places, features[lists.label], lists.class_ids)
    return out


def _places(ids: Any, class_ids: tuple[int, ...]) -> Any:
    import tensorflow as tf

    if not class_ids:
        return tf.fill(tf.shape(ids), tf.constant(-1, tf.int64))
    order = np.argsort(np.asarray(class_ids, np.int64), kind="stable")
    known = tf.constant(np.asarray(class_ids, np.int64)[order])
    at = tf.minimum(tf.searchsorted(known, ids), len(class_ids) - 1)
    return tf.where(tf.gather(known, at) == ids, tf.gather(tf.constant(order.astype(np.int64)), at), tf.constant(-1, tf.int64))


def decoded_masks(features: Mapping[str, Any], objects: Sequence[ObjectLists], lead: str | None) -> dict[str, Any]:
    """One record's masks decoded to (N, H, W) uint8, H and W those of its decoded picture ``lead``."""
    import tensorflow as tf

    out = dict(features)
    if lead is None:
        return out
    for lists in objects:
        if lists.masks is None:
            continue
        size = tf.shape(features[lead])[:2]
        pngs = features[lists.masks]
        one_channel = tf.TensorSpec([None, None], tf.uint8)

        def decode(pngs: Any = pngs, one_channel: Any = one_channel) -> Any:
            return tf.map_fn(lambda png: tf.io.decode_png(png, channels=1)[..., 0], pngs, fn_output_signature=one_channel)

        def none(size: Any = size) -> Any:  # map_fn cannot stack no masks of an unknown size
            return tf.zeros(tf.concat([[0], size], axis=0), tf.uint8)

        masks = tf.cond(tf.size(pngs) > 0, decode, none)
        fits = tf.reduce_all(tf.equal(tf.shape(masks)[1:], size))
        check = tf.debugging.Assert(fits, [f"{lists.key}: a mask is not the size of its image {lead!r} (shardkit verify --deep names it)"])
        with tf.control_dependencies([check]):
            out[lists.masks] = tf.identity(masks)
    return out


def padded(features: Mapping[str, Any], objects: Sequence[ObjectLists], count: int) -> dict[str, Any]:
    """A batch's boxes and classes (and decoded masks) as dense tensors of ``count`` objects each:
    boxes and classes padded with -1, masks with 0; a record with more objects fails, in one line."""
    import tensorflow as tf

    out = dict(features)
    for lists in objects:
        boxes = features[lists.boxes]
        most = tf.reduce_max(tf.concat([boxes.row_lengths(), [0]], axis=0))
        why = f"{lists.key}: a record has more than max_objects={count} objects (shardkit inspect shows the most a record has)"
        with tf.control_dependencies([tf.debugging.assert_less_equal(tf.cast(most, tf.int64), tf.constant(count, tf.int64), message=why)]):
            out[lists.boxes] = boxes.to_tensor(default_value=-1.0, shape=[None, count, 4])
            out[lists.classes] = features[lists.classes].to_tensor(default_value=-1, shape=[None, count])
            masks = features.get(lists.masks) if lists.masks else None
            if lists.masks is not None and masks is not None and masks.dtype == tf.uint8:  # decoded
                out[lists.masks] = masks.to_tensor(default_value=0, shape=[None, count, None, None])
    return out


def one_padded(features: Mapping[str, Any], objects: Sequence[ObjectLists], count: int) -> dict[str, Any]:
    """``padded`` for one record, whose lists are plain tensors."""
    import tensorflow as tf

    keys = [k for lists in objects for k in (lists.boxes, lists.classes, lists.masks) if k is not None and k in features]
    batch = {k: tf.RaggedTensor.from_tensor(features[k][None]) for k in keys}
    one = padded(batch, objects, count)
    return {**features, **{k: one[k][0] for k in keys}}


def has_ragged(element_spec: Mapping[str, Any]) -> bool:
    import tensorflow as tf

    return any(isinstance(s, tf.RaggedTensorSpec) for s in element_spec.values())


def as_batch_of_one(features: Mapping[str, Any], element_spec: Mapping[str, Any]) -> dict[str, Any]:
    """One record as a batch of one, to be unbatched after the map that made it.

    Inside a ``map`` a record's ragged list (a ``RaggedTensorSpec`` element, as unbatching a
    parsed batch gives it) is a plain tensor, and comes out of the map as one: records whose
    lists differ in length would then no longer batch. Returned as a ragged batch of one and
    unbatched, each such list (and anything built from it: boxes, decoded masks) is a ragged
    element again. Padded ones (a fixed first dimension) stay plain.
    """
    import tensorflow as tf

    out = {}
    for key, value in features.items():
        ragged = isinstance(element_spec.get(key), tf.RaggedTensorSpec) and value.shape.rank and value.shape[0] is None
        out[key] = tf.RaggedTensor.from_tensor(value[None]) if ragged else value[None]
    return out
