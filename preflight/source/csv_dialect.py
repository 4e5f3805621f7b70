"""A CSV file's dialect: which delimiter splits its fields, and how it was chosen.

The delimiter is the one forced (``--delimiter``), else ``\t`` for a ``.tsv`` file, else
sniffed per file from its first lines (``,``, ``;``, tab or ``|``: the one that splits the
header into more than one field and the most following lines into as many; ``,`` when none
does). The report says which delimiter each file was read with and how it was chosen, and
warns when the chosen one leaves the header one column while another would split it.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from preflight.errors import ConfigError
from preflight.source.tracked import open_stream

DELIMITERS = (",", "\t", ";", "|")  # sniffed, in this order of preference on a tie
_SNIFF_BYTES = 64 << 10
_SNIFF_LINES = 50
_LONG_NAME = 64  # characters: a header cell this long reads as a record's text
_NAN_WORDS = {"nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"}


_NAMED = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def check_delimiter(value: str | None) -> str | None:
    """A ``--delimiter`` value as one character (``tab`` and ``\\t`` name the tab); a
    ``ConfigError`` for anything else."""
    if value is None:
        return None
    d = _NAMED.get(value.lower(), value)
    if len(d) != 1 or d in ('"', "\r", "\n") or d.isalnum():
        raise ConfigError(f"--delimiter must be one character such as ',' ';' '|' or tab "
                          f"(written tab or \\t), got {value!r}")
    return d


def delimiter_of(path: Path, forced: str | None = None) -> str:
    """The delimiter of the CSV file ``path``: ``forced``, else tab for ``.tsv``, else
    sniffed from its first lines."""
    return dialect_of(path, forced)[0]


def dialect_of(path: Path, forced: str | None = None) -> tuple[str, str, list[str]]:
    """The delimiter of the CSV file ``path``, how it was chosen (``--delimiter``,
    ``.tsv``, ``sniffed``), and warnings: when it leaves the header one column although
    another candidate delimiter splits it into several (a wrong ``--delimiter``, or a
    header the sniffer could not read), and when the header looks like a record or names
    a column twice (``header_warnings``)."""
    stream, _ = open_stream(path)
    with stream:
        sample = stream.read(_SNIFF_BYTES)
    suffixes = [s.lower() for s in path.suffixes]
    if forced is not None:
        d, how = forced, "--delimiter"
    elif ".tsv" in suffixes[-2:]:
        d, how = "\t", ".tsv"
    else:
        d, how = sniff_delimiter(sample), "sniffed"
    single = _single_column_warning(path, sample, d)
    return d, how, [single] if single else header_warnings(path.name, _header(sample, d))


def describe_dialects(dialects: list[tuple[str, str, str]]) -> tuple[str | None, str | None]:
    """The delimiter a CSV input was read with and how it was chosen, for the report
    (``None, None`` for no CSV file; per file when the files differ)."""
    used = {(d, how) for _, d, how in dialects}
    if not used:
        return None, None
    if len(used) == 1:
        ((d, how),) = used
        return d, how
    return ("; ".join(f"{name}: {d}" for name, d, _ in dialects),
            ", ".join(sorted({how for _, how in used})))


def delimiter_name(d: str) -> str:
    """A delimiter as people write it (``tab`` for the tab)."""
    return "tab" if d == "\t" else repr(d)


def _header(sample: bytes, delimiter: str) -> list[str]:
    text = sample.decode("utf-8-sig", "replace")
    lines = io.StringIO(text)
    try:
        header = next(csv.reader(lines, delimiter=delimiter), [])
    except csv.Error:
        return []
    if len(sample) == _SNIFF_BYTES and not lines.read() and not text.endswith(("\n", "\r")):
        # a header longer than the sample (thousands of columns): its last cell is cut
        # short (``c10`` of ``c10017``), and was taken for a repeated name
        return header[:-1]
    return header


def header_warnings(name: str, header: list[str]) -> list[str]:
    """Warnings about a CSV header: cells that read as a number or run long, as a record's
    do (a file written without a header: its first record is taken for the column names and
    never checked), and a name given twice (the second column is read as ``name_1`` and is
    not the field the rules name)."""
    warnings = []
    odd = [cell for cell in header if _is_number(cell) or len(cell) > _LONG_NAME]
    if odd:
        shown = ", ".join(repr(c if len(c) <= 40 else c[:40] + "…") for c in odd[:3])
        warnings.append(
            f"{name}: the header row holds {shown}, which look{'s' if len(odd) == 1 else ''} "
            "like data, not column names: CSV needs a header row; if this file has none, "
            "its first record is read as the column names and is not checked (add a header)")
    repeated = sorted(cell for cell, n in Counter(header).items() if n > 1)
    if repeated:
        warnings.append(
            f"{name}: the header names {', '.join(map(repr, repeated))} more than once: a "
            f"repeated name's later columns are read as {repeated[0] + '_1'!r}, … and are "
            "not the field the rules name (rename them in the header)")
    return warnings


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return bool(cell.strip()) and cell.strip().lower() not in _NAN_WORDS


def _single_column_warning(path: Path, sample: bytes, delimiter: str) -> str | None:
    if len(_header(sample, delimiter)) != 1:
        return None
    for other in DELIMITERS:
        if other != delimiter and len(cols := _header(sample, other)) > 1:
            return (f"{path.name}: the delimiter {delimiter_name(delimiter)} leaves the header "
                    f"one column, but {delimiter_name(other)} splits it into {len(cols)} "
                    f"({', '.join(cols[:5])}{' …' if len(cols) > 5 else ''}): check "
                    f"--delimiter")
    return None


def sniff_delimiter(sample: bytes) -> str:
    """The delimiter that splits ``sample``'s header into the most fields such that the
    most following lines have as many (``,`` when no candidate splits the header)."""
    text = sample.decode("utf-8-sig", "replace")
    if len(sample) == _SNIFF_BYTES and "\n" in text:  # drop a line cut by the sample's end
        text = text[: text.rindex("\n") + 1]
    best, best_score = ",", (0.0, 0)
    for d in DELIMITERS:
        try:
            rows = [r for r in itertools.islice(csv.reader(io.StringIO(text), delimiter=d),
                                                _SNIFF_LINES) if r]
        except csv.Error:
            continue
        if not rows or len(rows[0]) < 2:
            continue
        body = rows[1:]
        agree = sum(len(r) == len(rows[0]) for r in body) / len(body) if body else 1.0
        score = (agree, len(rows[0]))
        if score > best_score:
            best, best_score = d, score
    return best


def note_dialect(path: Path, state: dict[str, Any]) -> str:
    """The delimiter of ``path`` (forced by ``state["delimiter"]``), noted in ``state`` for
    the report: ``dialects`` (file, delimiter, how chosen) and any ``warnings``."""
    delimiter, how, warnings = dialect_of(path, state.get("delimiter"))
    state.setdefault("dialects", []).append((path.name, delimiter, how))
    state.setdefault("warnings", []).extend(warnings)
    return delimiter
