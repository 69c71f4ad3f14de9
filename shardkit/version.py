"""shardkit's version, read from the installed package's metadata (pyproject.toml is the one source).

A leaf module: whatever needs the version (the manifest, resume's build state, the Dask version
check, the snapshot metadata) imports it from here, never from the package root.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("shardkit")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
