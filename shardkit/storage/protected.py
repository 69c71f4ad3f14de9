"""What a command may delete or overwrite: only names it writes itself, never one of its inputs.

The one rule every command that writes applies (``build``, ``finalize``, ``snapshot-materialize``,
``preview``), checked before anything is written:

* a file or folder a command replaces whole (a snapshot folder, a picture) is never an input,
  nor a folder that is or holds one (an index file, an image, an annotation file, a config, the
  source shards);
* a folder a command writes names into (a build's OUT) is never a folder its inputs are found in
  by listing it, and no input lies at a name the command writes or deletes there.

Inputs are compared as the files they are: symbolic links and ``..`` followed locally, a URL as
written. Which names are a command's own is the command's business (``output.layout`` for a
build); this module only compares paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from shardkit.errors import UsageError
from shardkit.storage import location


def real(path: str | os.PathLike[str]) -> str:
    """The file a path names: links and ``..`` followed locally, a URL absolute as written."""
    text = os.fspath(path)
    return location.absolute(text) if location.is_url(text) else os.path.realpath(location.local_path(text))


def inside(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or lies under it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class Inputs:
    """The paths a command reads, as real paths: none of them may be deleted or overwritten."""

    def __init__(self, paths: Iterable[str | os.PathLike[str] | None]) -> None:
        given = [os.fspath(p) for p in paths if p is not None and os.fspath(p)]
        self.pairs = [(p, real(p)) for p in dict.fromkeys(given)]  # (as given, real path)

    def held_by(self, target: str | os.PathLike[str]) -> str | None:
        """The first input that is ``target`` or lies inside it, as given; None where none does."""
        where = real(target)
        return next((given for given, path in self.pairs if inside(path, where)), None)


def refuse_replacing(target: str, inputs: Inputs, *, command: str, remedy: str) -> None:
    """Before ``command`` deletes or replaces ``target`` whole: refuse where it is or holds an input."""
    held = inputs.held_by(target)
    if held is None:
        return
    what = "is" if real(held) == real(target) else "holds"
    raise UsageError(f"{target}: {what} an input of {command} ({held}), which it never deletes or overwrites; {remedy}")


def refuse_writing_into(
    out: str,
    inputs: Inputs,
    owned: Callable[[str], bool],
    *,
    command: str,
    listed: Iterable[tuple[str, str]] = (),
    walked: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Before ``command`` writes names into the folder ``out`` (and may delete its own there),
    refuse where its own files would be taken for inputs by the next run: ``out`` is a folder
    the inputs are read from (``listed``: (folder, input) pairs, a folder of index files or an
    index file's own folder) or lies in a tree walked for them (``walked``: an ImageFolder tree);
    and where an input lies at a path of ``out`` (relative to it) that ``owned`` says the command
    writes or deletes."""
    where = real(out)
    for folder in walked:
        if inside(where, real(folder)):
            raise UsageError(f"{out}: is inside the input tree {os.fspath(folder)}, every folder of which is read as input; "
                             "give -o a folder outside it")  # fmt: skip
    for folder, source in listed:
        if real(folder) == where:
            raise UsageError(
                f"{out}: is the folder the input {source} is read from, where {command}'s own files would be taken for inputs by "
                f"the next run; give -o a folder of its own, such as {location.join(out, 'shards')}"
            )
    for given, path in inputs.pairs:
        if path != where and inside(path, where) and owned(path[len(where.rstrip("/")) + 1 :]):
            raise UsageError(
                f"{given}: is an input at a name {command} writes or replaces in {out}, and an input is never overwritten; "
                "move it, or give -o another folder"
            )
