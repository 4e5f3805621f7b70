"""Small readers shared by the source tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from preflight.batch import Batch
from preflight.source import open_source


def read(path: Path) -> list[Batch]:
    return list(open_source(path).batches())


def rows(batches: list[Batch]) -> list[int]:
    return [int(r) for b in batches for r in b.rows]


def values(batches: list[Batch], name: str) -> list[Any]:
    return [v for b in batches for v in b.values(name)]


def malformed(batches: list[Batch]) -> list[tuple[int, str]]:
    return [(m.row, m.code) for b in batches for m in b.malformed]


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path
