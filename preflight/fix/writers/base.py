"""The seam every clean-output writer implements: ``keep``, ``change``, ``blank``, ``close``.

A writer writes its file under a temporary name that the caller renames once the run is
done; on an error it lets go of the file (``discard``) without finishing it. With no path
(``--dry-run``) it writes nowhere but refuses what it would refuse when writing: the dry run's
answer is the real run's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from preflight.fix.units import Input, Unit


class Writer:
    """Base: a clean output file under a temporary name (renamed by the caller), or
    nowhere when ``path`` is None."""

    # Set by a writer writing nowhere that learnt only at ``close`` the schema the records
    # are written in: the caller sends the same units again to a writer given that schema.
    retype: Any = None
    # The struct fields whose names the output's schema mends (``renames``), as the
    # manifest lists them.
    renamed: list[dict[str, str]] = []  # noqa: RUF012 - replaced, never appended to

    def __init__(self, path: Path | None, found: Input) -> None:
        self.path, self.found = path, found

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is None:
            self.close()
        else:  # finishing the file would fail again and hide why (a full disk: exit 3)
            self.discard()

    def keep(self, unit: Unit) -> None:
        raise NotImplementedError

    def change(self, unit: Unit, after: dict[str, Any]) -> None:
        raise NotImplementedError

    def blank(self, unit: Unit) -> bool:
        """Write a blank line where the format has them; True when written."""
        return False

    def close(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        """Let go of the file after a failure, writing nothing more (the caller deletes it)."""
        with contextlib.suppress(OSError):
            self.close()
