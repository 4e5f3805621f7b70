"""Text helpers shared by checks and reports: the folded view used for duplicates, and the
snippet forms (invisible characters made visible, content redacted)."""

from __future__ import annotations

import unicodedata

import polars as pl

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


def fold(texts: pl.Series) -> pl.Series:
    """The normalised view duplicates are judged on: NFC, casefolded, format characters
    deleted, whitespace runs collapsed to one space, ends trimmed.

    ASCII texts (most of a typical corpus) need none of the Unicode steps, so those run
    only on the rows that hold a non-ASCII character."""
    folded = texts.str.to_lowercase()
    wide = non_ascii(texts)
    if wide.any():
        idx = wide.arg_true()
        sub = (
            texts.gather(idx)
            .str.normalize("NFC")
            .str.replace_all(r"\p{Cf}", "")
            .str.to_lowercase()
        )
        special = sub.str.contains(_CASEFOLD_CLASS).fill_null(False)
        if special.any():
            values = sub.to_list()
            for i in special.arg_true().to_list():
                values[i] = values[i].casefold()
            sub = pl.Series(values, dtype=pl.String)
        folded = folded.scatter(idx, sub)
    # `\s{2,}|[^\S ]` rewrites only whitespace that is not already a single space: the same
    # result as `\s+` -> " ", at about half the cost.
    return folded.str.replace_all(r"\s{2,}|[^\S ]", " ").str.strip_chars()


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


def first_line(e: BaseException) -> str:
    """An exception's message cut to its first line (its type name when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
