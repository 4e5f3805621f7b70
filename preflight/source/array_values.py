"""Where each value of a JSON array ends, found structurally (brackets and strings, not by
parsing), and where an element that runs away is cut.

An element whose quote never closes puts every later quote out of step; one whose bracket
never closes runs on to the array's end. Either is cut where a later line starts an element
(``resync``) indented no deeper than the line the element starts on, so the elements after it
are still read; where elements share a line, at the next element's ``}, {`` once the text
from there reads as the array's own elements (``array_inline``, asked first: before each
answer, and as the element stays open). The element scanner (``jsonarray.elements``)
reads with these.

Depth is the indentation of a line: the blanks before its first other character, whatever
that is (``{``, ``, {``, ``}, {`` or ``[{``). An element's and a candidate line's are
measured alike, so in every layout the array's own element lines are the least indented:
``[{`` and ``}, {`` at 0 with nested ``{`` or ``}, {`` lines deeper, pretty-printed elements
at 2 with nested ones at 6, comma-first ``, {`` at 0. (Measured at the ``{``, the ``{`` of
``}, {`` sat at column 3, right of a nested ``  {`` line, which was taken for an element.)
"""

from __future__ import annotations

import re

from preflight.source.array_inline import InlineCut, NeedMore

_STRUCT = re.compile(r'["\[\]{}]')
# The rest of a JSON string after its opening quote. Possessive and unrolled: a 30 MB string
# is matched in one pass with no backtracking state (an alternation in a group would keep
# about 100 bytes of it per character).
STRING_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+"'
_STRING_TAIL = re.compile(STRING_BODY, re.S)
_LINE_STRING_TAIL = re.compile(r'[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+"')  # no line break in it
# Where a scalar (or a stray byte) ends: a bracket or brace starts or ends another value.
_SCALAR_END = re.compile(r"[,\]\[{}\s]")
SPACE = re.compile(r"[ \t\r\n\ufeff]*")
# A line that may start an element: a line break, blanks (its indentation), then "{", a
# comma and "{" (comma-first), or closers and a comma and "{" (``}, {``, ``]}, {``: the
# element before ends on the line where this one starts).
_CLOSERS = re.compile(r"[ \t\r}\]]*")
_BLANKS = re.compile(r"[ \t\r]*")
_ELEMENT_LINE = re.compile(r"\n([ \t\r]*)(?:(?:[}\]][}\] \t\r]*)?,[ \t\r]*)?\{")
# For a runaway element that shares its line with the one before (its depth unknown), the
# lines that may start an element are looked for this far into it; the least indented of
# them are the array's own (nested objects sit deeper).
_RESYNC_WINDOW = 64 << 10
TRUNCATED = ("truncated", "the file ends inside this element (truncated?)")
RUNAWAY = ("invalid_json", "a quote or bracket in this element never closes: it is cut where "
           "the next line starts an element")
RUNAWAY_INLINE = ("invalid_json", "a quote or bracket in this element never closes: it is cut "
                  "where the next element starts, on the same line")
# An element still open this many characters on is asked whether it is cut in-line
# (``InlineCut``), then at twice the distance, and so on: a broken element whose bracket never
# closes is cut after about twice the text to its cut, not at the end of the array.
_INLINE_FIRST = 4 << 10


def indent_past_closers(buf: str, start: int, end: int) -> int | None:
    """The indentation of the line where the value ``buf[start:end]`` ends, when that line
    holds closers only up to ``end`` (``}`` of pretty-printed JSON, then ``, {`` on the same
    line: the next element starts on a line of known indentation), else None."""
    line = buf.rfind("\n", start, end)
    if line < 0 or not _CLOSERS.fullmatch(buf, line + 1, end):
        return None
    return line_indent(buf, line + 1)


def advance(column: int, blanks: str) -> int:
    """The column after ``blanks`` from ``column``, a tab to the next multiple of 8: where
    text shows, so that ``[\t{`` puts its ``{`` right of a nested ``\t\t{`` line's."""
    for ch in blanks:
        column = (column // 8 + 1) * 8 if ch == "\t" else column + 1
    return column


def line_indent(buf: str, line: int) -> int:
    """The indentation of the line that starts at ``line``: its blanks before anything
    else."""
    return _BLANKS.match(buf, line).end() - line  # type: ignore[union-attr]


def value_end(buf: str, pos: int, eof: bool, indent: int | None, *,
              column: int | None = None) -> tuple[int, int, tuple[str, str] | None, bool]:
    """Where the value starting at ``pos`` ends, its nesting depth, when the structure
    itself is broken (code, detail), and whether it ran away (past where its own opener
    could close: the end of the file, or a closer of the array around it). Raises
    NeedMore when the buffer ends first. ``indent``, ``column``: as ``resync`` takes
    them."""
    first = buf[pos]
    if first not in "[{":
        if first == '"':
            m = _STRING_TAIL.match(buf, pos + 1)
            if m:
                if _out_of_step(buf, pos, m.end()):
                    return _cut(buf, pos, eof, indent, column)
                return m.end(), 0, None, False
        else:
            m = _SCALAR_END.search(buf, pos + 1)
            if m:
                return m.start(), 0, None, False
        if not eof:
            raise NeedMore
        return len(buf), 0, TRUNCATED, True
    # Before each answer, and as the element stays open, the in-line cut is asked whether a
    # boundary before that point comes first: the answer is the same however far is read.
    inline, check_at = InlineCut(buf, pos, eof), pos + _INLINE_FIRST
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
        if p >= check_at:
            if (at := inline.find(p)) is not None:
                return at, 0, cut_detail(buf, at), False
            check_at = pos + 2 * (check_at - pos)
        if ch == '"':
            tail = _LINE_STRING_TAIL.match(buf, p)  # nearly every string: within its line
            if tail is None:
                tail = _STRING_TAIL.match(buf, p)
                if tail is None:
                    break
                if _out_of_step(buf, p - 1, tail.end()):
                    return _cut(buf, pos, eof, indent, column, inline=inline,
                                upto=tail.end())
            # A string that ends "}, {" (then its closing quote, which opens the next
            # element's first key): quotes out of step, the elements sharing a line.
            brace = _boundary_before(buf, p, tail.end())
            if brace is not None and (at := inline.find(brace)) is not None:
                return at, 0, cut_detail(buf, at), False
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
                ahead = SPACE.match(buf, p).end()  # type: ignore[union-attr]
                if ahead == len(buf) and not eof:
                    raise NeedMore
                if buf[ahead:ahead + 1] in (",", "}", '"'):
                    continue
                return _inline_first(inline, m.start(), (m.start(), depth, problem, True))
            while stack[-1] != opener:  # each opener is popped once: linear in all
                open_count[stack.pop()] -= 1
            open_count[stack.pop()] -= 1
            if not stack:  # closed by a closer of the other kind: a broken element
                return _inline_first(inline, p, (p, depth, problem, False))
        else:
            open_count[stack.pop()] -= 1
            if not stack:
                answer = p, depth, problem, False
                return answer if problem is None else _inline_first(inline, p, answer)
    if not eof:
        if len(buf) - pos >= _INLINE_FIRST and (at := inline.find(len(buf))) is not None:
            return at, 0, cut_detail(buf, at), False
        raise NeedMore
    return _inline_first(inline, len(buf), (len(buf), depth, TRUNCATED, True))


def _inline_first(inline: InlineCut, upto: int, answer: tuple[int, int, tuple[str, str] | None,
                                                                bool]
                  ) -> tuple[int, int, tuple[str, str] | None, bool]:
    """``answer``, unless the in-line cut comes first (at ``upto`` or before)."""
    at = inline.find(upto)
    if at is None:
        return answer
    return at, 0, cut_detail(inline.buf, at), False


def cut_detail(buf: str, at: int) -> tuple[str, str]:
    """The finding of an element cut where the next one starts, at ``at``: ``RUNAWAY``
    when that starts a line, else ``RUNAWAY_INLINE``."""
    line = buf.rfind("\n", 0, at)
    if line >= 0 and _ELEMENT_LINE.fullmatch(buf, line, at + 1):
        return RUNAWAY
    return RUNAWAY_INLINE


def _boundary_before(buf: str, start: int, end: int) -> int | None:
    """The ``{`` of ``}, {`` (``]`` too; blanks between, no line break) that ends the
    string ``buf[start:end]`` just before its closing quote, if it does."""
    k = end - 2
    while k >= start and buf[k] in " \t":
        k -= 1
    if k < start or buf[k] != "{":
        return None
    brace, k = k, k - 1
    while k >= start and buf[k] in " \t":
        k -= 1
    if k < start or buf[k] != ",":
        return None
    k -= 1
    while k >= start and buf[k] in " \t":
        k -= 1
    return brace if k >= start and buf[k] in "}]" else None


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


def _cut(buf: str, pos: int, eof: bool, indent: int | None, column: int | None = None, *,
         inline: InlineCut | None = None, upto: int = 0
         ) -> tuple[int, int, tuple[str, str] | None, bool]:
    """``value_end``'s answer for the element at ``pos`` (on a line indented ``indent``,
    when known) once its quotes are out of step (its own quote that never
    closed, or a later element's inside a bracket of its that never closed): it ends where
    the next element starts (``resync``). Raises NeedMore until the buffer holds that
    start (known indentation) or ``_RESYNC_WINDOW`` characters past ``pos``. An in-line
    cut (``inline``, at ``upto`` or before) comes first."""
    if inline is not None and (at := inline.find(upto)) is not None:
        return at, 0, cut_detail(buf, at), False
    if indent is None and len(buf) < pos + _RESYNC_WINDOW and not eof:
        raise NeedMore
    at = resync(buf, pos, len(buf), indent, column=column)
    if at is not None:
        return at, 0, RUNAWAY, False
    if not eof:
        raise NeedMore
    return len(buf), 0, TRUNCATED, True  # no element after it: the file ends inside it


def resync(buf: str, since: int, stop: int, indent: int | None, *,
           column: int | None = None, strict: bool = False) -> int | None:
    """Where the next element starts in a runaway element's text (``since`` to ``stop``):
    the ``{`` of the first line that begins with ``{``, ``, {`` or ``}, {`` indented no
    deeper than the line the element starts on (``indent``: known when only blanks, the
    array's ``[``, closers and a comma stand before the element there); when that is not
    known (the element shares its line with other values), the least indented such line
    within ``_RESYNC_WINDOW`` characters (the array's own elements, not objects nested in
    one). None when there is none (a file cut off in its last element).

    ``column``, for the first element when it shares the array's ``[`` line: the column
    of its own ``{`` (``advance``); a line whose ``{`` shows no further right starts an
    element too. The elements after such a first one may sit deeper than the ``[`` line,
    under its ``{`` (``[{...},\n {...}`` as pprint writes, ``[ {`` then ``  },\n  {``):
    cut only at lines indented like the ``[`` line, it ran on to the file's end with every
    later element in it. (A nested ``}, {`` line has its ``{`` further right.)

    ``strict``, for an element that may well be valid (cut only for its length): None when
    ``indent`` is not known (any nested object line may be the least indented one); no
    ``column``."""
    if indent is not None:
        column = None if strict else column
        return next((m.end() - 1 for m in _ELEMENT_LINE.finditer(buf, since, stop)
                     if len(m.group(1)) <= indent
                     or (column is not None
                         and advance(0, m.group()[1:-1]) <= column)), None)
    if strict:
        return None
    window = min(stop, since + _RESYNC_WINDOW)
    starts = [(len(m.group(1)), m.end() - 1) for m in _ELEMENT_LINE.finditer(buf, since, window)]
    if not starts:
        m = _ELEMENT_LINE.search(buf, window, stop)
        return m.end() - 1 if m is not None else None
    least = min(indent for indent, _ in starts)
    return next(at for indent, at in starts if indent == least)
