"""The front half of a build, which preview shares: inputs -> rows by split, the config, the inputs' description.

``build`` and the augmentation preview both start here, so a preview reads the inputs, infers or
loads the config and adds ``source_id`` exactly as the build will. What differs between them is
asked for by name (``split`` or ``only_split``, ``source_id``); the arguments are checked by the
caller before any work (``options.check_inputs``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shardkit.errors import UsageError
from shardkit.pipeline.config import Config
from shardkit.pipeline.inputs.splits import SplitInput, resolve_config, rows_by_split


@dataclasses.dataclass
class Prepared:
    splits: dict[str, SplitInput]  # each split's rows, streamed lazily (read once)
    config: Config  # as given, or inferred from the first entry; with source_id when asked
    inputs: dict[str, Any]  # the inputs as the fingerprint describes them: resolved paths, content hashes


def prepare(
    indexes: Sequence[str | Path],
    *,
    config: Config | str | Path | None = None,
    from_folder: str | Path | None = None,
    split: str | None = None,
    only_split: str | None = None,
    ignore: Sequence[str] = (),
    source_id: bool = True,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
) -> Prepared:
    """The rows of ``indexes`` (or of the ImageFolder tree ``from_folder``) by split, and the config.

    ``split`` puts every input in that split (the build's ``--split``); ``only_split`` keeps that
    split's inputs alone, named as their files say, before the config is inferred from them (the
    preview's ``--split``). ``source_id`` adds the ``source_id`` feature, refusing a config that
    has its own (``ConfigError``). ``image_root``: where relative image paths in the inputs resolve,
    instead of each input's own folder. ``allow_outside_root``: the files an input's format reads
    while its rows are read (VOC's XML, YOLO's image lists and labels) may leave its dataset's root.
    """
    splits, inputs = rows_by_split(indexes, from_folder, split, ignore, image_root, allow_outside_root)
    if only_split is not None:
        if only_split not in splits:
            raise UsageError(f"no split {only_split!r} in the inputs (they have {', '.join(sorted(splits))})")
        splits = {only_split: splits[only_split]}
    cfg = resolve_config(config, splits)
    return Prepared(splits, cfg.with_source_id() if source_id else cfg, inputs)
