"""Text helpers: the folded view duplicates use, and the redacted / visible snippet forms."""

from __future__ import annotations

import polars as pl

from preflight.text import fold, redact, visible


def _fold(*texts: str | None) -> list[str | None]:
    return fold(pl.Series("text", list(texts), dtype=pl.String)).to_list()


def test_fold_casefolds_beyond_lowercase():
    a, b, c = _fold("Straße", "STRASSE", "strasse")
    assert a == b == c == "strasse"


def test_fold_casefold_special_characters():
    assert _fold("ﬁle", "ΣΟΦΟΣ", "σοφος") == ["file", "σοφοσ", "σοφοσ"]


def test_fold_removes_format_characters():
    assert _fold("Hel\u200blo", "a\u2060b\ufeffc\u00add") == ["hello", "abcd"]


def test_fold_collapses_whitespace_and_trims():
    assert _fold("  a \t b\n\n c  ", "a\u00a0\u3000b") == ["a b c", "a b"]


def test_fold_normalises_to_nfc():
    nfd, nfc = _fold("Cafe\u0301", "Café")
    assert nfd == nfc == "café"


def test_fold_keeps_nulls_and_length():
    folded = _fold("A", None, "ß", None)
    assert folded == ["a", None, "ss", None]


def test_fold_of_ascii_only_with_nulls():
    assert _fold("  A \t B ", None, "x") == ["a b", None, "x"]


def test_fold_of_an_empty_series():
    assert fold(pl.Series("text", [], dtype=pl.String)).to_list() == []


def test_redact_keeps_shape_hides_content():
    assert redact("Ab1 c-d.") == "Xx0 x-x."
    assert redact("Élan ٣") == "Xxxx 0"
    assert len(redact("Hello, world!")) == len("Hello, world!")


def test_redact_shows_invisibles():
    assert redact("ab\u200bcd") == "xx<U+200B>xx"
    assert redact("x\U000e0041") == "x<U+E0041>"


def test_redact_turns_line_breaks_into_spaces():
    assert redact("a\nb\tc\r") == "x x x "


def test_visible_shows_invisibles_and_keeps_the_rest():
    assert visible("a\u200bb\u202ec") == "a<U+200B>b<U+202E>c"
    assert visible("tab\there\nnew") == "tab\there\nnew"
    assert visible("x\u0007\u0085") == "x<U+0007><U+0085>"
    assert visible("Straße 👍") == "Straße 👍"
