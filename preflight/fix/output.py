"""Reading the input unit by unit and writing the clean output and the quarantine."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zstandard

from preflight.fix.mend import Mender
from preflight.fix.plan import Plan
from preflight.source import open_source


def records(path: Path, fmt: str | None) -> Iterator[tuple[str | None, int, bytes | None, Any]]:
    """Every input unit in order: (file label, row, raw line or None, parsed record or None).

    JSON Lines is read line by line so unchanged lines are copied byte for byte and
    malformed lines travel verbatim; other formats go through the Source."""
    if fmt == "json":
        with _open_raw(path) as f:
            head = f.read(4096).lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
        if head.startswith(b"["):
            yield from _json_array(path)
            return
        fmt = "jsonl"  # JSON Lines under a .json name
    if fmt == "jsonl":
        from preflight.source.jsonl import parse_line

        with _open_raw(path) as f:
            for row, line in enumerate(f):
                body = line.rstrip(b"\n")
                if row == 0:
                    body = body.removeprefix(b"\xef\xbb\xbf")
                if not body.strip():
                    yield None, row, line, None  # a blank line: not a record, kept as is
                    continue
                yield None, row, line, Lazy(body, parse_line)
        return
    yield from _via_source(path)


def _json_array(path: Path) -> Iterator[tuple[str | None, int, bytes | None, Any]]:
    """The elements of a JSON array as written (no typing into columns: an integer stays an
    integer, an absent key stays absent). The array is loaded whole: fix on a JSON array is
    for the modest files that format is used for."""
    from preflight.batch import Malformed

    with _open_raw(path) as f:
        text = f.read().decode("utf-8", "surrogateescape")
    try:
        elements = json.loads(text)
    except json.JSONDecodeError:  # the reader already reported it; fall back to its view
        yield from _via_source(path)
        return
    for row, element in enumerate(elements):
        if isinstance(element, dict):
            yield None, row, None, element
        else:
            yield (
                None,
                row,
                None,
                Malformed(row, "not_an_object", f"a JSON {type(element).__name__}, not an object"),
            )


def _via_source(path: Path) -> Iterator[tuple[str | None, int, bytes | None, Any]]:
    """Records of any other source (CSV, Parquet, Arrow, folders), typed as read."""
    source = open_source(path)
    for batch in source.batches():
        values = {name: batch.values(name) for name in batch.frame.columns}
        bad = {m.row: m for m in batch.malformed}
        for k, row in enumerate(batch.rows.tolist()):
            for r in sorted(r for r in list(bad) if r < row):
                yield batch.file, r, None, bad.pop(r)
            yield batch.file, row, None, {name: v[k] for name, v in values.items()}
        for r in sorted(bad):
            yield batch.file, r, None, bad[r]


class Lazy:
    """A JSON line parsed only when needed."""

    def __init__(self, body: bytes, parse: Any) -> None:
        self.body, self._parse = body, parse

    def get(self) -> tuple[Any, Any]:
        return self._parse(self.body)


def _open_raw(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix in (".zst", ".zstd"):
        return zstandard.open(path, "rb")
    return open(path, "rb")


def write_round(
    path: Path,
    fmt: str | None,
    out_format: str,
    the_plan: Plan,
    mender: Mender,
    clean: Path,
    quarantined: Path,
    *,
    origin: Origin | None,
    later: dict[tuple[str | None, int], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """One round: the clean output, and the quarantine. In a later round (reading an earlier
    round's clean output, ``origin`` mapping its lines to input rows) quarantine decisions go
    to ``later`` instead, by input row, to be merged in order with the original records."""
    counts: dict[str, Any] = {
        "input": 0,
        "clean": 0,
        "quarantined": 0,
        "changed": set(),
        "blank": 0,
    }
    new_origin = Origin()
    writer = Writer(clean, out_format)
    with writer, open(quarantined, "ab" if later is not None else "wb") as q:
        for file, row, line, rec in records(path, fmt):
            original_file, original_row = origin[row] if origin is not None else (file, row)
            key = (file, row)
            if rec is None and line is not None:  # blank line: kept in JSON Lines output
                counts["blank"] += 1
                if writer.fmt == "jsonl":
                    writer.raw(line)
                    new_origin.append(original_file, original_row)
                continue
            counts["input"] += 1
            if key in the_plan.quarantine:
                reasons = the_plan.quarantine[key]
                if later is not None:
                    assert origin is not None
                    later[(original_file, original_row)] = [origin.renumber(r) for r in reasons]
                else:
                    q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                counts["quarantined"] += 1
                continue
            if key in the_plan.transforms:
                record = rec.get()[0] if isinstance(rec, Lazy) else rec
                mended = mender.apply(record, the_plan.transforms[key])
                emptied = mender.emptied(record, mended)
                if emptied:  # nothing would be left to train on: set it aside instead
                    reasons = [
                        {
                            "rule": "fix",
                            "check": "empty",
                            "code": "empty_after_fix",
                            "detail": f"{emptied}: nothing left after "
                            + ", ".join(sorted(the_plan.transforms[key])),
                            "action": "quarantine",
                        }
                    ]
                    if later is not None:
                        later[(original_file, original_row)] = reasons
                    else:
                        q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                    counts["quarantined"] += 1
                    continue
                writer.record(mended)
                counts["changed"].add((original_file, original_row))
            elif line is not None and writer.fmt == "jsonl":
                writer.raw(line if line.endswith(b"\n") else line + b"\n")
            else:
                record = rec.get()[0] if isinstance(rec, Lazy) else rec
                if not isinstance(record, dict):  # a malformed line cannot be a Parquet row
                    reasons = [
                        {
                            "rule": "fix",
                            "check": "malformed",
                            "code": "not_a_record",
                            "detail": "not a record, so it cannot be written as one",
                            "action": "quarantine",
                        }
                    ]
                    q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                    counts["quarantined"] += 1
                    continue
                writer.record(record)
            counts["clean"] += 1
            new_origin.append(original_file, original_row)
    counts["origin"] = new_origin
    return counts


def merge_quarantine(
    src: Path,
    fmt: str | None,
    quarantined: Path,
    later: dict[tuple[str | None, int], list[dict[str, Any]]],
    mender: Mender,
) -> None:
    """Add the records quarantined in later rounds to the quarantine, in input order and
    with their original (input) records."""
    files: dict[str | None, int] = {}  # file label -> its place in the read order
    pending = []
    for file, row, line, rec in records(src, fmt):
        files.setdefault(file, len(files))
        if (file, row) in later and not (rec is None and line is not None):
            entry = _quarantine_line(file, row, rec, line, later[(file, row)], mender)
            pending.append(((files[file], row), entry))
    merged = quarantined.with_name(quarantined.name + ".merge")
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


def _quarantine_line(
    file: str | None,
    row: int,
    rec: Any,
    line: bytes | None,
    reasons: list[dict[str, Any]],
    mender: Mender,
) -> bytes:
    entry: dict[str, Any] = {"row": row, "file": file, "id": None, "reasons": reasons}
    record = rec.get()[0] if isinstance(rec, Lazy) else rec
    if isinstance(record, dict):
        entry["id"] = _id(record, mender)
        entry["record"] = record
    elif line is None:  # a malformed element of a non-line format: the reader's verdict
        entry["malformed"] = getattr(rec, "detail", None)
    else:  # a malformed line, kept verbatim
        body = line.rstrip(b"\n")
        try:
            entry["raw"] = body.decode("utf-8")
        except UnicodeDecodeError:
            entry["raw_base64"] = base64.b64encode(body).decode()
    return json_line(entry)


def _id(record: dict[str, Any], mender: Mender) -> str | None:
    name = mender.ctx.fields.id
    value = record.get(name) if name else None
    return None if value is None else str(value)


def json_line(value: Any) -> bytes:
    """One JSON line (NaN literals kept); a lone surrogate, which UTF-8 cannot hold, is
    written as its \\u escape, as it was read."""
    try:
        return (json.dumps(value, ensure_ascii=False, allow_nan=True) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(value, ensure_ascii=True, allow_nan=True) + "\n").encode()


class Writer:
    """Clean output: JSON Lines (unchanged lines copied byte for byte) or Parquet."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path, self.fmt = path, fmt
        self._rows: list[dict[str, Any]] = []
        self._parquet: Any = None
        self._f: Any = None

    def __enter__(self) -> Writer:
        if self.fmt == "jsonl":
            self._f = open(self.path, "wb")
        return self

    def raw(self, line: bytes) -> None:
        self._f.write(line)

    def record(self, record: dict[str, Any]) -> None:
        if self.fmt == "jsonl":
            self._f.write(json_line(record))
            return
        self._rows.append(record)
        if len(self._rows) >= 65_536:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._rows:
            return
        table = pa.Table.from_pylist(self._rows)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, table.schema)
        self._parquet.write_table(table.cast(self._parquet.schema))
        self._rows = []

    def __exit__(self, *exc: object) -> None:
        if self.fmt == "jsonl":
            self._f.close()
            return
        self._flush()
        if self._parquet is None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({}), self.path)
        else:
            self._parquet.close()


# -- results ----------------------------------------------------------------------------


def part(final: Path, n: int) -> Path:
    """A temporary name beside ``final`` (the same folder, so the rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.stem}.{os.getpid()}.{n}.part{final.suffix}")


def place_text(text: str, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(f".{final.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, final)
