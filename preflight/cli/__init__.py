"""The command line: a thin layer over the Python API, and the only package that prints or
exits. ``PreflightError`` subclasses map to their exit codes: 0 pass, 1 gate failed,
2 usage or configuration error, 3 input unreadable or output unwritable. A reader that
closes stdout early (``preflight check DATA | head -1``) never changes the exit code.

Only what building the commands needs loads at import (click and preflight's own light
modules): ``preflight --help`` stays fast. Each command imports the library when it runs.

- ``group``: the ``preflight`` group, its commands, and how the process starts and leaves
- ``exits``: errors to exit codes, closed streams and broken pipes
- ``options``: the arguments and options several commands share, and the rule set they make
- ``console``: the consoles the commands print to, and the progress bar
- ``gate``: ``check`` and ``smoke``; ``fixing``: ``fix``; ``reports``: ``report render`` and
  ``diff``; ``rule_files``: ``rules list|validate|show`` and ``init``
"""

from __future__ import annotations

from preflight.cli.group import main, run

__all__ = ["main", "run"]
