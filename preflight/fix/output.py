"""One round of ``fix``: read the input unit by unit, write the clean output and the
quarantine (or, for ``--dry-run``, write nowhere and refuse as when writing); and merging
later rounds' quarantine decisions back in input order."""

from __future__ import annotations

import json
import os
import re
from array import array
from pathlib import Path
from typing import Any

from preflight.fix.mend import Mender, key_renames
from preflight.fix.plan import Plan
from preflight.fix.units import Input, Unit, units
from preflight.fix.writers import malformed_refusal, open_writer, quarantine_line
from preflight.tempfiles import temp_path


def write_round(
    found: Input,
    out_format: str,
    the_plan: Plan,
    mender: Mender,
    clean: Path | None,
    quarantined: Path | None,
    *,
    origin: Origin | None,
    later: dict[tuple[str | None, int], list[dict[str, Any]]] | None = None,
    schema: Any = None,
) -> dict[str, Any]:
    """One round: the clean output, and the quarantine. In a later round (reading an earlier
    round's clean output, ``origin`` mapping its units to input rows) quarantine decisions go
    to ``later`` instead, by input row, to be merged in order with the original records.
    With no ``clean`` and ``quarantined`` nothing is written (``dry_round``); ``schema``
    and ``counts["retype"]``: see ``Writer.retype``."""
    counts: dict[str, Any] = {"input": 0, "clean": 0, "quarantined": 0, "changed": set(),
                              "blank": 0, "renamed_keys": {}}
    new_origin = Origin()
    id_field = mender.ctx.fields.id
    with open_writer(clean, out_format, found, schema=schema,
                     rename=mender.name_mend()) as writer, \
            open(quarantined or os.devnull, "ab" if later is not None else "wb") as q:

        def set_aside(unit: Unit, reasons: list[dict[str, Any]], at: tuple[str | None, int]
                      ) -> None:
            if later is not None:
                assert origin is not None
                later[at] = [origin.renumber(r) for r in reasons]
            else:
                q.write(quarantine_line(unit, reasons, id_field))
            counts["quarantined"] += 1

        for unit in units(found):
            at = origin[unit.row] if origin is not None else (unit.file, unit.row)
            key = (unit.file, unit.row)
            if unit.blank:  # a blank line: not a record, kept in place where the format can
                counts["blank"] += 1
                if writer.blank(unit):
                    new_origin.append(*at)
                continue
            counts["input"] += 1
            if key in the_plan.quarantine:
                set_aside(unit, the_plan.quarantine[key], at)
                continue
            record = unit.record()
            if record is None:  # malformed, and its rule's action is none: keep it as written
                why = malformed_refusal(unit, out_format)
                if why is None:
                    writer.keep(unit)
                    counts["clean"] += 1
                    new_origin.append(*at)
                    continue
                set_aside(unit, [_reason("malformed", "not_a_record",
                                         f"not a record, so it {why}")], at)
                continue
            if key in the_plan.transforms:
                actions = the_plan.transforms[key]
                done = ", ".join(sorted(actions))
                if bad := mender.unmendable(record):
                    set_aside(unit, [_reason("encoding", "not_utf8", f"{bad}: binary value "
                                             f"is not valid UTF-8, so {done} cannot be "
                                             "written back")], at)
                    continue
                if why := mender.unmendable_keys(record, actions,
                                                 schema=found.syntax != "json"):
                    set_aside(unit, [_reason("invisible_unicode", "key_not_mendable",
                                             f"{why}, so {done} cannot be written")], at)
                    continue
                mended = mender.apply(record, actions)
                emptied = mender.emptied(record, mended)
                if emptied:  # nothing would be left to train on: set it aside instead
                    set_aside(unit, [_reason("empty", "empty_after_fix",
                                             f"{emptied}: empty or only whitespace after "
                                             f"{done}")], at)
                    continue
                writer.change(unit, mended)
                counts["changed"].add(at)
                _count_renames(counts, record, mended)
            elif (the_plan.keys and unit.syntax == "json" and unit.raw
                  and mender.may_rename_keys(unit.raw, the_plan.keys)):
                # Not flagged, yet a key hiding a character may be here holding no value
                # (null): renamed as in the flagged records, or the clean output keeps the
                # name (a check of it flags the schema's name). Only such lines are parsed.
                mended = mender.renamed_keys(record)
                if why := mender.renamed_keys_clash(record):
                    set_aside(unit, [_reason("invisible_unicode", "key_not_mendable",
                                             f"{why}, so it cannot be renamed")], at)
                    continue
                if mended is record:
                    writer.keep(unit)
                else:
                    writer.change(unit, mended)
                    counts["changed"].add(at)
                    _count_renames(counts, record, mended)
            else:
                writer.keep(unit)
            counts["clean"] += 1
            new_origin.append(*at)
    counts["origin"] = new_origin
    counts["retype"] = writer.retype
    counts["renamed_fields"] = writer.renamed
    return counts


def dry_round(found: Input, out_format: str, the_plan: Plan, mender: Mender
              ) -> dict[str, Any]:
    """Round one writing nowhere: its counts, and every refusal of the writers raised as
    when writing (exit 2), so that a dry run answers what the real run would."""
    counts = write_round(found, out_format, the_plan, mender, None, None, origin=None)
    if counts["retype"] is not None:  # the records again, typed as they would be written
        counts = write_round(found, out_format, the_plan, mender, None, None, origin=None,
                             schema=counts["retype"])
    return counts


def _count_renames(counts: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
                   ) -> None:
    """Count the keys renamed in a record: one per record and place, however many turns or
    list items hold the key."""
    for where, new in dict(key_renames(before, after)).items():
        renamed = counts["renamed_keys"].setdefault(where, {"to": new, "records": 0})
        renamed["records"] += 1


def _reason(check: str, code: str, detail: str) -> dict[str, Any]:
    return {"rule": "fix", "check": check, "code": code, "detail": detail,
            "action": "quarantine"}


def merge_quarantine(
    found: Input,
    quarantined: Path,
    later: dict[tuple[str | None, int], list[dict[str, Any]]],
    mender: Mender,
) -> None:
    """Add the records quarantined in later rounds to the quarantine, in input order and
    with their original (input) records."""
    files: dict[str | None, int] = {}  # file label -> its place in the read order
    pending = []
    for unit in units(found):
        files.setdefault(unit.file, len(files))
        if (unit.file, unit.row) in later and not unit.blank:
            entry = quarantine_line(unit, later[(unit.file, unit.row)], mender.ctx.fields.id)
            pending.append(((files[unit.file], unit.row), entry))
    merged = temp_path(quarantined, tag="merge")
    with open(quarantined, "rb") as first, open(merged, "wb") as out:
        for entry in first:
            parsed = json.loads(entry)
            at = (files.get(parsed["file"], 0), parsed["row"])
            while pending and pending[0][0] < at:
                out.write(pending.pop(0)[1])
            out.write(entry)
        for _, entry in pending:
            out.write(entry)
    os.replace(merged, quarantined)


class Origin:
    """For each line of a round's clean output, the input file and row it came from."""

    def __init__(self) -> None:
        self._rows = array("q")
        self._files = array("H")
        self._labels: dict[str | None, int] = {}
        self._names: list[str | None] = []

    def append(self, file: str | None, row: int) -> None:
        if file not in self._labels:
            self._labels[file] = len(self._names)
            self._names.append(file)
        self._files.append(self._labels[file])
        self._rows.append(row)

    def __getitem__(self, k: int) -> tuple[str | None, int]:
        return self._names[self._files[k]], self._rows[k]

    def renumber(self, reason: dict[str, Any]) -> dict[str, Any]:
        """A later round's reason with rows of the clean output turned into input rows."""

        def where(match: re.Match[str]) -> str:
            file, row = self[int(match[1].replace(",", ""))]
            return f"row {row:,}" + (f" of {file}" if file else "")

        reason = dict(reason, detail=_ROW.sub(where, reason["detail"]))
        if "kept_row" in reason:
            reason["kept_row"] = self[reason["kept_row"]][1]
        return reason


_ROW = re.compile(r"\brow ([\d,]+)")


# -- results ----------------------------------------------------------------------------


def part(final: Path, n: int, fmt: str = "") -> Path:
    """A temporary name beside ``final`` (the same folder, so the rename is atomic), carrying
    this process's id so a later run can sweep it if this one is killed, and ending in the
    suffix of format ``fmt`` when it is read back."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return temp_path(final, tag=str(n), suffix=f".{fmt}" if fmt else "")
