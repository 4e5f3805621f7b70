"""JSON array reader: a top-level array of records, streamed element by element.

Element boundaries are found structurally (brackets and strings), not by parsing, so a bad
element (``{oops}``, a nested array, a number) is one ``malformed`` unit and every later
element is still read. A file cut off inside an element or before the closing ``]`` is a
``truncated`` unit; data after the closing ``]`` (two arrays concatenated) is a
``trailing_data`` unit per value. ``check`` and ``fix`` read arrays with this one scanner, so
they agree on every row number; ``fix`` keeps each element's text as written (whitespace
between tokens removed, so it fits on one JSON Lines line; values untouched).

Memory is bounded by the largest element: the buffer holds the unread tail only.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflight.batch import Batch, Malformed, records_to_batch, replace_lone_surrogates
from preflight.source import array_scan
from preflight.source.jsonl import MAX_DEPTH, TOO_DEEP, parse_block, parse_line, read_jsonl
from preflight.source.tracked import Prefixed, Tracked, note_file, open_stream

ARRAY_BATCH = 20_000
_READ = 1 << 20
_STRUCT = re.compile(r'["\[\]{}]')
# The rest of a JSON string after its opening quote. Possessive and unrolled: a 30 MB string
# is matched in one pass with no backtracking state (an alternation in a group would keep
# about 100 bytes of it per character).
STRING_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+"'
_STRING_TAIL = re.compile(STRING_BODY, re.S)
# Where a scalar (or a stray byte) ends: a bracket or brace starts or ends another value.
_SCALAR_END = re.compile(r"[,\]\[{}\s]")
_SPACE = re.compile(r"[ \t\r\n\ufeff]*")
_COMPACT = re.compile(f'("{STRING_BODY})|[ \\t\\r\\n]+', re.S)
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")
# A fast stretch this long after the scanner's (elements) sends the scanner back to stopping
# at its first clean comma; a shorter one makes it read 8 times longer next time.
_FAST_STRETCH = 1000


@dataclass
class Element:
    """One unit of the array: a record, or a malformed element with its text as written."""

    row: int
    raw: str  # records: compact text; malformed: the text as written ("" when there is none)
    record: dict[str, Any] | None = None
    malformed: Malformed | None = None

    def raw_bytes(self) -> bytes:
        """The text as it stands in the file (invalid UTF-8 bytes restored)."""
        return self.raw.encode("utf-8", "surrogateescape")


class _NeedMore(Exception):
    """The element runs past the buffer."""


def is_array(path: Path) -> bool:
    """True when a ``.json`` file holds a top-level array (else it is JSON Lines)."""
    stream, _ = open_stream(path)
    with stream:
        head = stream.read(4096)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").startswith(b"[")


@dataclass
class Handback:
    """Where the scanner stops for the fast path to go on: after a comma that follows a
    value, once it has read ``units`` units; ``rest``: the bytes it read and did not use
    (None when it read to the end)."""

    units: int
    rest: bytes | None = None
    index: int = 0


def elements(stream: Any, *, index: int = 0, after: str = "",
             handback: Handback | None = None) -> Iterator[Element]:
    """Every element of the JSON array in ``stream`` (binary), in order; or, with
    ``after`` ("[" or ","), of the rest of an array whose opening ``[`` or last comma was
    read already, ``index`` elements on (up to ``handback``'s stop, when given)."""
    first = index
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    buf, pos, eof = "", 0, False
    read_size = _READ

    def fill() -> None:
        nonlocal buf, pos, eof, read_size
        chunk = stream.read(read_size)
        eof = not chunk
        buf = buf[pos:] + decoder.decode(chunk, final=eof)
        pos = 0
        read_size = max(_READ, len(buf))  # an element larger than the buffer: grow, not rescan

    def skip_space() -> bool:
        """Skip whitespace; False when the input is exhausted."""
        nonlocal pos
        while True:
            pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
            if pos < len(buf):
                return True
            if eof:
                return False
            fill()

    if not after:
        if not skip_space() or buf[pos] != "[":
            raise ValueError("expected a JSON array")
        pos += 1
        after = "["
    # ``after``: what came last inside the array — "[" (its opening), "," or a value. A
    # comma where a value belongs, a value where a comma belongs, or a comma before the
    # closing ] is invalid JSON: a malformed unit (rows stay countable), never silence.
    closed, cut = False, False
    while True:
        if not skip_space():
            break
        ch = buf[pos]
        if not closed and ch in ",]":
            problem = None
            if ch == "," and after != "value":
                problem = ("invalid_json", "an empty element (a comma where a value belongs)")
            elif ch == "]" and after == ",":
                problem = ("invalid_json", "a comma before the closing ]")
            if problem is not None:
                yield Element(index, ch, malformed=Malformed(index, *problem))
                index += 1
            if ch == "]":
                closed = True
            clean, after = ch == "," and after == "value", ","
            pos += 1
            if clean and handback is not None and index - first >= handback.units:
                handback.rest = (buf[pos:].encode("utf-8", "surrogateescape")
                                 + decoder.getstate()[0])
                handback.index = index
                return
            continue
        try:
            end, depth, problem = _value_end(buf, pos, eof)
        except _NeedMore:
            fill()
            continue
        text = buf[pos:end]
        pos = end
        if closed:  # whatever follows the closing ], as written
            problem = ("trailing_data", "data after the closing ] of the array")
        elif after == "value" and problem is None:
            problem = ("invalid_json", "no comma before this element")
        after = "value"
        cut = problem is not None and problem[0] == "truncated"
        yield _element(index, text, depth, problem)
        index += 1
    if not closed and not cut:
        yield Element(index, "", malformed=Malformed(
            index, "truncated", "the file ends before the array's closing ] (truncated?)"))


def _value_end(buf: str, pos: int, eof: bool) -> tuple[int, int, tuple[str, str] | None]:
    """Where the value starting at ``pos`` ends, its nesting depth and, when the structure
    itself is broken, (code, detail). Raises _NeedMore when the buffer ends first."""
    first = buf[pos]
    if first not in "[{":
        if first == '"':
            m = _STRING_TAIL.match(buf, pos + 1)
            if m:
                return m.end(), 0, None
        else:
            m = _SCALAR_END.search(buf, pos + 1)
            if m:
                return m.start(), 0, None
        if not eof:
            raise _NeedMore
        return len(buf), 0, ("truncated", "the file ends inside this element (truncated?)")
    stack, depth, p = [first], 1, pos + 1
    while True:
        m = _STRUCT.search(buf, p)
        if m is None:
            break
        ch, p = m.group(), m.end()
        if ch == '"':
            tail = _STRING_TAIL.match(buf, p)
            if tail is None:
                break
            p = tail.end()
        elif ch in "[{":
            stack.append(ch)
            depth = max(depth, len(stack))
        elif (ch == "}") != (stack[-1] == "{"):
            # A closer of the other kind: this element is broken and ends before it.
            return m.start(), depth, ("invalid_json", f"'{ch}' does not close '{stack[-1]}'")
        else:
            stack.pop()
            if not stack:
                return p, depth, None
    if not eof:
        raise _NeedMore
    return len(buf), depth, ("truncated", "the file ends inside this element (truncated?)")


def _element(index: int, text: str, depth: int, problem: tuple[str, str] | None) -> Element:
    if problem is None and depth > MAX_DEPTH:  # the same limit and finding as JSON Lines
        problem = TOO_DEEP
    if problem is None and _ESCAPED_BYTE.search(text):
        problem = ("invalid_utf8", "element holds invalid UTF-8")
    if problem is None:
        compact = _COMPACT.sub(lambda m: m.group(1) or "", text)
        record, problem = parse_line(compact.encode())
        if problem is None:
            return Element(index, compact, record=record)
    return Element(index, text, malformed=Malformed(index, *problem))


def read_json(path: Path, file_index: int, label: str | None, state: dict[str, Any]
              ) -> Iterator[Batch]:
    """Yield batches of a ``.json`` file: a top-level array of records (streamed), or JSON
    Lines under a .json name."""
    if not is_array(path):
        yield from read_jsonl(path, file_index, label, state)
        return
    stream, raw = open_stream(path)
    with stream:
        yield from _read_array(stream, raw, file_index, label)
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def _read_array(stream: Any, raw: Tracked, file_index: int, label: str | None
                ) -> Iterator[Batch]:
    """The clean stretch at the start fast (``array_scan``), the rest by the scanner."""
    head = stream.read(_READ)  # ``is_array`` found the "[" in its first 4 KB
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    if not start.startswith(b"["):  # the scanner says what is wrong
        yield from _batches(elements(Prefixed(head, stream)), raw, file_index,
                            label, done=0)
        return
    rest, index, after, done, units = Prefixed(start[1:], stream), 0, "[", 0, 1
    # Fields are inferred from the first batch: it is the first ARRAY_BATCH elements, fast
    # when they are all clean, else the scanner's.
    size, first = array_scan.CHUNK_BYTES, ARRAY_BATCH
    while True:
        tail: tuple[bytes, int, int, bool] = (b"", index, done, False)
        for item in array_scan.fast_batches(rest, raw, parse_block, index=index, done=done,
                                            file_index=file_index, label=label, size=size,
                                            first=first):
            if isinstance(item, Batch):
                yield item
            else:
                tail = item
        unread, fast_to, done, closed = tail
        if closed:
            return
        if fast_to > index:
            after = ","
        # Odd elements close together: the scanner keeps going longer each time.
        units = 1 if fast_to - index >= _FAST_STRETCH else min(units * 8, 1 << 40)
        handback = Handback(ARRAY_BATCH if first and fast_to == index else units)
        first = 0
        rest = Prefixed(unread, rest)
        done = yield from _batches(
            elements(rest, index=fast_to, after=after, handback=handback), raw, file_index,
            label, done=done)
        if handback.rest is None:
            return
        rest = Prefixed(handback.rest, rest)
        index, after, size = handback.index, ",", min(_READ, array_scan.CHUNK_BYTES)


def _batches(units: Iterator[Element], raw: Tracked, file_index: int, label: str | None, *,
             done: int) -> Generator[Batch, None, int]:
    """Batches of ``ARRAY_BATCH`` units; returns raw.pos when the last one was made
    (``done``: when the one before them was)."""
    records: list[dict[str, Any]] = []
    rows: list[int] = []
    malformed: list[Malformed] = []
    surrogates: dict[int, int] = {}

    def flush() -> Batch:
        nonlocal done
        batch = records_to_batch(records, rows, file=label, file_index=file_index)
        batch.malformed, batch.progress = list(malformed), raw.pos - done
        batch.lone_surrogates = dict(surrogates)
        done = raw.pos
        records.clear(), rows.clear(), malformed.clear(), surrogates.clear()
        return batch

    for unit in units:
        if unit.malformed is not None:
            malformed.append(unit.malformed)
        else:
            assert unit.record is not None
            # Only a \u escape can leave a lone surrogate (invalid bytes are malformed).
            record, n = (replace_lone_surrogates(unit.record)
                         if _SURROGATE_ESCAPE.search(unit.raw) else (unit.record, 0))
            if n:
                surrogates[len(records)] = n
            records.append(record)
            rows.append(unit.row)
        if len(records) + len(malformed) >= ARRAY_BATCH:
            yield flush()
    if records or malformed:
        yield flush()
    return done
