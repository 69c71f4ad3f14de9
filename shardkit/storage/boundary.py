"""What a build may read of the paths its inputs name: inside each input's dataset root, and URLs
of the stores shardkit documents.

Paths found inside files someone else wrote (a COCO ``file_name``, a VOC ``<filename>``, a YOLO
``path:``, a table's path column) are data, not instructions. As Python's ``tarfile`` extraction
filters refuse absolute names, ``..`` and links that leave the destination, such a path must
resolve, symbolic links followed, inside its dataset's root; anything else is refused in one line
naming the resolved path and the flag that allows it. The user's own index files name any local
path. A URL of a scheme other than the documented stores' (``gs://``, ``s3://``) is refused
wherever it is named: fsspec would fetch ``http://169.254.169.254/...`` (a cloud's metadata
server, with its credentials) as readily as an image.

Cost, for builds of millions of files: the root's real path once, each folder's real path once (a
dict), and one ``lstat`` per file (whether its last name is a link), where the file is then read.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping

from shardkit.storage.stores import is_url, scheme

DEFAULT_SCHEMES = frozenset({"gs", "gcs", "s3", "s3a"})  # the stores docs/clusters.md documents
OUTSIDE_FLAG = "--allow-outside-root"
SCHEME_FLAG = "--allow-scheme"
_DOT, _TWO = f"{os.sep}.", os.sep * 2  # in a path that may need normalizing


def common_root(*paths: str) -> str:
    """The deepest folder holding every one of ``paths`` (absolute local paths, or URLs of one bucket)."""
    if any(is_url(p) for p in paths):
        heads = {p.split("://", 1)[0] for p in paths}
        if len(heads) > 1 or not all(is_url(p) for p in paths):
            return ""  # nothing holds a local path and a URL, or two stores: every path is outside
        head = heads.pop()
        return f"{head}://" + posixpath.commonpath([p.split("://", 1)[1] for p in paths])
    return os.path.commonpath([os.path.abspath(p) for p in paths])


def outside_line(path: str, root: str, real: str | None = None) -> str:
    """The refusal of ``path`` (``real``: where its links lead), for a message naming its input first."""
    via = f" (a link to {real})" if real is not None and real != path else ""
    return f"{path}{via} is outside the dataset's root {root}: refused (pass {OUTSIDE_FLAG} to read it)"


def scheme_line(path: str, found: str) -> str:
    return f"{path}: {found}:// URLs are not read unless allowed (documented: gs://, s3://; pass {SCHEME_FLAG} {found} to read it)"


def check_schemes(schemes: Iterable[str]) -> tuple[str, ...]:
    """``--allow-scheme`` values as the rule keeps them: lower case, without ``://``, sorted, each once."""
    return tuple(sorted({s.lower().removesuffix("://").strip() for s in schemes} - {""}))


class Boundary:
    """The rule for one build's reads: per input (as its rows name it), the root its paths must stay
    in (None: the user's own index file, anywhere), and the URL schemes allowed besides the stores'.
    ``outside``: every input's paths go anywhere (``--allow-outside-root``)."""

    def __init__(self, roots: Mapping[str, str | None] | None = None, schemes: Iterable[str] = (), outside: bool = False) -> None:
        self.roots = {} if outside or roots is None else {k: v for k, v in roots.items() if v is not None}
        self.schemes = DEFAULT_SCHEMES | set(check_schemes(schemes))
        self._real_roots: dict[str, str] = {}  # a root -> its real path and a separator: what an inside path starts with
        self._real_folders: dict[str, str] = {}  # a folder -> its real path: one realpath per folder, not per file
        self._inside: dict[str, dict[str, bool]] = {}  # a root -> a folder -> whether its real path is in the root's

    def confines(self, source: str) -> bool:
        """Whether the paths ``source`` names must stay in a root (a reader then opens them with no link followed)."""
        return bool(self.roots) and source in self.roots

    def refusal(self, path: str, source: str, last_link: bool = True) -> str | None:
        """Why ``path``, named by the input ``source``, may not be read (one message line); None where
        it may. ``last_link=False`` leaves out whether its last name is a link (one ``lstat``), for a
        reader that opens it with ``O_NOFOLLOW`` and asks again where that fails."""
        if "://" in path:
            found = scheme(path)
            if found is not None and found not in self.schemes:
                return scheme_line(path, found)
        root = self.roots.get(source) if self.roots else None
        return None if root is None else self.outside(path, root, last_link)

    def outside(self, path: str, root: str, last_link: bool = True) -> str | None:
        """None where ``path`` resolves inside ``root``; else the refusal, naming where it resolves."""
        if ("://" in path or "://" in root) and (is_url(path) or is_url(root)):
            key = path.split("://", 1)[-1]
            plain = is_url(path) and posixpath.normpath(key) == key.rstrip("/")  # no ".." to climb out by
            head = root.rstrip("/") + "/"
            return None if plain and root and (path == root or path.startswith(head)) else outside_line(path, root)
        if path[:1] != os.sep or _DOT in path or _TWO in path:
            path = os.path.abspath(path)  # rows give paths absolute and normalized already: the rest, made so
        folder = path.rpartition(os.sep)[0]
        verdicts = self._inside.get(root)
        if verdicts is None:
            verdicts = self._inside[root] = {}
        inside = verdicts.get(folder)
        if inside is None:  # once per folder: whether its real path is in the root's
            inside = self._holds(root, self._real_folder(folder))
            verdicts[folder] = inside
        if inside and not (last_link and os.path.islink(path)):
            return None
        real = self.real(path, last_link)  # a link, or a folder outside
        return None if self._holds(root, real) else outside_line(path, root, real)

    def real(self, path: str, last_link: bool = True) -> str:
        """``path`` (absolute) with its folder's links followed (a real path once per folder), and its
        last name's where ``last_link``."""
        folder, _, name = path.rpartition(os.sep)
        joined = f"{self._real_folder(folder)}{os.sep}{name}"
        return os.path.realpath(joined) if last_link and os.path.islink(joined) else joined

    def _real_folder(self, folder: str) -> str:
        real = self._real_folders.get(folder)
        if real is None:
            real = self._real_folders[folder] = os.path.realpath(folder or os.sep).rstrip(os.sep)
        return real

    def _holds(self, root: str, real: str) -> bool:
        top = self._real_roots.get(root)
        if top is None:
            top = self._real_roots[root] = os.path.realpath(root).rstrip(os.sep) + os.sep
        return real.startswith(top) or real + os.sep == top
