"""The ``preflight`` command group and the process around it: the commands it holds, a
closed standard stream plugged before any of them runs, a reader gone or Ctrl-C outside a
command's own handling, and the fast exit of ``run``."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import click

from preflight.cli.console import err_console
from preflight.cli.exits import plug_closed_streams, silence_stdout
from preflight.cli.fixing import fix
from preflight.cli.gate import check, smoke
from preflight.cli.reports import diff, report
from preflight.cli.rule_files import init, rules


class _Main(click.Group):
    """The command group: a closed standard stream is plugged before any command runs, and
    a reader gone where no command expected it ends the run quietly (exit 141, as SIGPIPE
    would), never with a traceback; Ctrl-C before a command handles it itself (its options
    parsed, ``guarded``'s imports) is exit 130 too, not click's "Aborted!" and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        plug_closed_streams()
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence_stdout()
            err_console().quiet = True
            sys.exit(141)
        except KeyboardInterrupt:
            err_console().print("interrupted")
            sys.exit(130)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dataset-preflight", prog_name="preflight")
def main() -> None:
    """Gate a training corpus before it reaches a GPU."""


for _command in (check, smoke, fix, report, diff, rules, init):
    main.add_command(_command)


# The real os._exit, kept at import: while the user's model code runs, the smoke stage
# makes os._exit raise instead (preflight.smoke.user), and _stuck must really end.
_exit = os._exit


def _stuck(message: str, before_data: bool) -> None:
    """A smoke stage that ignored its time limit's stop (``preflight.stuck``): one line and
    out, from the watchdog's thread, with the code the stop would have given: 2 when the
    setup check hung before any data was read, else 1 (the code fault)."""
    with contextlib.suppress(Exception):
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
    _exit(2 if before_data else 1)


def run() -> None:
    """The ``preflight`` command (and ``python -m preflight``): ``main``, then out of the
    process without tearing the interpreter down, once the exit handlers have run (temporary
    folders, the fork server) and the streams are flushed: freeing a large corpus's arrays
    object by object took 0.4 s of a 7 s gate. With another thread still running (but one the
    user's model code left behind), or an exit status that is not a number, the normal exit."""
    import atexit
    import threading

    from preflight import stuck
    from preflight.threads import close_pools, left_by_user

    stuck.on_stuck = _stuck  # a command never waits forever; a library caller decides itself
    try:
        main()
    except SystemExit as e:
        code = e.code
    else:  # pragma: no cover - click's standalone mode always exits
        code = 0
    if code is None:
        code = 0
    close_pools()  # their idle threads would count as threads at work
    # A non-daemon thread the user's model code left running would hold the normal exit
    # forever, after the verdict was printed: then the command leaves without it.
    if not isinstance(code, int) or (threading.active_count() > 1 and not left_by_user()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone: the status stays the run's
            if stream is not None:
                stream.flush()
    os._exit(code)
