"""The ``shardkit`` command: parse options, make one API call, print the result.

Library errors become one-line errors (exit 1), usage errors exit 2, and Ctrl-C and SIGTERM one
line saying what was kept (exit 130 or 143): see ``cli.reporting``. Nothing here imports
TensorFlow, so ``shardkit --help`` is instant.
"""

from __future__ import annotations

import click

from shardkit import interrupts
from shardkit.cli.build import build, finalize
from shardkit.cli.checks import index, inspect, verify
from shardkit.cli.options import set_storage_options
from shardkit.cli.preview import preview
from shardkit.cli.reshard import reshard
from shardkit.cli.snapshot import snapshot_materialize
from shardkit.cli.stats import stats
from shardkit.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="shardkit")
@click.option("--debug", is_flag=True, envvar="SHARDKIT_DEBUG", help="Show the traceback behind an error or an interrupt.")
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Passed to the fsspec filesystem of gs:// and s3:// paths (repeatable; VALUE may be JSON), e.g. "
    "--storage-option requester_pays=true. Credentials and endpoints come from the usual places (AWS_*, "
    "Application Default Credentials, STORAGE_EMULATOR_HOST).",
)
def main(debug: bool, storage_options: tuple[str, ...]) -> None:
    """Turn image datasets into TFRecord shards fast, safely and reproducibly."""
    if storage_options:
        set_storage_options(storage_options)


for command in (build, finalize, reshard, inspect, verify, stats, snapshot_materialize, index, preview):
    main.add_command(command)


def run() -> None:
    """The ``shardkit`` console script: ``main``, and once a command has ended on an interrupt,
    a second Ctrl-C while the interpreter shuts down changes nothing (exit 130 stays 130)."""
    try:
        main()
    except SystemExit as exc:
        if exc.code in (130, 143):
            interrupts.ignore_further()
        raise
