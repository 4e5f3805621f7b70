"""How a command ends: preflight's errors become an exit code and one line, never a
traceback unless --debug (``guarded``); a standard stream closed at start is plugged, and a
reader that stops reading (``| head``) ends the output quietly without changing the exit code."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, NoReturn

import click

from preflight.cli.console import err_console
from preflight.errors import PreflightError


def plug_closed_streams() -> None:
    """Point a standard stream closed at start (``>&-``) at the null device. Python leaves
    ``sys.stdout`` None then (a write or flush fails), and the next file preflight opened
    would get descriptor 1: what a library or a child process writes to "stdout" would land
    in a report."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            free = False
        except OSError:
            free = True
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if free and null != fd:
            os.dup2(null, fd)
            os.close(null)
            null = fd
        setattr(sys, name, open(null, "r" if fd == 0 else "w", encoding="utf-8",  # noqa: SIM115
                                errors="replace", closefd=null != fd))


def silence_stdout() -> None:
    """Point stdout at /dev/null, so nothing more (not even the flush at exit) fails."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@contextlib.contextmanager
def stdout_may_close() -> Iterator[None]:
    """Output that a reader may stop reading (``| head``): a broken pipe ends the output
    quietly; the caller exits with the code it decided."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        err_console().quiet = True  # the summary may have gone to stderr, as closed


# Failures of the disk or the file system, which the user fixes where the files live (exit 3);
# another OSError (a file gone missing mid-run, say) is preflight's own bug.
_IO_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EIO, errno.EFBIG, errno.ENAMETOOLONG, errno.ELOOP})
# An error message longer than this is cut (a value quoted from a hostile input must not
# flood the terminal); --debug shows it whole.
MAX_ERROR_CHARS = 10_000


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Map preflight's errors to exit codes; no traceback unless --debug."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rich.markup import escape

        debug = kwargs.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except PreflightError as e:
            if debug:
                traceback.print_exc()
            err_console().print(f"[bold red]error:[/] {escape(_capped(str(e), debug))}",
                                highlight=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            err_console().print("interrupted")
            sys.exit(130)
        except click.ClickException:  # a usage mistake: click prints it, exit 2
            raise
        except BrokenPipeError:  # stdout closed where no command expected it
            silence_stdout()
            sys.exit(141)  # what the shell reports for SIGPIPE
        except Exception as e:
            if debug:
                raise
            if isinstance(e, OSError) and e.errno in _IO_FAILURES:
                # an I/O failure no reader or writer named for the user: still exit 3
                where = f"{e.filename}: " if e.filename else ""
                err_console().print(f"[bold red]error:[/] {escape(where)}"
                                    f"{escape(e.strerror or str(e))}", highlight=False)
                sys.exit(3)
            _internal_error(e, debug)
        except BaseException as e:
            # A Rust library's panic (polars, tokenizers) derives from BaseException: it
            # printed a traceback and exited 1, which reads as "the gate failed".
            if debug or type(e).__name__ != "PanicException":
                raise
            _internal_error(e, debug)

    return wrapper


def _internal_error(e: BaseException, debug: bool) -> NoReturn:
    """A bug in preflight, not a user mistake: say so, exit 2."""
    from rich.markup import escape

    err_console().print(f"[bold red]internal error:[/] {type(e).__name__}: "
                        f"{escape(_capped(str(e), debug))}\n"
                        "This is a bug in preflight; rerun with --debug for the "
                        "traceback.", highlight=False)
    sys.exit(2)


def _capped(message: str, debug: bool) -> str:
    if debug or len(message) <= MAX_ERROR_CHARS:
        return message
    return (f"{message[:MAX_ERROR_CHARS]}\n… ({len(message) - MAX_ERROR_CHARS:,} more "
            "characters; --debug shows them)")
