"""The clean output's writers, one per format, and the quarantine's lines.

Each writer takes units as ``fix`` decides them: ``keep`` (untouched), ``change`` (a text field
or message content was mended) or ``blank`` (a blank JSON Lines line, kept in place). What each
keeps:

- JSON Lines (``text``): an untouched JSON unit byte for byte; a changed one with only the
  changed values replaced in its text. Units from CSV hold their cells as written (strings);
  from Arrow, their values as JSON.
- CSV (``text``, from CSV only): the header and untouched rows byte for byte; a changed row
  re-quoted.
- Parquet / Arrow IPC (``table``): the input's schema exactly (types, dictionaries,
  metadata); untouched rows taken as Arrow values, changed cells replaced in their own type.
  From JSON or CSV input the schema is inferred over the whole output (chunks spilled to a
  temporary file).

The seam is ``base.Writer``; ``open_writer`` picks one by format. With no path a writer
writes nowhere and refuses what it would refuse: ``--dry-run`` runs round one through it.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from preflight.fix.units import Input, Unit
from preflight.fix.writers.base import Writer
from preflight.fix.writers.table import ArrowWriter
from preflight.fix.writers.text import CsvWriter, JsonlWriter, json_line

OUTPUT_FORMATS = ("jsonl", "csv", "parquet", "arrow")


def malformed_refusal(unit: Unit, fmt: str) -> str | None:
    """Why output format ``fmt`` cannot keep a malformed unit as written (its rule's action
    is none), or None when it can: a CSV row; a JSON unit in JSON Lines unless it spans
    lines (a JSON array's bad element: as written it would be several lines, several units
    where there was one) or has no text (a file cut off before the array's ``]``: a blank
    line is not a unit); never a Parquet or Arrow row."""
    if fmt == "csv":
        return None
    if fmt != "jsonl" or unit.syntax != "json":
        return f"cannot be written as {'an' if fmt[0] in 'aeiou' else 'a'} {fmt} row"
    raw = unit.raw or b""
    if b"\n" in raw:
        return "spans several lines: one JSON Lines line cannot hold it as written"
    if not raw.strip():
        return "has no text: a blank JSON Lines line is not a unit"
    return None


def open_writer(path: Path | None, fmt: str, found: Input, *, schema: Any = None,
                rename: Any = None) -> Writer:
    """The writer for output format ``fmt``; with no ``path``, one that writes nowhere (a
    dry run) but refuses what it would refuse. ``schema``, ``rename``: see
    ``ArrowWriter`` (``rename`` also names a JSON Lines output's keys from Arrow input)."""
    if fmt == "jsonl":
        return JsonlWriter(path, found, rename=rename)
    if fmt == "csv":
        return CsvWriter(path, found)
    return ArrowWriter(path, found, fmt, schema=schema, rename=rename)


def quarantine_line(unit: Unit, reasons: list[dict[str, Any]], id_field: str | None) -> bytes:
    """The quarantine's line for a unit: row, file, id and reasons, next to the record as
    written (JSON text spliced in verbatim), or the malformed unit's raw bytes."""
    entry: dict[str, Any] = {"row": unit.row, "file": unit.file, "id": None, "reasons": reasons}
    record = unit.record()
    if record is not None:
        value = record.get(id_field) if id_field else None
        entry["id"] = None if value is None else str(value)
        if unit.syntax == "json":
            assert unit.raw is not None
            head = json_line(entry).rstrip(b"\n")
            return head[:-1] + b', "record": ' + unit.raw + b"}\n"
        entry["record"] = record
        return json_line(entry)
    if unit.malformed is not None:
        entry["malformed"] = {"code": unit.malformed.code, "detail": unit.malformed.detail}
    raw = unit.raw or b""
    try:
        entry["raw"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        entry["raw_base64"] = base64.b64encode(raw).decode()
    return json_line(entry)
