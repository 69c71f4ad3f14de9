"""The ``shardkit`` command: a thin layer over the Python API, every error one line.

``main`` (the click group) and ``run`` (the console entry point, ``shardkit.cli:run``) live in
``cli.main``; ``cli.options`` holds the option types and bundles the commands share,
``cli.reporting`` turns errors and results into lines, ``cli.preview`` is the preview command.
"""

from shardkit.cli.main import main, run

__all__ = ["main", "run"]
