"""A JSON file that is one object holding the records in a list (``{"data": [...]}``).

Read as JSON Lines it is one record, and on one line (as ``json.dump`` writes it) the gate
would pass having checked none of the records inside (with no text field, or with a
``"version"`` string beside the list as the text). The gate fails on it instead and ``fix``
refuses it, both saying how to extract the records. That holds for a ``.json`` file, also
gzip- or zstd-compressed (``train.json.gz``), and for a one-line JSON Lines file or standard
input (``cat train.json | preflight check -``), which read it the same way. A wrapper per
line, element, file or (Parquet, Arrow, ``datasets``) row fails the gate too; for the
columnar formats the hint is a polars command, as jq reads only text.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from pathlib import Path
from typing import BinaryIO

from preflight.columnar import ONE_RECORD, Layout, layout
from preflight.config import DEFAULT_PRESET
from preflight.jq import jq_command, jq_extract
from preflight.report.model import Report, SourceInfo
from preflight.source.stdin import STDIN, is_spooled
from preflight.source.tracked import open_stream

# The source warning's words for a .json file that is one object (``one_object_note``).
ONE_OBJECT = "holds one JSON object"
# Parsed whole to find the list only up to this size; past it, only a list that follows
# scalar members at the head of the file is found.
_PARSE_MAX = 256 << 20
# The rules that read no field: a record they pass was not checked.
_FORMAT_ONLY = {"malformed", "schema"}
# The character checks read every string, those in lists too: with no text field they read
# the wrapped texts ({"data": ["a", "b"]}) as one record's list, which checks no record.
_CHARACTERS = {"invisible_unicode", "encoding"}
_SCALAR = r'(?:"(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)'
_KEY = r'"((?:[^"\\]|\\.)*)"'
_HEAD = re.compile(rf'\s*\{{\s*(?:{_KEY}\s*:\s*{_SCALAR}\s*,\s*)*{_KEY}\s*:\s*\[\s*\{{')
_TEXT = re.compile(rb"\S")
# The columnar formats (jq reads none of them; a row is the wrapper), each's polars reader.
_COLUMNAR = {"parquet": "read_parquet", "arrow": "read_ipc", "datasets": "load_from_disk"}
# Objects passed to run_preflight (the source format of each): as a polars DataFrame.
_OBJECTS = {"polars.DataFrame": "df", "pandas.DataFrame": "pl.from_pandas(df)",
            "pyarrow.Table": "pl.from_arrow(table)", "pyarrow.RecordBatch": "pl.from_arrow(batch)",
            "datasets.Dataset": "ds.to_polars()", "list": ""}


def one_object_note(fmt: str, files: list[Path], records: int, *, stdin: bool) -> list[str]:
    """A warning for a .json file that is one object, not an array (``{"data": [...]}``):
    read as JSON Lines, it is one record (on one line, as ``json.dump`` writes it, the gate
    would pass having checked none of the records inside) or every line malformed."""
    if fmt != "json" or stdin or len(files) != 1 or records > 1:
        return []
    path = files[0]
    head = _head(path, 1 << 12).lstrip("\ufeff \t\r\n")
    if not head.startswith("{") or (records == 1 and not one_line(path)):
        return []  # JSON Lines under a .json name, read with --limit 1
    if (found := layout(_parsed(path))) is not None:
        other = _one_record(found, path.name, " — ", "")
        return [f"{path.name} {ONE_OBJECT}, not an array of records: it lays out the "
                f"records as {found.name}{other}; turn them into records first (e.g. "
                f"{jq_command(found.jq, path.name)})"]
    return [f"{path.name} {ONE_OBJECT}, not an array of records: a .json "
            "file is read as a top-level array or as JSON Lines (one object per line); if "
            "its records are in a list inside it, extract them first (e.g. "
            f"{jq_extract(_wrapping_keys(path) or ('data',), path.name)})"]


def wrapped_records(report: Report, data: Path | None = None) -> str | None:
    """Why the gate fails on ``report``'s source when it is one JSON object holding a list
    of two or more objects (the records, wrapped), or one in which no rule read anything;
    else None. ``data`` is the file read (standard input's copy; default the report's
    path). A chat record (a messages field found) is one record, whatever other lists it
    holds; so is one record read with ``--limit 1`` from a longer JSON Lines file."""
    src = report.source
    if (src.records != 1 or src.files != 1 or src.format not in ("json", "jsonl")
            or report.rules_file.fields.get("messages")):
        return _wrapped_each(report)
    if _text_by_name(report):  # {"text": ..., "spans": [{...}, {...}]}: one record
        return None
    path = data or Path(src.path)
    if src.format == "json" and not any(ONE_OBJECT in w for w in src.warnings):
        return None
    if src.format == "jsonl" and not one_line(path):
        return None
    keys = _wrapping_keys(path)
    stdin = src.path == STDIN or is_spooled(path)
    name = "standard input" if stdin else path.name
    if keys is None and (found := layout(_parsed(path))) is not None:
        # {"text": [...], "label": [...]}, df.to_json(): read as one record, its labels
        # were token labels and its index a number field, and a bad label passed.
        command = jq_command(found.jq, None if stdin else str(path))
        how = f"by piping it through {command}" if stdin else command
        return (f"{name} is one JSON object that lays out its records as {found.name}, and "
                f"none of them was checked as a record"
                f"{_one_record(found, None if stdin else str(path), ' (', ')')}: turn them "
                f"into records first, e.g. {how}")
    hint = (f"e.g. by piping it through {jq_extract(keys or ('data',), None)}" if stdin
            else f"e.g. {jq_extract(keys or ('data',), str(path))}")
    if keys is None:
        # No list of objects found, yet no rule read a thing in it ({"data": ["a", "b"]},
        # a list of one object): one record with nothing checked is no pass either. (In
        # JSON Lines one record is a corpus of one, which a rules file may check only for
        # its shape.)
        read = {r.check for r in report.rules} - _FORMAT_ONLY
        if "text" not in report.rules_file.fields:
            read -= _CHARACTERS
        if src.format != "json" or read:
            return None
        return (f"{name} is one JSON object and nothing in it was checked (no text, label or "
                "number among its top-level members); if it holds the records, extract them "
                f"first, {hint} (with the key that holds them)")
    where = ".".join(keys)
    return (f"{name} is one JSON object whose records are in a list inside it ({where!r}; "
            f"none of them was checked): extract them first, {hint}")


def nothing_checked(report: Report, seen: set[str]) -> str | None:
    """Why the gate fails when, with no rules file, no rule read anything in the records:
    no text, messages, label, numbers, token ids or strings among their fields (records of
    ``{}``, of nulls, of booleans), so only their format was judged; else None. (A rules
    file that asks only for the format is the user's call.)"""
    checks = {r.check for r in report.rules}
    if (report.rules_file.preset != DEFAULT_PRESET or not report.source.records
            or not checks <= _FORMAT_ONLY):
        return None
    fields = ", ".join(sorted(seen)[:20]) or "none"
    more = f" and {len(seen) - 20:,} more" if len(seen) > 20 else ""
    return ("none of the records' fields was checked: no text, messages, label, numbers, "
            f"token ids or strings among them (fields seen: {fields}{more}), so only their "
            "format was; name the fields to check (--text-field, --label-field, --set "
            "fields.numeric=NAME) or give a rules file")


def _one_record(found: Layout, file: str | None, before: str, after: str) -> str:
    """The other reading of a list-per-field layout (one record of lists of one length) and
    how to check it as that, between ``before`` and ``after``; empty for other layouts."""
    if not found.maybe_one_record:
        return ""
    said = ONE_RECORD.format(command=jq_command("[.]", file, out="record.json"))
    return before + said + after


def _text_by_name(report: Report) -> bool:
    """Whether the record's text field was named (in the rules, or inferred by its name):
    then it is a record whose other lists are its own (spans, tool calls). A text taken as
    the longest string (a ``"version"`` beside the list) says nothing of the kind."""
    fields = report.rules_file.fields
    if "text" not in fields:
        return False
    why = report.rules_file.inferred.get("text")
    return why is None or "(by name" in why


def _wrapped_each(report: Report) -> str | None:
    """Why the gate fails when the records' only content is a list of objects — a wrapper
    per line (a paged API dump), per array element or per shard — and no field was found
    to check in them: none of the records inside was read. Else None."""
    fields = report.rules_file.fields
    key = report.rules_file.records_in  # as inference found it
    # Numbers beside the list (a page number, a count) are read, but not the records.
    if key is None or set(fields) - {"id", "numeric"} or not report.source.records:
        return None
    src = report.source
    if src.format in _COLUMNAR or src.format in _OBJECTS:
        hint = (f"pass the records inside instead, e.g. {_object_hint(key, src.format)}"
                if src.format in _OBJECTS else
                f"extract them first, e.g. {_columnar_hint(key, src)}")
        return (f"the records hold their own records in {key!r}, a list of objects (a "
                f"wrapper per row{' or file' if src.files > 1 else ''}), and none of those "
                f"was checked: {hint}; if they are not the records, name the fields to "
                "check (--text-field, --label-field or a rules file's fields:)")
    # an array of wrappers: the list in each element
    each = src.format == "json" and src.files == 1 and src.path != STDIN
    if src.path == STDIN:
        hint = f"by piping them through {jq_extract((key,), None)}"
    elif src.files == 1:
        hint = jq_extract((key,), src.path, each=each)
    else:
        hint = "for each file, " + jq_extract((key,), "FILE").replace("> records", ">> records")
    return (f"the records hold their own records in {key!r}, a list of objects (a wrapper "
            f"per {'element' if each else 'line or file'}), and none of those was checked: "
            f"extract them first, e.g. {hint}; if they are not the records, name the fields "
            "to check (--text-field, --label-field or a rules file's fields:)")


def _columnar_hint(key: str, src: SourceInfo) -> str:
    """The command that writes the records listed in column ``key`` of a Parquet, Arrow or
    ``datasets`` source as JSON Lines (jq reads only text). Python's string literals are
    written as JSON (double quotes), so the program sits in the shell's single quotes."""
    rows = (f".select(pl.col({json.dumps(key)}).explode().drop_nulls())"
            f".unnest({json.dumps(key)})")
    path = Path(src.path)
    if src.format == "datasets":
        program = (f"import datasets, polars as pl; datasets.load_from_disk("
                   f'{json.dumps(str(path))}).to_polars(){rows}.write_ndjson("records.jsonl")')
        return f"python -c {shlex.quote(program)}"
    one = src.files == 1 and path.is_file()
    names = [f["name"] for f in src.fingerprint.get("files", [])]
    read = _COLUMNAR[src.format]
    if src.format == "arrow" and _magic(path if one else path / names[0]) != b"ARROW1":
        read = "read_ipc_stream"  # a stream (as datasets writes), not an IPC file
    if one:
        program = (f"import polars as pl; pl.{read}({json.dumps(str(path))}){rows}"
                   '.write_ndjson("records.jsonl")')
        return f"python -c {shlex.quote(program)}"
    program = (f"import sys, polars as pl; sys.stdout.write(pl.{read}(sys.argv[1]){rows}"
               ".write_ndjson())")
    each = f"{shlex.quote(str(path))}/*{Path(names[0]).suffix}"
    return f'for f in {each}; do python -c {shlex.quote(program)} "$f"; done > records.jsonl'


def _object_hint(key: str, kind: str) -> str:
    """The Python expression for the records listed in ``key`` of an object passed to
    ``run_preflight`` (``kind``: its source format)."""
    if kind == "list":
        return f"[r for x in records for r in x[{json.dumps(key)}]]"
    rows = (f".select(pl.col({json.dumps(key)}).explode().drop_nulls())"
            f".unnest({json.dumps(key)})")
    return _OBJECTS[kind] + rows


def _magic(path: Path) -> bytes:
    """The first six bytes of ``path`` (``ARROW1`` for an Arrow IPC file)."""
    try:
        with path.open("rb") as f:
            return f.read(6)
    except OSError:
        return b""


def one_line(path: Path) -> bool:
    """Whether ``path`` (decompressed) holds text on one line only (blank lines aside)."""
    with _opened(path) as f:
        seen = ended = False
        while chunk := f.read(1 << 20):
            at = 0
            if not seen:
                if (m := _TEXT.search(chunk)) is None:
                    continue
                seen, at = True, m.start()
            if not ended:
                if (end := chunk.find(b"\n", at)) < 0:
                    continue
                ended, at = True, end
            if _TEXT.search(chunk, at):
                return False
    return True


@contextlib.contextmanager
def _opened(path: Path) -> BinaryIO:
    stream, raw = open_stream(path)
    try:
        yield stream
    finally:
        stream.close()
        raw.close()


def _head(path: Path, size: int) -> str:
    with _opened(path) as f:
        return f.read(size).decode("utf-8", "replace").lstrip("\ufeff")


def _wrapping_keys(path: Path) -> tuple[str, ...] | None:
    """The keys to the first list of two or more objects in the file's object: a member
    of it, or a member of an object member (``{"splits": {"train": [...]}}``)."""
    head = _head(path, 1 << 16)
    if (m := _HEAD.match(head)) and _lists_objects(head[m.end() - 1:]):
        return (json.loads(f'"{m.group(2)}"'),)
    whole = _parsed(path)
    if not isinstance(whole, dict):
        return None
    if (key := _records_member(whole)) is not None:
        return (key,)
    return next(((str(k), inner) for k, v in whole.items() if isinstance(v, dict)
                 and (inner := _records_member(v)) is not None), None)


def _parsed(path: Path) -> object:
    """The file's JSON value, parsed whole; None past ``_PARSE_MAX`` or when not JSON."""
    with _opened(path) as f:
        text = f.read(_PARSE_MAX + 1)
    if len(text) > _PARSE_MAX:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _records_member(obj: dict) -> str | None:
    """The first member of ``obj`` that is a list of two or more objects."""
    return next((str(k) for k, v in obj.items() if isinstance(v, list) and len(v) >= 2
                 and all(isinstance(x, dict) for x in v[:2])), None)


def _lists_objects(rest: str) -> bool:
    """Whether the list starting at ``rest`` (its first object's ``{``) holds a second
    object: one object is one record's list (tool calls, spans), not the records."""
    decoder = json.JSONDecoder()
    try:
        _, end = decoder.raw_decode(rest)
    except ValueError:
        return False  # the first object runs past the head: decided by the whole parse
    return bool(re.match(r"\s*,\s*\{", rest[end:]))
