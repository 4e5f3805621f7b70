"""The smoke stage's time limit (``smoke.time_limit``): a model whose forward, loss,
backward, collate or ``build()`` never returns must end the stage with a reason, never hang
the gate (a data-prep DAG would wait on it forever).

``call_within(seconds, fn)`` runs ``fn`` and stops it when the limit passes, three ways:

- **In the main thread** (the CLI, most scripts): a one-shot ``SIGALRM`` timer
  (``setitimer``) whose handler raises ``TimeUp``. It stops Python code that loops and the
  blocking calls Python wakes for a signal (``time.sleep``, a lock or queue wait, I/O). The
  previous handler is put back afterwards, always; a caller whose own ``ITIMER_REAL`` is
  armed (``signal.alarm``) keeps it, and the stage uses the watchdog below instead.
- **Elsewhere** (a worker thread of an orchestrator, a platform without ``setitimer``): a
  watchdog thread raises ``TimeUp`` in the stage's thread (``PyThreadState_SetAsyncExc``).
  That stops Python code that loops; a blocking call is stopped only once it returns.
- **Always**: every phase change (``phase``, ``step``, ``run``) checks the clock, and a
  watchdog thread sends the stop again every ``REFIRE`` seconds past the limit until the
  stage ends: the user's code may have cancelled the timer (``signal.alarm(0)`` in a
  ``with timeout(...)`` helper), put its own ``SIGALRM`` handler in place, or swallowed the
  first stop (``except:``). It sends ``SIGALRM`` while the handler is this clock's (that
  wakes a blocking call), else raises in the stage's thread. Past ``hard_grace`` it calls
  ``preflight.stuck.on_stuck`` when the command line registered one (the process ends).

No in-process mechanism stops one native call that never returns (a deadlocked native op or
collective, a C extension that spins without returning to Python): that hangs still.

``TimeUp`` derives from ``BaseException``, so neither the user's ``except Exception`` nor
the loop's own handlers (which turn an exception into a failed run) swallow it; past the
limit it is sent once, then again only every ``REFIRE`` seconds while the stage has still
not ended (code that swallows it is also stopped again at the next phase change), and
``call_within`` turns it into ``Expired`` (an ordinary exception that says where the stage
was) after the timer, the handler and the watchdog are gone. A run that started with
``run(name, record)`` hands its ``record`` (what it has recorded so far: the losses of the
steps it completed) to ``Expired.record``, so that a stopped run is reported with what it
did, not as empty.
"""

from __future__ import annotations

import contextvars
import ctypes
import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from preflight import stuck

T = TypeVar("T")

# Seconds past the limit before the watchdog sends the stop again (the first stop, obeyed,
# ends the stage in milliseconds), and how often after that.
SLACK, REFIRE = 0.5, 2.0


def hard_grace(seconds: float) -> float:
    """Seconds past a limit of ``seconds`` before a stage that ignores every stop is given
    up on (``preflight.stuck``): long enough for one slow native op to return."""
    return max(10.0, seconds / 10)

# How to raise the limit, for the messages.
RAISE_LIMIT = "`smoke: time_limit: SECONDS` in the rules file, or --set smoke.time_limit=SECONDS"
# What each phase is called in the message, and where to look for a hang in it.
PHASES: dict[str, tuple[str, str]] = {
    "start": ("starting the smoke stage", "the model's code"),
    "import": ("importing your model module", "the module's top-level code"),
    "folder": ("loading the model folder", "the folder's config, tokenizer or weights"),
    "checkpoint": ("loading the checkpoint", "the checkpoint file"),
    "build": ("building the model", "build()"),
    "encode": ("encoding the sample", "the tokenizer"),
    "collate": ("collate", "collate"),
    "copy": (
        "copying the model for a fresh run",
        "the model's deepcopy (a model that cannot be copied is rebuilt with build())",
    ),
    "setup": ("setting up the run (optimizer, schedule, hooks)", "the optimizer or the schedule"),
    "forward": ("forward", "the model's forward"),
    "loss": ("the loss", "loss_fn"),
    "backward": ("backward", "the backward pass (a custom autograd Function, a gradient hook)"),
    "optimizer": ("the optimizer step", "the optimizer, clipping or the schedule"),
}


class TimeUp(BaseException):
    """The limit passed (raised where the stage's thread was)."""


class Expired(Exception):
    """``call_within``'s limit passed; says where the stage was."""

    def __init__(
        self,
        seconds: float,
        elapsed: float,
        phase: str,
        step: int | None,
        run: str | None,
        record: object = None,
    ) -> None:
        self.seconds, self.elapsed = seconds, elapsed
        self.phase, self.step, self.run = phase, step, run
        self.record = record  # what the run stopped had recorded (``run(name, record)``)
        super().__init__(f"ran past {seconds:g} s in {self.where()}")

    @property
    def label(self) -> str:
        """The phase as the message names it (``forward``, ``building the model``)."""
        return PHASES.get(self.phase, (self.phase, ""))[0]

    @property
    def look_in(self) -> str:
        """Where a hang in this phase lives."""
        return PHASES.get(self.phase, ("", "the model's code"))[1]

    def where(self) -> str:
        """``forward at step 3 of the control run``."""
        text = self.label
        if self.step is not None:
            text += f" at step {self.step}"
        if self.run:
            text += f" of the {self.run} run" if self.step is not None else f" ({self.run} run)"
        return text


_UNSET = object()
_ACTIVE: contextvars.ContextVar[_Clock | None] = contextvars.ContextVar(
    "preflight_smoke_deadline", default=None
)


def phase(name: str) -> None:
    """Mark what the stage does now (a ``PHASES`` key); stop when the limit has passed."""
    clock = _ACTIVE.get()
    if clock is not None:
        clock.check()
        clock.phase = name


def step(index: int | None) -> None:
    """Mark the training step the run is at (None: outside the steps)."""
    clock = _ACTIVE.get()
    if clock is not None:
        clock.check()
        clock.step = index


def run(name: str, record: object = None) -> None:
    """Mark the run that starts (control, real, repeat, probe...); ``record``: the object
    it fills as it trains (a ``SmokeRun``), which ``Expired.record`` holds if it is
    stopped."""
    clock = _ACTIVE.get()
    if clock is not None:
        clock.check()
        clock.run, clock.step, clock.record = name, None, record


def call_within(seconds: float, fn: Callable[[], T], *, before_data: bool = False) -> T:
    """``fn()``, stopped when ``seconds`` pass: then ``Expired``, raised after the timer,
    the signal handler and the watchdog are all gone (also when ``fn`` returns or raises
    anything else, Ctrl-C included). ``before_data``: the setup check, before the gate read
    anything (what ``preflight.stuck.on_stuck`` is told)."""
    clock = _Clock(seconds, before_data=before_data)
    token = _ACTIVE.set(clock)
    try:
        try:
            clock.arm()
            return fn()
        finally:
            clock.disarm()
    except TimeUp:
        while True:  # again: the limit may have passed inside the first disarm
            try:
                clock.disarm()
                break
            except TimeUp:  # a watchdog's, delivered late: nothing is left to come now
                continue
        raise clock.expired() from None
    finally:
        _ACTIVE.reset(token)


class _Clock:
    """One limit: where the stage is, and the timer or watchdog that stops it."""

    def __init__(self, seconds: float, *, before_data: bool = False) -> None:
        self.seconds, self.before_data = seconds, before_data
        self.phase, self.step, self.run = "start", None, None
        self.record: object = None
        self._started = time.monotonic()
        self._ends = self._started + seconds
        self._lock = threading.RLock()  # re-entrant: the signal handler runs in this thread
        self._fired = self._stopped = self._injected = self._again = False
        self._signals = False  # the SIGALRM timer is this clock's first stop
        self._thread = threading.get_ident()
        self._previous: object = _UNSET  # the SIGALRM handler replaced
        self._wake = threading.Event()
        self._watchdog: threading.Thread | None = None

    def arm(self) -> None:
        if _can_signal():
            self._signals = True
            self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        # the only stop without the timer; with it, the stop sent again (see the docstring)
        self._watchdog = threading.Thread(
            target=self._watch, daemon=True, name="preflight-smoke-deadline"
        )
        self._watchdog.start()

    def disarm(self) -> None:
        """Stop the timer, put the handler back, stop the watchdog; safe to call twice."""
        with self._lock:
            self._stopped = True
            injected = self._injected
        if self._previous is not _UNSET:
            signal.setitimer(signal.ITIMER_REAL, 0)
            # None: a handler not set from Python, which cannot be put back; the default
            signal.signal(
                signal.SIGALRM, signal.SIG_DFL if self._previous is None else self._previous
            )  # type: ignore[arg-type]
            self._previous = _UNSET
        if injected:  # raised in this thread but maybe not delivered yet: drop it
            _clear_async(self._thread, None)
        self._wake.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join()

    def check(self) -> None:
        """The between-phases check: stop when the limit has passed (again, if code in
        between swallowed the first ``TimeUp`` with ``except BaseException``)."""
        if time.monotonic() >= self._ends and not self._stopped:
            with self._lock:
                if self._stopped:
                    return
                self._fired = True
            raise TimeUp

    def expired(self) -> Expired:
        return Expired(
            self.seconds,
            time.monotonic() - self._started,
            self.phase,
            self.step,
            self.run,
            self.record,
        )

    def _fire(self) -> bool:
        """True for the first of the timer and the watchdog (or ``check``) to see the limit
        pass, and again for each stop the watchdog sends later, while the clock is armed."""
        with self._lock:
            if self._stopped or (self._fired and not self._again):
                return False
            self._fired, self._again = True, False
            return True

    def _on_alarm(self, signum: int, frame: object) -> None:
        left = self._ends - time.monotonic()
        if left > 0:  # another's alarm (signal.alarm in the user's code) replaced the timer
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
            return
        if self._fire():
            raise TimeUp

    def _watch(self) -> None:
        first = self._ends + (SLACK if self._signals else 0.0)
        if self._wake.wait(max(0.0, first - time.monotonic())):
            return  # disarmed in time
        hard = self._ends + hard_grace(self.seconds)
        while True:
            self._send()
            if self._wake.wait(max(0.0, min(REFIRE, hard - time.monotonic()))):
                return
            if time.monotonic() >= hard and stuck.on_stuck is not None:
                with self._lock:
                    if self._stopped:
                        return
                expired = self.expired()
                stuck.on_stuck(
                    f"the smoke stage ran past smoke.time_limit ({self.seconds:g} s) in "
                    f"{expired.where()} and did not stop when asked, "
                    f"{hard_grace(self.seconds):g} s on: {expired.look_in} catches every "
                    "exception (a bare `except:`) or is stuck in one native call. preflight "
                    f"ends without a report: fix the hang, or raise the limit if it is only "
                    f"slow ({RAISE_LIMIT})",
                    self.before_data,
                )
                return

    def _send(self) -> None:
        """The stop, sent from the watchdog: ``SIGALRM`` while this clock's handler is in
        place (it wakes a blocking call), else ``TimeUp`` raised in the stage's thread."""
        with self._lock:
            if self._stopped:
                return
            self._again = True
            if self._signals and signal.getsignal(signal.SIGALRM) == self._on_alarm:
                signal.pthread_kill(self._thread, signal.SIGALRM)
                return
            self._fired = self._injected = True
            _set_async(self._thread, TimeUp)


def _can_signal() -> bool:
    """A SIGALRM timer works here: the main thread, a platform with ``setitimer``, and no
    ITIMER_REAL of the caller's armed (theirs must keep its time and its handler)."""
    return (
        hasattr(signal, "setitimer")
        and hasattr(signal, "SIGALRM")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


# PyThreadState_SetAsyncExc(thread id, exception class or NULL to clear), with the GIL held
# (PYFUNCTYPE); own prototypes, so that ctypes.pythonapi's shared one is left as it is.
_set_async = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
