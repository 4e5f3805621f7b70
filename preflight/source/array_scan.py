"""A JSON array of objects read fast: element boundaries found over whole blocks with numpy,
the elements parsed as lines by the JSON Lines reader.

Per block of bytes (starting where an element may start): quotes not escaped by an odd run
of backslashes open and close strings; brackets and commas outside strings give each
element's opening ``{`` and closing ``}`` at the array's level and the commas between them.
Only a clean stretch goes fast: elements that are objects, separated by one comma and
whitespace, with no control character inside a string (JSON allows none; line breaks
between tokens become spaces, so each element fits on one line), in valid UTF-8, that the
JSON Lines reader parses without a malformed line; the array's last element too when only
whitespace follows its closing ``]``. The first element that is anything else, and
everything after it, is left to the structural scanner (``jsonarray.elements``), which
reports each odd unit exactly. Rows, records and findings are the scanner's either way (a
hypothesis test checks), and so is the first batch, which fields are inferred from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from preflight.batch import Batch

CHUNK_BYTES = 8 << 20  # bytes read at a time (a larger element goes to the scanner)
_U8 = np.uint8
_QUOTE, _BACKSLASH, _COMMA = 0x22, 0x5C, 0x2C
_OPEN, _CLOSE, _END, _SEP, _ODD = 1, 2, 4, 3, 5  # a token's part at the array's level
_AS_SPACE = bytes.maketrans(b"\t\r\n", b"   ")
_CLOSERS_COMMA = re.compile(rb"[ \t\r}\]]*,")  # a line before an element: closers, comma
_BLANKS = re.compile(rb"[ \t\r]*")


@dataclass
class Cut:
    """Complete clean elements of a block: ``opens``/``closes`` (end-exclusive) byte
    offsets of each ``{...}``; ``bounds``: where each one's stretch starts (past the comma
    before it), then where the next element may start (past the last one's comma, or the
    array's ``]``); ``stop``: the scanner must take over there (else more bytes are
    needed)."""

    opens: np.ndarray
    closes: np.ndarray
    bounds: np.ndarray
    stop: bool
    closed: bool = False  # the last one is the array's: only whitespace after its "]"

    @property
    def end(self) -> int:
        return int(self.bounds[-1])

    def head(self, n: int) -> Cut:
        """The first ``n`` elements (more may follow them)."""
        if n >= len(self.opens):
            return self
        return Cut(self.opens[:n], self.closes[:n], self.bounds[: n + 1], stop=False)


def cut(data: bytes, *, eof: bool) -> Cut:
    """The clean elements at the start of ``data``, which begins where an element may (just
    after the array's ``[`` or an element's comma, outside any string)."""
    b = np.frombuffer(data, _U8)
    quotes = _real_quotes(b)
    # Brackets and commas outside strings: an even number of quotes before them.
    bracket = np.bitwise_or(b, _U8(0x20))  # "[" -> "{", "]" -> "}"
    marks = np.flatnonzero((bracket == _U8(0x7B)) | (bracket == _U8(0x7D)) | (b == _COMMA))
    marks = marks[(np.searchsorted(quotes, marks) & 1) == 0]
    kind = b[marks]
    step = np.zeros(len(marks), np.int64)
    step[(kind == 0x7B) | (kind == 0x5B)] = 1
    step[(kind == 0x7D) | (kind == 0x5D)] = -1
    after = 1 + np.cumsum(step)  # depth after each mark; the array's level is 1
    before = after - step
    top = (before == 1) | (after == 1)
    part = np.full(len(marks), _ODD, np.int64)  # at the array's level: what each mark is
    part[(before == 1) & (kind == 0x7B)] = _OPEN
    part[(before == 2) & (after == 1) & (kind == 0x7D)] = _CLOSE
    part[(before == 1) & (kind == _COMMA)] = _SEP
    part[(before == 1) & (kind == 0x5D)] = _END
    at, part = marks[top], part[top]
    # Clean means open, close, comma, open, close, comma...: count the whole triples.
    expected = np.resize(np.array([_OPEN, _CLOSE, _SEP]), len(part))
    wrong = np.flatnonzero(part != expected)
    # The array's "]" in place of a comma, then only whitespace: its last element is clean
    # too, once the file ends there.
    closing = (len(wrong) > 0 and int(wrong[0]) == len(part) - 1 and len(part) % 3 == 0
               and part[-1] == _END and not data[int(at[-1]) + 1:].strip(b" \t\r\n"))
    if closing:
        wrong = wrong[1:]
    ends_early = not len(wrong)
    usable = (len(part) if ends_early else int(wrong[0])) // 3 - (closing and not eof)
    opens, closes, seps = at[0:usable * 3:3], at[1:usable * 3:3] + 1, at[2:usable * 3:3]
    usable = min(usable, _first_odd(b, quotes, opens, closes, seps))
    bounds = np.concatenate([[0], seps[:usable] + 1])
    return Cut(opens[:usable], closes[:usable], bounds,
               stop=eof or not ends_early or usable < len(seps),
               closed=closing and eof and usable == len(part) // 3)


def _real_quotes(b: np.ndarray) -> np.ndarray:
    """Offsets of the quotes that open or close a string (not escaped by an odd run of
    backslashes)."""
    quotes = np.flatnonzero(b == _QUOTE)
    maybe = quotes[(quotes > 0) & (b[np.maximum(quotes - 1, 0)] == _BACKSLASH)]
    if not len(maybe):
        return quotes
    slashes = np.flatnonzero(b == _BACKSLASH)
    run_start = np.ones(len(slashes), bool)
    run_start[1:] = np.diff(slashes) != 1
    starts = slashes[run_start]
    # The run of backslashes that ends just before each such quote, and its length.
    k = np.searchsorted(starts, maybe - 1, side="right") - 1
    escaped = maybe[((maybe - starts[k]) & 1) == 1]
    return np.setdiff1d(quotes, escaped, assume_unique=True)


def _first_odd(b: np.ndarray, quotes: np.ndarray, opens: np.ndarray, closes: np.ndarray,
               seps: np.ndarray) -> int:
    """How many of the elements come before the first unusual one: one with a control
    character inside a string, or anything but whitespace before it or around its comma."""
    first = len(opens)
    if not first:
        return 0
    controls = np.flatnonzero(b[: int(closes[-1])] < _U8(0x20))
    inside = controls[(np.searchsorted(quotes, controls) & 1) == 1]
    if len(inside):
        first = int(np.searchsorted(closes, inside[0], side="right"))
    # The gaps: from the previous comma (or the start) to the "{", from the "}" to the comma.
    lo = np.concatenate([[0], seps[:-1] + 1, closes])
    hi = np.concatenate([opens, seps])
    sizes = hi - lo
    at = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))
    gap = b[at]
    stray = at[(gap != _U8(32)) & (gap != _U8(10)) & (gap != _U8(13)) & (gap != _U8(9))]
    if len(stray):
        first = min(first, int(np.searchsorted(seps, stray.min())))
    return first


def lines(data: bytes, found: Cut) -> bytes:
    """The clean elements as JSON Lines: one per line, whitespace between tokens as spaces."""
    spaced = data[: found.end].translate(_AS_SPACE)
    return b"".join(spaced[o:c] + b"\n" for o, c in zip(found.opens.tolist(),
                                                        found.closes.tolist(), strict=True))


def fast_batches(stream: Any, raw: Any, parse: Any, *, index: int, done: int,
                 file_index: int, label: str | None, size: int = CHUNK_BYTES, first: int = 0,
                 indent: int | None = None
                 ) -> Iterator[Batch | tuple[bytes, int, int, bool, int | None]]:
    """Batches of the clean stretch of elements at the start of ``stream`` (positioned where
    element ``index`` may start: after the array's ``[`` or a comma); last, ``(unread bytes,
    the next element's index, raw.pos when the last batch was made, whether the array
    closed, the indentation of the last comma's line when only blanks and closers precede
    it there — ``indent`` until an element is read)`` for the scanner to go on from.
    ``parse(lines, row0)`` is the JSON Lines block reader; ``raw.pos`` is the progress in
    file bytes (``done`` of them in earlier batches). Blocks start at ``size`` bytes and
    double up to ``CHUNK_BYTES``: after an odd element, little is parsed twice if another
    one follows soon. With ``first``, the first batch is the first ``first`` elements (or
    all, to the array's end), as the scanner's first batch is; when they are not all clean,
    nothing is yielded and all that was read goes back."""
    data = b""
    while True:
        chunk = stream.read(size)
        data += chunk
        found = cut(data, eof=not chunk)
        if len(found.opens) < first and not found.closed:
            if found.stop or len(data) - found.end >= CHUNK_BYTES:
                break
            size = len(data)  # the first batch is not all here yet
            continue
        found = found.head(first) if first else found
        if len(found.opens):
            batch, n = parse(lines(data, found), index)
            if n != len(found.opens):  # not one line per element: leave it all to the scanner
                break
            # The scanner words each malformed element exactly: it takes over at the first.
            good = min([m.row for m in batch.malformed], default=index + n) - index
            if good < n and first:
                break
            first = 0
            if good:
                batch = batch.head(good)  # the records before the first malformed one
                batch.malformed = []
                batch.file, batch.file_index = label, file_index
                batch.progress, done = raw.pos - done, raw.pos
                yield batch
                index += good
                indent = _indent_after(data, int(found.opens[good - 1]),
                                       int(found.bounds[good]))
                data = data[int(found.bounds[good]):]
            if good < n:
                break
            if found.closed:
                yield b"", index, done, True, indent
                return
            size = min(2 * size, CHUNK_BYTES)
        elif not found.stop:
            # An element larger than a block, or one whose brackets never balance at the
            # array's level (``{"a": [1}``, which would hold the rest of the file): the
            # scanner reads it, in memory bounded by the element.
            if len(data) >= CHUNK_BYTES:
                break
            size = CHUNK_BYTES
        if found.stop:
            break
    yield data, index, done, False, indent


def _indent_after(data: bytes, opens: int, past: int) -> int | None:
    """The indentation of the line of the comma that ends at ``past`` (after an element
    opening at ``opens``), when only blanks and closers stand before it there (a comma
    first on its line, or ``}, {``): the scanner's count."""
    line = data.rfind(b"\n", opens, past)
    if line < 0 or not _CLOSERS_COMMA.fullmatch(data, line + 1, past):
        return None
    return _BLANKS.match(data, line + 1).end() - line - 1  # type: ignore[union-attr]
