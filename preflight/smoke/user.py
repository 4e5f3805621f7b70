"""The user's own model: ``package.module:build`` or ``path/to/file.py:build``.

``build()`` takes no arguments and returns ``(model, loss_fn, collate)``:
``collate(rows: list[dict]) -> (inputs, targets)``, ``model(inputs) -> outputs``,
``loss_fn(outputs, targets) -> scalar tensor``; ``collate=None`` means the built-in one.

Naming a model runs its code: importing the module, ``build()``, and ``forward``, the loss
and ``collate`` in every step. All of it runs inside ``user_code(spec)``, so a
``sys.exit(0)`` there is an error (exit 2) that names the spec, never preflight's own exit
with no report.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import reprlib
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from torch import nn

from preflight.errors import ConfigError
from preflight.paths import find_beside
from preflight.smoke import deadline, sigint
from preflight.text import first_line
from preflight.threads import leave_behind

CONTRACT = ("build() must take no arguments and return (model, loss_fn, collate): "
            "model a torch.nn.Module, loss_fn(outputs, targets) -> scalar tensor, "
            "collate(rows) -> (inputs, targets) or None for the built-in collate")


class _ExitCalled(SystemExit):
    """``os._exit(status)`` called by the user's code while preflight runs it."""


_real_exit = os._exit
_guarding: list[int] = []  # the pids that run user code now (one entry per open user_code)


def _guarded_exit(status: int) -> NoReturn:
    """``os._exit`` while user code runs: an exception here, the real exit elsewhere (a
    forked child of the user's, a reference kept after the stage ended)."""
    if os.getpid() in _guarding:
        raise _ExitCalled(status)
    _real_exit(status)


@contextlib.contextmanager
def _no_hard_exit() -> Iterator[None]:
    """``os._exit`` is an exception while the user's code runs: it ended preflight with the
    status it was given (0 for ``os._exit(0)``), no report and no word, read by CI as a
    pass. A signal or ``os.abort()`` still ends the process (with a non-zero status)."""
    _guarding.append(os.getpid())
    os._exit = _guarded_exit
    try:
        yield
    finally:
        _guarding.pop()
        if not _guarding:
            os._exit = _real_exit


def _always() -> bool:
    return True


@contextlib.contextmanager
def user_code(spec: str) -> Iterator[None]:
    """Run the user's code: a ``SystemExit`` (or any other ``BaseException`` but
    ``smoke.time_limit``'s ``deadline.TimeUp``) it raises becomes a ``ConfigError`` naming
    ``spec``, as does a ``KeyboardInterrupt`` it raises itself (one from Ctrl-C, a real
    SIGINT, passes through: see ``sigint``). An ordinary
    exception passes through: where it happens decides whether it is a contract error or a
    failed run.

    What the code prints goes to stderr (stdout is preflight's: ``--json``, a summary read
    by ``| head``); a working directory it changes is restored after, so relative paths
    (``--out``, the input) still mean what the command line meant; a non-daemon thread it
    leaves running is recorded (``preflight.threads.left_by_user``) so that the command
    still ends once its work is done."""
    cwd = os.getcwd()
    before = set(threading.enumerate())
    ctrl_c = _always  # until SIGINT is counted: a KeyboardInterrupt is Ctrl-C's
    try:
        with contextlib.redirect_stdout(sys.stderr), _no_hard_exit(), \
                sigint.counting() as ctrl_c:
            yield
    except KeyboardInterrupt as e:
        if ctrl_c():
            raise
        at, said = sigint.where_raised(e.__traceback__), first_line(e)
        raise ConfigError(
            f"--model {spec!r}: your code raised KeyboardInterrupt{f' at {at}' if at else ''}"
            f"{f' ({said})' if said != type(e).__name__ else ''}, with no Ctrl-C (no SIGINT "
            "came); "
            "preflight stops here (exit 2): raise an ordinary exception to fail a run"
        ) from e
    except (Exception, deadline.TimeUp):
        raise
    except BaseException as e:
        did = (f"called os._exit({e.code})" if isinstance(e, _ExitCalled)
               else f"raised {reprlib.repr(e)}")
        raise ConfigError(
            f"--model {spec!r}: your code {did}; preflight stops here "
            "(exit 2): a model's code must return or raise an exception, never exit"
        ) from e
    finally:
        with contextlib.suppress(OSError):
            if os.getcwd() != cwd:
                os.chdir(cwd)
        leave_behind(t for t in threading.enumerate()
                     if t not in before and not t.daemon and t.is_alive())


def resolve_spec(spec: str, *, base: Path | None = None) -> str:
    """``spec`` with a ``file.py`` target made absolute (found as given or beside the rules
    file), so a replay file names the same model from any working directory."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise ConfigError(f"--model {spec!r}: write package.module:build or file.py:build")
    if target.endswith(".py"):
        path = find_beside(target, base, what="--model: file")
        return f"{path.resolve()}:{attr}"
    return spec


def load_build(spec: str, *, base: Path | None = None) -> Callable[[], Any]:
    """The ``build`` function ``spec`` names; a clear ``ConfigError`` when it cannot load."""
    target, _, attr = resolve_spec(spec, base=base).rpartition(":")
    deadline.phase("import")
    with user_code(spec):
        module = _import(spec, target)
    build = getattr(module, attr, None)
    if not callable(build):
        raise ConfigError(f"--model {spec!r}: {target!r} has no function {attr!r}")
    return build


def _import(spec: str, target: str) -> Any:
    if target.endswith(".py"):
        module = _from_file(Path(target))
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"--model {spec!r}: cannot import {target!r}: "
                              f"{first_line(e)}") from e
        except Exception as e:
            raise ConfigError(f"--model {spec!r}: importing {target!r} failed: "
                              f"{type(e).__name__}: {first_line(e)}") from e
    return module


WATCH_CONTRACT = ("for a preflight.watch replay, build() must take no arguments and return "
                  "(model, step_fn, None): model a torch.nn.Module, step_fn(model, batch) -> "
                  "scalar loss (the step_fn given to preflight.watch)")


def call_build(build: Callable[[], Any], spec: str, *,
               watch: bool = False) -> tuple[nn.Module, Any, Any]:
    """Call ``build()`` and check what it returned against the contract (``watch``: a
    watch replay's, ``(model, step_fn, None)``)."""
    contract, fn = (WATCH_CONTRACT, "step_fn") if watch else (CONTRACT, "loss_fn")
    deadline.phase("build")
    try:
        with user_code(spec):
            made = build()
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"--model {spec!r}: build() raised "
                          f"{type(e).__name__}: {first_line(e)}") from e
    if inspect.iscoroutine(made):  # closed, or Python warns it "was never awaited"
        made.close()
        raise ConfigError(f"--model {spec!r}: build() is async (it returned a coroutine); "
                          f"make it a plain function: {contract}")
    if not isinstance(made, tuple) or len(made) != 3:
        raise ConfigError(f"--model {spec!r}: build() returned {type(made).__name__}; {contract}")
    model, loss_fn, collate = made
    if not isinstance(model, nn.Module):
        raise ConfigError(f"--model {spec!r}: the model is a {type(model).__name__}, "
                          f"not a torch.nn.Module; {contract}")
    if not callable(loss_fn):
        raise ConfigError(f"--model {spec!r}: {fn} is not callable; {contract}")
    if collate is not None and not callable(collate):
        raise ConfigError(f"--model {spec!r}: collate is not callable; {contract}")
    return model, loss_fn, collate


def _from_file(path: Path) -> Any:
    name = f"preflight_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(name, None)
        if not isinstance(e, Exception):
            raise  # SystemExit and the like: user_code names them
        raise ConfigError(f"--model: running {path} failed: "
                          f"{type(e).__name__}: {first_line(e)}") from e
    return module
