"""The one list of checks: ``@register`` adds a check class under its name.

The rules-file loader, ``preflight rules list`` and the docs all read this registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from preflight.checks.base import Check

_CHECKS: dict[str, type[Check]] = {}
C = TypeVar("C", bound="type[Check]")


def register(name: str):
    """Class decorator: register a check under ``name`` (the rules file's ``check:``)."""

    def wrap(cls: C) -> C:
        if name in _CHECKS:
            raise RuntimeError(f"check {name!r} registered twice")
        cls.name = name
        _CHECKS[name] = cls
        return cls

    return wrap


def get(name: str) -> type[Check] | None:
    """The check class registered under ``name``, or None."""
    return _CHECKS.get(name)


def names() -> list[str]:
    """All registered check names, sorted."""
    return sorted(_CHECKS)


def all_checks() -> list[type[Check]]:
    """All registered check classes, sorted by name."""
    return [_CHECKS[n] for n in names()]
