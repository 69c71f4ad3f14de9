"""``PlanSource``: one input of a split as the build state keeps it, and what a worker needs of it.

It belongs to the inputs phase (they make it); the plan stores it beside its lines, which name a
source by its position among the split's sources. The state keeps its format by name, so an OUT
built before stays readable: ``{"path", "folder", "format", "names"}``, and ``"root"`` where the
paths it names must stay inside one (``storage.boundary``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shardkit.pipeline.inputs import registry
from shardkit.pipeline.inputs.formats.input_format import InputFormat


@dataclasses.dataclass(frozen=True)
class PlanSource:
    """One input of a split: an index file, or one split's root of an ImageFolder tree."""

    path: str  # as given: what error messages name
    folder: str  # absolute: what relative paths inside it resolve against, on any machine
    format: InputFormat
    names: tuple[str, ...] | None = None  # the header, where the format keeps it with the source
    # Where the paths it names must stay (``InputFormat.confines_paths``); None: anywhere (the user's
    # own index file, or a build planned before the rule, whose state has none).
    root: str | None = None

    @classmethod
    def of(cls, path: str, input_format: InputFormat, image_root: str | None = None) -> PlanSource:
        """``path`` read as ``input_format``; its relative paths resolve against ``image_root``
        (absolute) when given, else against the folder its format says."""
        root = input_format.root_of(path, image_root) if input_format.confines_paths else None
        return cls(path, image_root or input_format.folder_of(path), input_format, root=root)

    def to_dict(self) -> dict[str, Any]:
        found = {"path": self.path, "folder": self.folder, "format": self.format.name, "names": list(self.names) if self.names else None}
        return found if self.root is None else {**found, "root": self.root}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PlanSource:
        names = raw.get("names")
        return cls(raw["path"], raw["folder"], registry.named(raw["format"]), tuple(names) if names else None, raw.get("root"))
