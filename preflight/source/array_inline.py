"""Where a broken element of a JSON array is cut when the next element starts on its line.

``json.dump(list)`` writes the whole array on one line: an element whose quote never closes
(or whose bracket never does) has no later line to be cut at (``array_values.resync``), and
it swallowed every later element, the rest of the file held in memory to learn that. It is
cut at an in-line boundary instead, ``}`` or ``]``, a comma, ``{`` (blanks between, no line
break), from which the text reads as elements of the array itself:

- only an element that is broken is cut: its text, decoded from its start, fails (the
  first error, ``broken_at``; a valid element is never cut, whatever its strings hold);
- the first element from the boundary is a clean object, and the error lies before its end
  (a boundary inside the part of the element that decoded cleanly is nested in it);
- from there clean objects follow one another, comma-separated, to the array's ``]`` at
  the end of the file, or for ``WINDOW`` characters, or up to the next broken element after
  at least one clean one. A run that ends in a closer (``]}``, ``],``: the end of a list of
  objects nested in the element, a chat's ``messages``) is no run of the array's elements.
  The next broken element counts only when it does not close more brackets than it opens
  before its own boundary (``y}]}, {`` is a message of a list that ends there).

Everything is decided within ``WINDOW`` characters of the element's first error and of the
boundary (memory stays bounded), and from the text alone, so the cut is the same whenever
the scanner asks, and however much it has read (``NeedMore`` until it can tell).
"""

from __future__ import annotations

import json
import re

# A boundary: closers of the element before, a comma, the next one's "{" (its "\"" follows,
# checked where the object is read). Blanks only: a line break leaves it to ``resync``.
_BOUNDARY = re.compile(r"[}\]][ \t]*,[ \t]*(\{)")
_SPACE = re.compile(r"[ \t\r\n]*")
_BLANKS = re.compile(r"[ \t]*")
_DECODER = json.JSONDecoder()
# How far past the element's first error a boundary is looked for, and how much clean text
# after it shows it is the array's (a list of objects nested in one element this long after
# its error would be taken for elements).
WINDOW = 1 << 20
# An error this close to the end of what is read may be the end of what is read.
_NEAR_END = 16
_ACCEPT, _REJECT = True, False


class NeedMore(Exception):
    """The element runs past the buffer."""


class InlineCut:
    """The in-line cut of the element starting at ``pos`` of ``buf`` (``eof``: ``buf`` ends
    where the file does), asked for again as the element is read further: ``find(upto)``
    looks at boundaries up to ``upto`` (those it turned down are not looked at again)."""

    def __init__(self, buf: str, pos: int, eof: bool) -> None:
        self.buf, self.pos, self.eof = buf, pos, eof
        self.error: int | None = -1  # -1: not yet known; None: the element decodes
        self.searched = pos + 1

    def find(self, upto: int) -> int | None:
        """Where the next element starts (its ``{``): the first boundary after ``pos``,
        its ``{`` at ``upto`` or before, that passes; None when none does (yet). Raises
        NeedMore when the buffer ends before that can be told."""
        if self.error == -1:
            if _BOUNDARY.search(self.buf, self.searched, upto + 1) is None:
                # Nothing to cut at yet: the element is not decoded for naught, and a later
                # boundary starts at the last closer up to here or after (only blanks and a
                # comma lie between its closer and its "{").
                last = max(self.buf.rfind("}", self.searched, upto + 1),
                           self.buf.rfind("]", self.searched, upto + 1))
                last = last if last >= 0 else min(upto + 1, len(self.buf))
                self.searched = max(self.searched, last)
                return None
            self.error = self._first_error()
        if self.error is None:
            return None
        limit = min(upto, self.error + WINDOW)
        while (m := _BOUNDARY.search(self.buf, self.searched)) is not None:
            brace = m.start(1)
            if brace > limit:
                break
            verdict, first_end, last_end = self._run(brace)
            if verdict and self.error < first_end:
                return brace
            # A run turned down is turned down from each of its later objects too (they meet
            # the same end): looked past at once, or a long list of objects nested in the
            # element is run through once per object (quadratic: 5,000 messages took 35 s).
            self.searched = max(m.start() + 1, last_end if not verdict else 0)
        return None

    def _first_error(self) -> int | None:
        """Where decoding the element fails; None when it decodes (or is too deep to)."""
        try:
            _DECODER.raw_decode(self.buf, self.pos)
        except json.JSONDecodeError as err:
            self._check_end(err)
            return err.pos
        except RecursionError:
            return None
        return None

    def _check_end(self, err: json.JSONDecodeError) -> None:
        """Raise NeedMore when ``err`` may only say that the buffer ended."""
        if not self.eof and (err.pos >= len(self.buf) - _NEAR_END
                             or err.msg.startswith("Unterminated string")):
            raise NeedMore

    def _more(self) -> bool:
        """At the end of the buffer: the file's end (True), else NeedMore."""
        if not self.eof:
            raise NeedMore
        return True

    def _run(self, start: int) -> tuple[bool, int, int]:
        """Whether clean objects from ``start`` read as the array's own elements, where the
        first one ends and where the last one does (``start`` when it is not clean)."""
        buf, p, clean, first_end, end = self.buf, start, 0, start, start
        while True:
            if not clean:  # the boundary's "{" is followed by blanks and a key
                key = _BLANKS.match(buf, p + 1).end()  # type: ignore[union-attr]
                if key == len(buf) and self._more():
                    return _REJECT, first_end, end
                if buf[key] != '"':
                    return _REJECT, first_end, end
            try:
                _, end = _DECODER.raw_decode(buf, p)
            except json.JSONDecodeError as err:
                self._check_end(err)
                verdict = clean > 0 and self._odd_closes_nothing(p, err.pos)
                return verdict, first_end, end
            except RecursionError:
                return _REJECT, first_end, end
            clean += 1
            first_end = end if clean == 1 else first_end
            if end - start >= WINDOW:
                return _ACCEPT, first_end, end
            p = _SPACE.match(buf, end).end()  # type: ignore[union-attr]
            if p == len(buf) and self._more():
                return _ACCEPT, first_end, end  # a file cut off after an element
            if buf[p] == "]":  # the array's end, when nothing follows it
                after = _SPACE.match(buf, p + 1).end()  # type: ignore[union-attr]
                if after == len(buf) and self._more():
                    return _ACCEPT, first_end, end
                return _REJECT, first_end, end
            if buf[p] != ",":
                return _REJECT, first_end, end
            p = _SPACE.match(buf, p + 1).end()  # type: ignore[union-attr]
            if p == len(buf) and self._more():
                return _ACCEPT, first_end, end
            if buf[p] != "{":
                return _REJECT, first_end, end

    def _odd_closes_nothing(self, start: int, error: int) -> bool:
        """Whether the broken object at ``start`` (decoding fails at ``error``) may be an
        element of the array: up to its own boundary (the last one before ``error``, else
        the first after it) it closes no more brackets than it opens. Counted with no
        regard to strings, so a ``}`` in its text counts too (then it is turned down: the
        run before it stays in the element being cut)."""
        buf, at = self.buf, None
        for m in _BOUNDARY.finditer(buf, start + 1, error + 1):
            at = m.start(1)
        if at is None:
            m = _BOUNDARY.search(buf, error)
            if m is None or m.start(1) > start + WINDOW:
                if m is None and len(buf) < start + WINDOW:
                    self._more()
                return _ACCEPT  # it runs to the end of the file, or on and on
            at = m.start(1)
        text = buf[start:at]
        opened = text.count("{") + text.count("[")
        return opened >= text.count("}") + text.count("]")
