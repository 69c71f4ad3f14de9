"""How the ``shardkit`` command meets the user when something goes wrong, or may.

* a ``ShardkitError`` (bad input, a refused OUT, a full disk) is one ``Error: ...`` line, exit 1;
* Ctrl-C, and SIGTERM (``docker stop``, ``timeout``, a pre-empted batch job), stop the command the
  same way: one line saying what was kept and how to resume, exit 130 or 143 (128 + the signal);
* a ``ShardkitWarning`` (the output may not fit on the disk) is one ``Warning: ...`` line;
* ``--debug`` or ``SHARDKIT_DEBUG=1`` shows the traceback behind any of them; a real bug always
  shows its traceback.
"""

from __future__ import annotations

import functools
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

import click

from shardkit import interrupts
from shardkit.errors import ShardkitError, ShardkitWarning

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Run a command so that whatever ends it is one line: errors, interrupts (130/143), warnings."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = bool(click.get_current_context().find_root().params.get("debug"))
        try:
            with interrupts.sigterm_raises(), warnings.catch_warnings():
                warnings.simplefilter("always", ShardkitWarning)
                warnings.showwarning = show_warning
                try:
                    return func(*args, **kwargs)
                except ShardkitError as exc:
                    if debug:
                        raise
                    raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM through sigterm_raises
            with interrupts.ignoring():  # the work has stopped and been cleaned up: a second Ctrl-C changes nothing now
                if debug:
                    traceback.print_exc()
                click.echo(str(exc) or "interrupted", err=True)
            sys.exit(interrupts.exit_status(exc))

    return wrapper  # type: ignore[return-value]


_plain_showwarning = warnings.showwarning


def show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None, line: str | None = None
) -> None:
    if issubclass(category, ShardkitWarning):
        click.echo(f"Warning: {message}", err=True)
    else:
        _plain_showwarning(message, category, filename, lineno, file, line)
