"""The last resort of a time limit (``smoke.time_limit``, the watch's ``rerun_time_limit``)
whose stop is not obeyed: code that swallows every exception it is sent (a bare
``except:`` in a loop) or one native call that never returns.

The command line registers ``on_stuck(message, before_data)``: it prints the message and
ends the process (exit 2 while the setup check ran, before any data was read; else 1, the
code fault the stop would have reported), since a CI job must never wait forever. A library
caller registers nothing and keeps its process: the stop is sent again, and its
orchestrator's own timeout is the backstop. torch-free, so the command line can register it
before anything heavy loads."""

from __future__ import annotations

from collections.abc import Callable

on_stuck: Callable[[str, bool], None] | None = None
