"""JSON array reader: a top-level array of records, streamed element by element.

Element boundaries are found structurally (brackets and strings), not by parsing, so a bad
element (``{oops}``, a nested array, a number) is one ``malformed`` unit and every later
element is still read. A file cut off inside an element or before the closing ``]`` is a
``truncated`` unit; data after the closing ``]`` (two arrays concatenated) is a
``trailing_data`` unit per value. An element whose quote or bracket never closes would run
to the end of the array (or, its quotes out of step, swallow the elements after it): it is
cut where a later line starts an element (``array_values``), or where the next element
starts on its line (``array_inline``: an array on one line), and the scanner goes on.
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

from preflight.batch import Batch, Malformed
from preflight.record_batches import records_to_batch, replace_lone_surrogates
from preflight.source import array_scan
from preflight.source.array_inline import InlineCut
from preflight.source.array_values import (
    RUNAWAY,
    RUNAWAY_INLINE,
    SPACE,
    STRING_BODY,
    NeedMore,
    advance,
    cut_detail,
    indent_past_closers,
    line_indent,
    resync,
    value_end,
)
from preflight.source.json_line import MAX_DEPTH, TOO_DEEP, parse_line
from preflight.source.jsonl import parse_block, read_jsonl
from preflight.source.tracked import Prefixed, Tracked, note_file, open_stream

ARRAY_BATCH = 20_000
_READ = 1 << 20
_COMPACT = re.compile(f'("{STRING_BODY})|[ \\t\\r\\n]+', re.S)
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")
# A fast stretch this long after the scanner's (elements) sends the scanner back to stopping
# at its first clean comma; a shorter one makes it read 8 times longer next time.
_FAST_STRETCH = 1000
# An element whose bracket never closes is known only at the end of the array, read to there:
# at most this many are cut per file (the next holds the rest, as a file cut off there).
# One whose quotes went out of step is cut as soon as that shows, at no such cost.
MAX_RESYNCS = 16
# An element still open this many characters on, with a line inside it that starts an
# element indented no deeper than its own (``resync``, strict: its line's indentation
# known), is cut there without reading on to the end: what was held of the rest of
# the file (about 10x its size in memory, and seconds per runaway) is bounded. A valid
# element this large laid out that way would be cut too.
MAX_OPEN_CHARS = 16 << 20
_STRAY_CLOSER = ("invalid_json", "a ] that closes nothing: elements follow it")


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
    indent: int | None = None  # of the comma's line, when only blanks and closers precede it


def elements(stream: Any, *, index: int = 0, after: str = "",
             handback: Handback | None = None, indent: int | None = None
             ) -> Iterator[Element]:
    """Every element of the JSON array in ``stream`` (binary), in order; or, with
    ``after`` ("[" or ","), of the rest of an array whose opening ``[`` or last comma was
    read already, ``index`` elements on (up to ``handback``'s stop, when given;
    ``indent``: the indentation of the line of that "[" or comma, when only blanks and
    closers stand before it there)."""
    first = index
    resyncs = handback.resyncs if handback is not None else 0
    # The indentation of the line the next value starts on, when only blanks, the array's
    # "[", closers and a comma stand before it there (``[{``, ``{``, ``, {``, ``}, {``): a
    # runaway element is cut at the next line that starts an element indented no deeper.
    indent = indent if after else None
    # The column of the first element's "{" while it may share the array's "[" line ("[{",
    # "[ {"; ``advance``): that element, running away, is also cut at a line whose "{"
    # shows there or further left (``resync``'s ``column``).
    column = indent + 1 if after == "[" and indent is not None else None
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

    def skip_space(*, leading: bool = False) -> bool:
        """Skip whitespace, noting the indentation when it ends a line break (``indent``;
        blanks within a line leave it as it is); ``leading``: these blanks start the
        file's first line. False when the input is exhausted."""
        nonlocal pos, indent, column
        while True:
            start = pos
            pos = SPACE.match(buf, pos).end()  # type: ignore[union-attr]
            line = buf.rfind("\n", start, pos)
            if line >= 0:
                indent, leading, column = pos - line - 1, True, None
            else:
                if leading and indent is not None:  # the same run of blanks, across a fill
                    indent += pos - start
                if column is not None:
                    column = advance(column, buf[start:pos])
            if pos < len(buf):
                return True
            if eof:
                return False
            fill()

    if not after:
        indent = 0  # the start of the file
        if not skip_space(leading=True) or buf[pos] != "[":
            raise ValueError("expected a JSON array")
        pos += 1
        after, column = "[", indent + 1
    # ``after``: what came last inside the array — "[" (its opening), "," or a value. A
    # comma where a value belongs, a value where a comma belongs, or a comma before the
    # closing ] is invalid JSON: a malformed unit (rows stay countable), never silence.
    closed, cut = False, False
    while True:
        if not skip_space():
            break
        ch = buf[pos]
        if not closed and ch == "]":  # the array's end, unless elements follow it
            ahead = SPACE.match(buf, pos + 1).end()  # type: ignore[union-attr]
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
            # A comma first on its line (", {"), or after closers ("}, {"), leaves the
            # indentation known: the element after it starts that line.
            pos, indent = pos + 1, (indent if ch == "," else None)
            if clean and handback is not None and index - first >= handback.units:
                handback.rest = (buf[pos:].encode("utf-8", "surrogateescape")
                                 + decoder.getstate()[0])
                handback.index, handback.resyncs, handback.indent = index, resyncs, indent
                return
            continue
        first_column = column if after == "[" else None
        try:
            end, depth, problem, runaway = value_end(buf, pos, eof, indent,
                                                     column=first_column)
        except NeedMore:
            at = (resync(buf, pos, len(buf), indent, strict=True)
                  if len(buf) - pos >= MAX_OPEN_CHARS else None)
            if at is None:
                fill()
                continue
            end, depth, problem, runaway = at, 0, RUNAWAY, False
        text = buf[pos:end]
        if closed:  # whatever follows the closing ], as written
            problem = ("trailing_data", "data after the closing ] of the array")
        elif after == "value" and problem is None:
            problem = ("invalid_json", "no comma before this element")
        at = None
        if problem is RUNAWAY or problem is RUNAWAY_INLINE:  # cut already, at the next one
            element = Element(index, text, malformed=Malformed(index, *problem))
            at = end
        else:
            element = _element(index, text, depth, problem)
            if problem is None and element.malformed is not None and not closed:
                # Brackets that balance around text that does not parse: quotes out of
                # step that fell back in step further on (a second broken element). The
                # in-line cut, as ``value_end`` asks it before its other answers.
                try:
                    inline = InlineCut(buf, pos, eof).find(end)
                except NeedMore:
                    fill()
                    continue
                if inline is not None:
                    problem = cut_detail(buf, inline)
                    element = Element(index, buf[pos:inline],
                                      malformed=Malformed(index, *problem))
                    at = inline
            if at is None and runaway and not closed and resyncs < MAX_RESYNCS:
                at = resync(buf, pos, end, indent, column=first_column)
                if at is not None:  # the element ends where the next one starts: no comma
                    resyncs += 1
                    element = Element(index, buf[pos:at],
                                      malformed=Malformed(index, *RUNAWAY))
        if problem is RUNAWAY_INLINE:  # the next element shares its line
            pos, after, indent = at, ",", None
        elif at is not None:  # the next element starts a line: its indentation is known
            pos, after, indent = at, ",", line_indent(buf, buf.rfind("\n", 0, at) + 1)
        else:
            pos, after, indent = end, "value", indent_past_closers(buf, pos, end)
        if handback is not None:
            handback.resyncs = resyncs
        cut = element.malformed is not None and element.malformed.code == "truncated"
        yield element
        index += 1
    if not closed and not cut:
        yield Element(index, "", malformed=Malformed(
            index, "truncated", "the file ends before the array's closing ] (truncated?)"))


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
    indent: int | None = len(lead) - lead.rfind("\n") - 1  # of the "[" line (the scanner's)
    # Fields are inferred from the first batch: it is the first ARRAY_BATCH elements, fast
    # when they are all clean, else the scanner's.
    size, first = array_scan.CHUNK_BYTES, ARRAY_BATCH
    while True:
        tail: tuple[bytes, int, int, bool, int | None] = (b"", index, done, False, indent)
        for item in array_scan.fast_batches(rest, raw, parse_block, index=index, done=done,
                                            file_index=file_index, label=label, size=size,
                                            first=first, indent=indent):
            if isinstance(item, Batch):
                yield item
            else:
                tail = item
        unread, fast_to, done, closed, indent = tail
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
            elements(rest, index=fast_to, after=after, handback=handback, indent=indent),
            raw, file_index,
            label, done=done)
        resyncs, indent = handback.resyncs, handback.indent
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
