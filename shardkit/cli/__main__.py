"""``python -m shardkit.cli``: the same as the ``shardkit`` command."""

from shardkit.cli.main import run

run()
