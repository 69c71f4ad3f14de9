"""Augmentation with albumentations: with ``reduced_decode``, the only modules that import it.

Pipelines travel as albumentations' own serialized dicts (``A.to_dict`` / ``A.from_dict``), so any
transform albumentations knows works, and a task stays a small picklable value; each worker builds
the pipeline itself. Every record's randomness comes from a seed derived from the data's identity.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shardkit.errors import ConfigError


def normalize_pipeline(raw: object) -> dict[str, Any]:
    """Turn a config's ``augment.pipeline`` into ``A.to_dict`` form, validating every transform.

    Accepts the full ``A.to_dict`` output, its inner ``transform`` mapping, or a plain list of
    transforms (wrapped in ``Compose``). Errors carry a key-path suffix such as ``.transforms[2]``.
    """
    import albumentations as A

    if isinstance(raw, list):
        transform: Any = {"__class_fullname__": "Compose", "p": 1.0, "transforms": raw}
    elif isinstance(raw, Mapping):
        transform = raw.get("transform", raw)
    else:
        raise ConfigError("", "expected a list of transforms or albumentations' serialized dict")
    if not isinstance(transform, Mapping) or "__class_fullname__" not in transform:
        raise ConfigError("", "each transform is a mapping with __class_fullname__ (as A.to_dict writes it)")
    children = transform.get("transforms")
    if isinstance(children, list):
        for i, child in enumerate(children):
            try:
                A.from_dict({"transform": dict(child)} if isinstance(child, Mapping) else {"transform": child})
            except Exception as exc:  # albumentations raises ValueError, KeyError, TypeError, pydantic errors
                name = child.get("__class_fullname__", "?") if isinstance(child, Mapping) else repr(child)
                raise ConfigError(f".transforms[{i}]", f"{name}: {_short(exc)}") from None
    try:
        built = A.from_dict({"transform": dict(transform)})
    except Exception as exc:
        raise ConfigError("", _short(exc)) from None
    # Round-trip so the stored form is albumentations' canonical one (defaults filled in), as
    # plain JSON data (tuples become lists), exactly as the manifest will hold it.
    return dict(json.loads(json.dumps(A.to_dict(built))))


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, KeyError):
        text = f"unknown transform or missing key {text}"
    return text.splitlines()[0]


class Augmenter:
    """A built pipeline applied to one input's images and masks together, seeded per record."""

    def __init__(self, pipeline: Mapping[str, Any], targets: Sequence[tuple[str, str]], decode: str = "exact") -> None:
        """``targets``: (feature key, albumentations target: ``image`` or ``mask``) of each picture,
        as its kind says. ``decode="reduced"``: when the pipeline begins with a deterministic
        downscale, that first transform is ``self.downscale`` (``pipeline.shard.reduced_decode``),
        for the caller to apply to each array (shrunk at decode where it can) before calling this,
        which runs the rest."""
        import albumentations as A

        from shardkit.pipeline.shard.reduced_decode import Downscale, split_leading_downscale

        self.downscale: Downscale | None = None
        split = split_leading_downscale(pipeline) if decode == "reduced" else None
        if split is not None:
            leading, pipeline = split
            self.downscale = Downscale(leading)
        compose = A.from_dict(dict(pipeline))
        if not isinstance(compose, A.BaseCompose):
            compose = A.Compose([compose])
        # The first picture of each target rides as albumentations' own ("image", "mask"); any
        # further ones as additional targets of that type, so geometric transforms move them all alike.
        self._targets: dict[str, str] = {}
        extra: dict[str, str] = {}
        seen: dict[str, int] = {}
        for key, target in targets:
            i = seen[target] = seen.get(target, -1) + 1
            self._targets[key] = target if i == 0 else f"{target}_{i}"
            if i:
                extra[self._targets[key]] = target
        if extra:
            compose.add_targets(extra)
        self._compose = compose

    def __call__(self, arrays: Mapping[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
        self._compose.set_random_seed(seed)
        out = self._compose(**{self._targets[k]: v for k, v in arrays.items()})
        return {k: np.ascontiguousarray(out[self._targets[k]]) for k in arrays}


def pin_native_threads() -> Callable[[], None]:
    """Make OpenCV, OpenMP and BLAS single-threaded in this process; returns a function that undoes it.

    Several worker processes each running native thread pools fight over the cores (measured:
    OpenCV's threads inside albumentations cut about 210 -> 130 images/s on 2 cores), so every
    build worker pins them to one thread: the parallelism is the processes.
    """
    import cv2
    from threadpoolctl import threadpool_limits

    previous = int(cv2.getNumThreads())
    cv2.setNumThreads(1)
    limits = threadpool_limits(limits=1)

    def restore() -> None:
        cv2.setNumThreads(previous)
        limits.restore_original_limits()

    return restore
