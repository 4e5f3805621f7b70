"""Text helpers shared by checks and reports: the folded view used for duplicates, and the
snippet forms (invisible characters made visible, content redacted)."""

from __future__ import annotations

import unicodedata

import numpy as np
import polars as pl
import pyarrow as pa

# Characters whose casefold() differs from lower() (ß, ς, ligatures, Cherokee...). All lie in
# the BMP; only texts holding one of them pay for Python's casefold().
_CASEFOLD_SPECIAL = "".join(
    c for c in map(chr, range(0x10000)) if c.casefold() != c.lower()
)
_CASEFOLD_CLASS = "[" + "".join(f"\\x{{{ord(c):04X}}}" for c in _CASEFOLD_SPECIAL) + "]"
# Rust-regex class of what makes a character "invisible" to a reader: format (Cf) and
# control (Cc) characters, plus the tag block, except the ordinary whitespace controls.
INVISIBLE_CLASS = r"[\p{Cf}\p{Cc}\x{E0000}-\x{E007F}&&[^\t\n\r]]"
_SNIPPET_RADIUS = 24
# Code point ranges NFC leaves alone in any text: each character has canonical combining
# class 0, is its own NFC and never composes with a character before it (a test checks every
# one). Common scripts and symbols without combining marks; all assigned, so a later
# Unicode version cannot add a combining mark inside them.
NFC_STABLE_RANGES = (
    (0x0000, 0x02FF), (0x0400, 0x0482), (0x048A, 0x04FF), (0x1E00, 0x1EFF),
    (0x2002, 0x2064), (0x2066, 0x206F), (0x20A0, 0x20C0), (0x2190, 0x22FF),
    (0x2500, 0x27BF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1F64F),
)
# A text matching this may not be NFC (the rest certainly is): only those pay for NFC.
NFC_CANDIDATE = "[^" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in NFC_STABLE_RANGES) + "]"
# Whitespace beyond ASCII: Unicode White_Space, what polars' `\s` and strip_chars() treat as
# whitespace (tests check this list against both over every code point).
_WIDE_SPACES = ["\x85", "\xa0", "\u1680", *map(chr, range(0x2000, 0x200B)),
                "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
_U8 = np.uint8
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.int64)


def fold(texts: pl.Series) -> pl.Series:
    """The normalised view duplicates are judged on: NFC, casefolded, format characters
    deleted, whitespace runs collapsed to one space, ends trimmed.

    ASCII texts (most of a typical corpus) need none of the Unicode steps, so those run
    only on the rows that hold a non-ASCII character; there, whitespace beyond ASCII becomes
    a space, so that one byte-level pass over the whole batch collapses every run."""
    folded = texts.str.to_lowercase()
    wide = non_ascii(texts)
    if wide.any():
        idx = wide.arg_true()
        sub = texts.gather(idx)
        unstable = sub.str.contains(NFC_CANDIDATE).fill_null(False)
        if unstable.any():
            at = unstable.arg_true()
            sub = sub.scatter(at, sub.gather(at).str.normalize("NFC"))
        sub = sub.str.replace_all(r"\p{Cf}", "").str.to_lowercase()
        special = sub.str.contains(_CASEFOLD_CLASS).fill_null(False)
        if special.any():
            values = sub.to_list()
            for i in special.arg_true().to_list():
                values[i] = values[i].casefold()
            sub = pl.Series(values, dtype=pl.String)
        # One character for one: a run keeps its shape, and the byte pass collapses it.
        sub = sub.str.replace_many(_WIDE_SPACES, [" "] * len(_WIDE_SPACES))
        folded = folded.scatter(idx, sub)
    return collapse_ascii_spaces(folded)


def utf8_buffers(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a string Series and where each string starts: ``(data uint8,
    offsets int64)``, string ``k`` being ``data[offsets[k]:offsets[k + 1]]`` (empty for a
    null). Views of Arrow's buffers, not copies."""
    arr = texts.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int64, n + 1, arr.offset * 8)
    data_buf = arr.buffers()[2]
    if data_buf is None or offsets[-1] == offsets[0]:
        return np.zeros(0, _U8), np.zeros(n + 1, np.int64)
    data = np.frombuffer(data_buf, _U8, offsets[-1] - offsets[0], offsets[0])
    return data, offsets - offsets[0]


def collapse_ascii_spaces(texts: pl.Series) -> pl.Series:
    """Each run of ASCII whitespace (space, \\t, \\n, \\v, \\f, \\r) becomes one space and the
    ends are trimmed: ``" ".join(text.split())`` for ASCII whitespace.

    It works on the UTF-8 bytes of the whole batch at once (whitespace bytes never occur
    inside a multi-byte character), which costs about half of a regex replacement that
    rewrites every line break separately. Nulls stay null."""
    data, offsets = utf8_buffers(texts)
    if not len(data):  # only empty strings and nulls
        return texts
    # Branch-free uint8 arithmetic throughout: masked assignment is several times slower.
    ws = np.less(np.subtract(data, _U8(9)), _U8(5))  # \t \n \v \f \r
    ws |= data == _U8(32)
    # A run keeps one space, at its last byte, when a non-whitespace byte of the same
    # string follows; a run that ends a string keeps none.
    last = np.empty(len(data), bool)
    np.greater(ws[:-1], ws[1:], out=last[:-1])
    nonempty = offsets[1:] > offsets[:-1]
    last[offsets[1:][nonempty] - 1] = False
    # A run that starts a string keeps none either.
    starts, ends = offsets[:-1][nonempty], offsets[1:][nonempty]
    leading = ws[starts]
    if leading.any():
        kept = np.flatnonzero(last)
        k = np.searchsorted(kept, starts[leading])
        inside = k < len(kept)
        first = kept[k[inside]]  # the first kept space at or after the string's start
        last[first[first < ends[leading][inside]]] = False
    keep = np.packbits(np.less_equal(ws, last), bitorder="little")
    out = np.subtract(_U8(32), data)  # ws -> 32, else the byte itself
    np.multiply(out, ws.view(_U8), out=out)
    np.add(out, data, out=out)
    mask = pa.BooleanArray.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(keep)])
    out = pl.Series(out).filter(pl.Series(mask)).to_numpy()
    # The kept bytes before each offset: popcounts of whole bytes of the packed mask, summed,
    # plus the bits of the byte the offset falls in.
    before = np.zeros(len(keep) + 1, np.int64)
    np.cumsum(_POPCOUNT[keep], out=before[1:])
    byte, bit = offsets >> 3, offsets & 7
    partial = keep[np.minimum(byte, len(keep) - 1)] & ((1 << bit) - 1).astype(_U8)
    new_offsets = before[byte] + _POPCOUNT[partial]
    result = pl.Series(texts.name, pa.LargeStringArray.from_buffers(
        len(texts), pa.py_buffer(new_offsets), pa.py_buffer(out)))
    if texts.has_nulls():
        result = result.scatter(texts.is_null().arg_true(), None)
    return result


def as_text(value: object) -> str | None:
    """A text field's value as text: a string as is, a binary column's bytes decoded as
    UTF-8 (invalid bytes as U+FFFD), anything else None."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def non_ascii(texts: pl.Series | pl.Expr) -> pl.Series | pl.Expr:
    """True for texts holding any non-ASCII character (null counts as ASCII)."""
    return (texts.str.len_bytes() != texts.str.len_chars()).fill_null(False)


def is_invisible(ch: str) -> bool:
    """True for a character a reader cannot see (format, control other than \\t\\n\\r, tag)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cf", "Cc") or 0xE0000 <= ord(ch) <= 0xE007F


def visible(text: str) -> str:
    """Show invisible characters as ``<U+200B>`` so a person can see them."""
    return "".join(f"<U+{ord(c):04X}>" if is_invisible(c) else c for c in text)


def redact(text: str) -> str:
    """Keep a snippet's shape but not its content: letters become x/X, digits 0,
    invisible characters stay visible as ``<U+XXXX>``; punctuation and spaces are kept."""
    out = []
    for c in text:
        if is_invisible(c):
            out.append(f"<U+{ord(c):04X}>")
        elif c.isalpha():
            out.append("X" if c.isupper() else "x")
        elif c.isdigit():
            out.append("0")
        elif c in "\n\r\t":
            out.append(" ")
        else:
            out.append(c)
    return "".join(out)


def snippet(text: str, at: int) -> str:
    """The raw text around position ``at`` (with ellipses where cut)."""
    start, end = max(0, at - _SNIPPET_RADIUS), min(len(text), at + _SNIPPET_RADIUS)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


# A message longer than this is cut: an exception from the user's code (a model's forward)
# may carry megabytes, which the console would wrap for minutes.
MAX_MESSAGE_CHARS = 1_000


def first_line(e: BaseException) -> str:
    """An exception's message cut to its first line (its type name when it has none, or
    when ``str(e)`` itself raises, as a user's exception class may), at most
    ``MAX_MESSAGE_CHARS`` characters."""
    try:
        text = str(e).strip()
    except Exception:  # a broken __str__ in someone else's exception class
        text = ""
    line = text.splitlines()[0] if text else type(e).__name__
    return line if len(line) <= MAX_MESSAGE_CHARS else line[:MAX_MESSAGE_CHARS] + "…"
