"""Arrow's reading of a block of JSON lines, and the guards that refuse a block.

Arrow's multithreaded JSON reader is the fast path of the JSON Lines reader. It reads some
lines differently from the line-by-line path (``json_line.parse_line``), or crashes on them,
so before or after reading a block it is checked, and a block it cannot be trusted with
raises ``Fallback`` (the caller then parses that block line by line):

- a line that is not an object (``null``, an array), or two objects on one line;
- a line whose brackets may nest ``_ARROW_DEPTH`` deep (Arrow's reader recurses per level and
  segfaults some thousands down), or a schema deeper than ``MAX_DEPTH`` (``too_deep``);
- a float column where the block may hold ``Inf``, ``-Inf`` or ``-NaN`` (which Arrow takes
  and Python's json refuses), or an integer past what a float holds exactly;
- strings Arrow guessed as timestamps are read again as strings.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from preflight.record_batches import child_types, type_depth
from preflight.source.json_line import MAX_DEPTH

# Lines whose brackets may nest this deep are parsed one by one, never by Arrow, whose
# reader crashes some thousands of levels down.
_ARROW_DEPTH = 1000
_NESTING = np.zeros(256, dtype=np.int8)
_NESTING[[ord("{"), ord("[")]] = 1
_NESTING[[ord("}"), ord("]")]] = -1
# Literals Arrow's reader takes and Python's json (the line-by-line path) refuses; a block
# that may hold one as a value (after ":", "[" or ",", before ",", "}" or "]") goes line by
# line, so it gets one verdict. (Text such as ", Information" does not match.)
_NOT_PYTHONS = re.compile(rb"[:\[,][ \t\r]*(?:-?Inf|-NaN)[ \t\r]*[,}\]]")
_VALUE_END = re.compile(rb"[ \t\r]*[,}\]]")
_BLANKS = frozenset(b" \t\r")
_VALUE_AFTER = frozenset(b":[,")
_LOOKED_AT = 256  # more mentions than this in a block: one regex pass instead
# An integer literal of 16 digits or more as a value: it may be past what a float holds
# exactly (2**53).
_LONG_INTEGER = re.compile(rb"[:\[,][ \t\r]*-?[0-9]{16,}[ \t\r]*[,}\]]")


class Fallback(Exception):
    """The fast reader's result cannot be trusted for this block."""


def line_ends(block: bytes) -> np.ndarray:
    """The offsets of the line ends (``\n``) of ``block``."""
    return np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))


def read_lines(block: bytes, row0: int, ends: np.ndarray | None = None
               ) -> tuple[np.ndarray, pa.Table]:
    """Arrow's reading of a block of whole lines (``ends``: its line ends, when known): the
    rows of its non-blank lines, numbered from ``row0``, and their table; ``Fallback`` when
    the block must be read line by line."""
    ends = line_ends(block) if ends is None else ends
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    # Only objects go to Arrow: a line such as `null` is not a record (and pyarrow 26 can
    # crash on a block that starts with one). Lines that start with "{" (nearly always all
    # of them) are non-blank objects as they stand; otherwise each line is looked at.
    if np.all(np.frombuffer(block, dtype=np.uint8)[starts] == ord("{")):
        nonblank = np.arange(len(ends), dtype=np.int64)
    else:
        stripped = [block[a:b].strip() for a, b in zip(starts.tolist(), ends.tolist(),
                                                        strict=True)]
        if any(line and not line.startswith(b"{") for line in stripped):
            raise Fallback
        nonblank = np.asarray([k for k, line in enumerate(stripped) if line], dtype=np.int64)
    longest = int(lengths.max()) if len(lengths) else 0
    if longest >= _ARROW_DEPTH and _may_nest_deeper(block, starts, lengths, _ARROW_DEPTH):
        raise Fallback
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, longest + 2))
    table = pj.read_json(io.BytesIO(block), read_options=options)
    if _schema_depth(table.schema) > MAX_DEPTH:  # the lines that deep are findings
        raise Fallback
    if _holds_floats(table.schema) and (
            _may_hold_not_pythons(block)
            or (_any_beyond_exact(table) and _LONG_INTEGER.search(block) is not None)):
        raise Fallback
    fixed = _without_timestamps(table.schema)
    if fixed is not None:  # Arrow guessed timestamps from strings: read them as strings
        table = pj.read_json(io.BytesIO(block), read_options=options,
                             parse_options=pj.ParseOptions(explicit_schema=fixed))
    # pyarrow 26 builds an invalid array for a list of only nulls (offsets past the
    # values): such a block goes line by line (ArrowInvalid).
    table.validate()
    if table.num_rows != len(nonblank):  # e.g. two objects on one line
        raise Fallback
    return nonblank + row0, table


def _may_hold_not_pythons(block: bytes) -> bool:
    """Whether ``block`` may hold ``Inf``, ``-Inf`` or ``-NaN`` as a value
    (``_NOT_PYTHONS``). Each mention is looked at where it stands: English text mentions
    "Inf" in most blocks, and a regex over the whole block cost a third of Arrow's parse of
    it, under the GIL. (Arrow reads those literals as floats: only blocks with a float
    column are looked at.)"""
    looked = 0
    for literal in (b"Inf", b"-NaN"):
        at = block.find(literal)
        while at >= 0:
            looked += 1
            if looked > _LOOKED_AT:
                return _NOT_PYTHONS.search(block) is not None
            end = at + len(literal)
            if _VALUE_END.match(block, end):
                k = at - 1
                if literal == b"Inf" and k >= 0 and block[k] == ord("-"):
                    k -= 1
                while k >= 0 and block[k] in _BLANKS:
                    k -= 1
                if k >= 0 and block[k] in _VALUE_AFTER:
                    return True
            at = block.find(literal, end)
    return False


def _any_beyond_exact(table: pa.Table) -> bool:
    """Whether a float of ``table`` is an integer's size past what a float holds exactly
    (2**53 or more). Arrow reads an integer too large for int64 as a float, rounded, and
    turns its whole column in the block into floats, as it does with any integer in a column
    that also holds a fraction (``9007199254740993`` beside ``0.5``); the line-by-line path
    keeps such an integer exact, so a block with such a float and an integer literal that
    long (``_LONG_INTEGER``) goes there. (A float written so large, 1e300, is a float on
    both paths: its block stays on Arrow's.)"""
    stack: list[pa.Array] = [chunk for column in table.columns for chunk in column.chunks]
    while stack:
        array = stack.pop()
        t = array.type
        if pa.types.is_floating(t):
            # Compared here: a Python scalar in an Arrow call imports pandas (arrow_numbers).
            largest = pc.max(pc.abs(array)).as_py()  # NaN skipped, as >= skipped it
            if largest is not None and largest >= 2**53:
                return True
        elif pa.types.is_struct(t):
            stack.extend(array.field(i) for i in range(t.num_fields))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            stack.append(array.flatten())
    return False


def _holds_floats(schema: pa.Schema) -> bool:
    """Whether a float type appears anywhere in ``schema``, inside lists and structs too."""
    stack = [f.type for f in schema]
    while stack:
        t = stack.pop()
        if pa.types.is_floating(t):
            return True
        stack.extend(child_types(t))
    return False


def _may_nest_deeper(block: bytes, starts: np.ndarray, lengths: np.ndarray, limit: int
                     ) -> bool:
    """Whether a line of ``block`` (at ``starts``, ``lengths`` bytes long) may be nested
    ``limit`` deep. Brackets inside strings count too, so this errs on the safe side. Cheap
    first: a line needs ``limit`` opening brackets to get that deep (so ``limit`` bytes);
    only such lines get their depth measured."""
    for k in np.flatnonzero(lengths >= limit).tolist():
        line = block[starts[k]:starts[k] + lengths[k]]
        if line.count(b"{") + line.count(b"[") < limit:
            continue
        nesting = _NESTING[np.frombuffer(line, dtype=np.uint8)]
        if np.cumsum(nesting, dtype=np.int32).max() >= limit:
            return True
    return False


def _schema_depth(schema: pa.Schema) -> int:
    """How deep the records of a table nest (a flat record is 1), from its types alone."""
    return 1 + max((type_depth(f.type) for f in schema), default=0)


def _without_timestamps(schema: pa.Schema) -> pa.Schema | None:
    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
            return pa.string()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(fix(f.type)) for f in t])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(t.value_field.with_type(fix(t.value_type)))
        return t

    fixed = pa.schema([f.with_type(fix(f.type)) for f in schema])
    return None if fixed.equals(schema) else fixed
