"""What the read and view sides get of a feature with objects: where a record keeps them
(``ObjectLists``, for tensors) and what a preview draws over a picture (``Overlay``)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Overlay:
    """What a preview draws over a record's picture for one feature: its objects, placed in
    fractions of the picture's width and height, so that any size of tile can show them."""

    boxes: np.ndarray  # (N, 4) xmin, ymin, xmax, ymax
    names: tuple[str, ...]  # each object's class name
    colours: tuple[int, ...]  # each object's colour number (its class's place in the class list, from 1)
    crowd: tuple[bool, ...] | None = None  # which boxes hold a crowd rather than one object
    masks: np.ndarray | None = None  # (N, h, w) 0/1, at the size the picture is shown
    keypoints: np.ndarray | None = None  # (N, K, 3) x, y, visibility (0 not labelled, 1 hidden, 2 visible)


@dataclasses.dataclass(frozen=True)
class ObjectLists:
    """Where a record keeps one image's objects (one value per object in each list), for readers
    that build tensors from them (``shardkit.tfdata``), and the names of what they build."""

    key: str  # the feature's key
    boxes: str  # built: (N, 4) float32 ymin, xmin, ymax, xmax, as TensorFlow's detection APIs take boxes
    classes: str  # built: (N,) int64, each object's class as its place in the class list (0, 1, ...)
    corners: tuple[str, str, str, str]  # the stored ymin, xmin, ymax and xmax lists
    label: str  # the stored class ids
    class_ids: tuple[int, ...]  # class i of the class list has id class_ids[i]
    masks: str | None  # the stored per-object PNG masks, decoded in place with the images
    points: tuple[str, str] | None = None  # the stored keypoint x and y lists (fractions of the picture), where kept
    # The other stored lists, which say nothing about where in the picture an object is (classes,
    # flags, the area in the original's pixels): a resize leaves them as they are.
    unplaced: tuple[str, ...] = ()
