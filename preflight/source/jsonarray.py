"""JSON array reader: a top-level array of records, streamed element by element.

Element boundaries are found structurally (brackets and strings), not by parsing, so a bad
element (``{oops}``, a nested array, a number) is one ``malformed`` unit and every later
element is still read. A file cut off inside an element or before the closing ``]`` is a
``truncated`` unit; data after the closing ``]`` (two arrays concatenated) is a
``trailing_data`` unit per value. An element whose quote or bracket never closes would run
to the end of the array (or, its quotes out of step, swallow the elements after it): it is
cut where a later line starts an element (``_resync``), and the scanner goes on from there.
``check`` and ``fix`` read arrays with this one scanner, so they agree on every row number;
``fix`` keeps each element's text as written (whitespace between tokens removed, so it fits
on one JSON Lines line; values untouched).

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
_LINE_STRING_TAIL = re.compile(r'[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+"')  # no line break in it
# Where a scalar (or a stray byte) ends: a bracket or brace starts or ends another value.
_SCALAR_END = re.compile(r"[,\]\[{}\s]")
_SPACE = re.compile(r"[ \t\r\n\ufeff]*")
_COMPACT = re.compile(f'("{STRING_BODY})|[ \\t\\r\\n]+', re.S)
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")
# A fast stretch this long after the scanner's (elements) sends the scanner back to stopping
# at its first clean comma; a shorter one makes it read 8 times longer next time.
_FAST_STRETCH = 1000
# A line that may start an element: a line break, blanks, an optional comma, blanks, "{";
# or, where elements share lines (``}, {``), the "}" and comma that close the one before.
_CLOSERS = re.compile(r"[ \t\r}\]]*")
_ELEMENT_LINE = re.compile(r"\n([ \t\r]*,?[ \t\r]*)(?:\}[ \t\r]*,[ \t\r]*)?\{")
# For a runaway element that shares its line with the one before (its depth unknown), the
# lines that may start an element are looked for this far into it; the least indented of
# them are the array's own (nested objects sit deeper).
_RESYNC_WINDOW = 64 << 10
# An element whose bracket never closes is known only at the end of the array, read to there:
# at most this many are cut per file (the next holds the rest, as a file cut off there).
# One whose quotes went out of step is cut as soon as that shows, at no such cost.
MAX_RESYNCS = 16
_STRAY_CLOSER = ("invalid_json", "a ] that closes nothing: elements follow it")
_TRUNCATED = ("truncated", "the file ends inside this element (truncated?)")
_RUNAWAY = ("invalid_json", "a quote or bracket in this element never closes: it is cut where "
            "the next line starts an element")


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
    resyncs: int = 0  # runaway elements cut so far in this file (in: before; out: after)
    column: int | None = None  # just past the comma, when it was first on its line


def elements(stream: Any, *, index: int = 0, after: str = "",
             handback: Handback | None = None, column: int | None = None
             ) -> Iterator[Element]:
    """Every element of the JSON array in ``stream`` (binary), in order; or, with
    ``after`` ("[" or ","), of the rest of an array whose opening ``[`` or last comma was
    read already, ``index`` elements on (up to ``handback``'s stop, when given;
    ``column``: the column just past that "[" or comma, when its line held only blanks
    before it)."""
    first = index
    resyncs = handback.resyncs if handback is not None else 0
    # The column the next value starts at, when it is the first on its line or the first
    # after an opening "[" or a comma that was (only blanks before it since a line break:
    # comma-first layout): a runaway element is cut at the next line that starts an
    # element no deeper than it.
    indent: int | None = column if after else None
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
        """Skip whitespace, noting the indentation when it ends a line break (``indent``,
        None after anything else: the value that follows is not first on its line); False
        when the input is exhausted."""
        nonlocal pos, indent
        while True:
            start = pos
            pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
            line = buf.rfind("\n", start, pos)
            if line >= 0:
                indent = pos - line - 1
            elif indent is not None:  # the same run of blanks, across a fill
                indent += pos - start
            if pos < len(buf):
                return True
            if eof:
                return False
            fill()

    if not after:
        indent = 0  # the start of the file
        if not skip_space() or buf[pos] != "[":
            raise ValueError("expected a JSON array")
        pos += 1
        after = "["
        indent = None if indent is None else indent + 1
    # ``after``: what came last inside the array — "[" (its opening), "," or a value. A
    # comma where a value belongs, a value where a comma belongs, or a comma before the
    # closing ] is invalid JSON: a malformed unit (rows stay countable), never silence.
    closed, cut = False, False
    while True:
        if not skip_space():
            break
        ch = buf[pos]
        if not closed and ch == "]":  # the array's end, unless elements follow it
            ahead = _SPACE.match(buf, pos + 1).end()  # type: ignore[union-attr]
            if ahead == len(buf) and not eof:
                fill()
                continue
            if buf[ahead:ahead + 1] == ",":
                yield Element(index, ch, malformed=Malformed(index, *_STRAY_CLOSER))
                index, pos, after, indent = index + 1, pos + 1, "value", None
                continue
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
            # A comma first on its line is counted as a blank: ", {" starts an element.
            pos, indent = pos + 1, (indent + 1 if ch == "," and indent is not None else None)
            if clean and handback is not None and index - first >= handback.units:
                handback.rest = (buf[pos:].encode("utf-8", "surrogateescape")
                                 + decoder.getstate()[0])
                handback.index, handback.resyncs, handback.column = index, resyncs, indent
                return
            continue
        try:
            end, depth, problem, runaway = _value_end(buf, pos, eof, indent)
        except _NeedMore:
            fill()
            continue
        text = buf[pos:end]
        if closed:  # whatever follows the closing ], as written
            problem = ("trailing_data", "data after the closing ] of the array")
        elif after == "value" and problem is None:
            problem = ("invalid_json", "no comma before this element")
        at = None
        if problem is _RUNAWAY:  # cut already, where the next element starts
            element = Element(index, text, malformed=Malformed(index, *_RUNAWAY))
            at = end
        else:
            element = _element(index, text, depth, problem)
            if runaway and not closed and resyncs < MAX_RESYNCS:
                at = _resync(buf, pos, end, indent)
            if at is not None:  # the element ends where the next one starts: no comma
                resyncs += 1
                element = Element(index, buf[pos:at], malformed=Malformed(index, *_RUNAWAY))
        if at is not None:  # the next element starts a line: its indentation is known
            pos, after, indent = at, ",", at - buf.rfind("\n", 0, at) - 1
        else:
            pos, after, indent = end, "value", _column_past_closers(buf, pos, end)
        if handback is not None:
            handback.resyncs = resyncs
        cut = element.malformed is not None and element.malformed.code == "truncated"
        yield element
        index += 1
    if not closed and not cut:
        yield Element(index, "", malformed=Malformed(
            index, "truncated", "the file ends before the array's closing ] (truncated?)"))


def _column_past_closers(buf: str, start: int, end: int) -> int | None:
    """The column at ``end`` when the value ``buf[start:end]`` ends a line of closers only
    (``}`` of pretty-printed JSON, then ``, {`` on the same line: the next element's column
    is known), else None."""
    line = buf.rfind("\n", start, end)
    return end - line - 1 if line >= 0 and _CLOSERS.fullmatch(buf, line + 1, end) else None


def _value_end(buf: str, pos: int, eof: bool, indent: int | None
               ) -> tuple[int, int, tuple[str, str] | None, bool]:
    """Where the value starting at ``pos`` ends, its nesting depth, when the structure
    itself is broken (code, detail), and whether it ran away (past where its own opener
    could close: the end of the file, or a closer of the array around it). Raises
    _NeedMore when the buffer ends first."""
    first = buf[pos]
    if first not in "[{":
        if first == '"':
            m = _STRING_TAIL.match(buf, pos + 1)
            if m:
                if _out_of_step(buf, pos, m.end()):
                    return _cut(buf, pos, eof, indent)
                return m.end(), 0, None, False
        else:
            m = _SCALAR_END.search(buf, pos + 1)
            if m:
                return m.start(), 0, None, False
        if not eof:
            raise _NeedMore
        return len(buf), 0, _TRUNCATED, True
    stack, depth, p = [first], 1, pos + 1
    # How many of each opener the stack holds: a closer of the other kind asks whether it
    # matches one further out, in constant time (a scan of a deep stack per closer was
    # quadratic: 300 KB of "[" and "}," took 90 s).
    open_count = {"{": 0, "[": 0}
    open_count[first] += 1
    problem = None
    while True:
        m = _STRUCT.search(buf, p)
        if m is None:
            break
        ch, p = m.group(), m.end()
        if ch == '"':
            tail = _LINE_STRING_TAIL.match(buf, p)  # nearly every string: within its line
            if tail is None:
                tail = _STRING_TAIL.match(buf, p)
                if tail is None:
                    break
                if _out_of_step(buf, p - 1, tail.end()):
                    return _cut(buf, pos, eof, indent)
            p = tail.end()
        elif ch in "[{":
            stack.append(ch)
            open_count[ch] += 1
            depth = max(depth, len(stack))
        elif (ch == "}") != (stack[-1] == "{"):
            # A closer of the other kind: it closes the opener it matches further out (the
            # ones inside it never closed), or, matching none, belongs to what is around
            # this element, which ends before it.
            opener = "{" if ch == "}" else "["
            problem = problem or ("invalid_json", f"'{ch}' does not close '{stack[-1]}'")
            if not open_count[opener]:
                # Followed by a comma, a brace or a key (``"o": 1]`` then the next line's
                # key), it is a stray inside this element (the element goes on); else the
                # array's end, past this element's own.
                ahead = _SPACE.match(buf, p).end()  # type: ignore[union-attr]
                if ahead == len(buf) and not eof:
                    raise _NeedMore
                if buf[ahead:ahead + 1] in (",", "}", '"'):
                    continue
                return m.start(), depth, problem, True
            while stack[-1] != opener:  # each opener is popped once: linear in all
                open_count[stack.pop()] -= 1
            open_count[stack.pop()] -= 1
            if not stack:
                return p, depth, problem, False
        else:
            open_count[stack.pop()] -= 1
            if not stack:
                return p, depth, problem, False
    if not eof:
        raise _NeedMore
    return len(buf), depth, _TRUNCATED, True


def _out_of_step(buf: str, start: int, end: int) -> bool:
    """Whether the string ``buf[start:end]`` is the gap between two elements: a quote that
    never closed has put the quotes out of step, and this "string" ends at the quote that
    opens the first key of a line that starts an element (``{``, then blanks). A string
    with line breaks that ends elsewhere (``"if (x)\n{}\n"``, written with raw line breaks)
    is a well-delimited bad element: one unit, not cut at its ``{`` line."""
    k = end - 1  # its closing quote
    while k > start and buf[k - 1] in " \t\r\n":
        k -= 1
    if k <= start or buf[k - 1] != "{":
        return False
    line = buf.rfind("\n", start, k)
    return line >= 0 and _ELEMENT_LINE.fullmatch(buf, line, k) is not None


def _cut(buf: str, pos: int, eof: bool, indent: int | None
         ) -> tuple[int, int, tuple[str, str] | None, bool]:
    """``_value_end``'s answer for the element at ``pos`` (starting a line indented
    ``indent``, when known) once its quotes are out of step (its own quote that never
    closed, or a later element's inside a bracket of its that never closed): it ends where
    the next element starts (``_resync``). Raises _NeedMore until the buffer holds that
    start (known indentation) or ``_RESYNC_WINDOW`` characters past ``pos``."""
    if indent is None and len(buf) < pos + _RESYNC_WINDOW and not eof:
        raise _NeedMore
    at = _resync(buf, pos, len(buf), indent)
    if at is not None:
        return at, 0, _RUNAWAY, False
    if not eof:
        raise _NeedMore
    return len(buf), 0, _TRUNCATED, True  # no element after it: the file ends inside it


def _resync(buf: str, since: int, stop: int, indent: int | None) -> int | None:
    """Where the next element starts in a runaway element's text (``since`` to ``stop``):
    the first line that begins with ``{`` (after blanks and an optional comma) indented no
    deeper than the element's own line (``indent``); when that is not known (the element
    shares its line with what came before), the least indented such line within
    ``_RESYNC_WINDOW`` characters (the array's own elements, not objects nested in one).
    None when there is none (a file cut off in its last element)."""
    if indent is not None:
        return next((m.end() - 1 for m in _ELEMENT_LINE.finditer(buf, since, stop)
                     if len(m.group(1)) <= indent), None)
    window = min(stop, since + _RESYNC_WINDOW)
    starts = [(len(m.group(1)), m.end() - 1) for m in _ELEMENT_LINE.finditer(buf, since, window)]
    if not starts:
        m = _ELEMENT_LINE.search(buf, window, stop)
        return m.end() - 1 if m is not None else None
    least = min(indent for indent, _ in starts)
    return next(at for indent, at in starts if indent == least)


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
    resyncs = 0
    lead = head[: len(head) - len(start)].decode("utf-8", "surrogateescape")
    column = len(lead) - lead.rfind("\n")  # just past the "[" (the scanner's count)
    # Fields are inferred from the first batch: it is the first ARRAY_BATCH elements, fast
    # when they are all clean, else the scanner's.
    size, first = array_scan.CHUNK_BYTES, ARRAY_BATCH
    while True:
        tail: tuple[bytes, int, int, bool, int | None] = (b"", index, done, False, column)
        for item in array_scan.fast_batches(rest, raw, parse_block, index=index, done=done,
                                            file_index=file_index, label=label, size=size,
                                            first=first, column=column):
            if isinstance(item, Batch):
                yield item
            else:
                tail = item
        unread, fast_to, done, closed, column = tail
        if closed:
            return
        if fast_to > index:
            after = ","
        # Odd elements close together: the scanner keeps going longer each time.
        units = 1 if fast_to - index >= _FAST_STRETCH else min(units * 8, 1 << 40)
        handback = Handback(ARRAY_BATCH if first and fast_to == index else units,
                            resyncs=resyncs)
        first = 0
        rest = Prefixed(unread, rest)
        done = yield from _batches(
            elements(rest, index=fast_to, after=after, handback=handback, column=column),
            raw, file_index,
            label, done=done)
        resyncs, column = handback.resyncs, handback.column
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
