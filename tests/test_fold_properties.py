"""fold() against the regex implementation it replaced, kept here as the reference: the
folded view (and so every duplicate key) must not change, for any Unicode text."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.text import _WIDE_SPACES, collapse_ascii_spaces, fold
from tests.test_text import _fold

# Every character polars' regex `\s` matches, and the ones around the edges of that set.
WHITESPACE = ("\t\n\x0b\x0c\r \x1c\x1d\x1e\x1f\x85\xa0\u1680\u180e\u2000\u2001\u2002\u2003"
              "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u200b\u2028\u2029\u202f\u205f\u2060"
              "\u3000\ufeff")
TRICKY = (WHITESPACE + "\x00\u00adAZaz\u0301\u0308\u0345ßẞİıΣσς\ufb01\u212b\u2126\u1e9e"
          "\U0001d400\ue000")
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_fold(texts: pl.Series) -> pl.Series:
    """fold() as it was before the byte-level whitespace pass (regex `\\s` collapse)."""
    from preflight.text import _CASEFOLD_CLASS, non_ascii

    folded = texts.str.to_lowercase()
    wide = non_ascii(texts)
    if wide.any():
        idx = wide.arg_true()
        sub = (texts.gather(idx).str.normalize("NFC").str.replace_all(r"\p{Cf}", "")
               .str.to_lowercase())
        special = sub.str.contains(_CASEFOLD_CLASS).fill_null(False)
        if special.any():
            values = sub.to_list()
            for i in special.arg_true().to_list():
                values[i] = values[i].casefold()
            sub = pl.Series(values, dtype=pl.String)
        folded = folded.scatter(idx, sub)
    return folded.str.replace_all(r"\s{2,}|[^\S ]", " ").str.strip_chars()


_text = st.one_of(
    st.text(),  # arbitrary Unicode
    st.text(alphabet=st.sampled_from(TRICKY)),  # dense in whitespace and case/format edges
    st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0cAb")),  # ASCII only
)
_texts = st.lists(st.one_of(st.none(), _text), max_size=40)


@PROPERTY
@given(_texts)
def test_fold_equals_the_regex_reference(texts):
    series = pl.Series("text", texts, dtype=pl.String)
    assert fold(series).to_list() == reference_fold(series).to_list()


@PROPERTY
@given(_texts, st.integers(0, 40), st.integers(0, 40))
def test_fold_of_a_slice_equals_the_reference(texts, start, length):
    # A sliced series has an offset into its Arrow buffers (a batch cut from a bigger one).
    series = pl.Series("text", texts, dtype=pl.String).slice(start, length)
    assert fold(series).to_list() == reference_fold(series).to_list()


@PROPERTY
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.sampled_from(" \t\n\rxyZ\u00e9"))),
                max_size=30))
def test_collapse_is_split_and_join_on_ascii_whitespace(texts):
    series = pl.Series("text", texts, dtype=pl.String)
    # bytes.split() splits on exactly the ASCII whitespace bytes.
    expected = [None if t is None else b" ".join(t.encode().split()).decode() for t in texts]
    assert collapse_ascii_spaces(series).to_list() == expected


def test_wide_spaces_are_exactly_what_polars_calls_whitespace():
    chars = pl.Series([chr(i) for i in range(0x80, 0x110000) if not 0xD800 <= i < 0xE000])
    by_regex = chars.filter(chars.str.contains(r"^\s$")).to_list()
    by_strip = chars.filter(chars.str.strip_chars() == "").to_list()
    assert by_regex == by_strip == _WIDE_SPACES


def test_fold_collapses_every_whitespace_character_and_keeps_the_rest():
    # One text per character around whitespace: between two letters it is a space or not.
    out = _fold(*[f"a{c}{c}b" for c in WHITESPACE])
    spaces = {c for c, folded in zip(WHITESPACE, out, strict=True) if folded == "a b"}
    assert spaces == set("\t\n\x0b\x0c\r ") | set(_WIDE_SPACES)
    assert _fold("a\x1cb", "a\u200bb", "a\u180eb", "a\ufeffb") == ["a\x1cb", "ab", "ab", "ab"]


def test_fold_edges_nulls_and_empties():
    assert _fold("", None, " ", "\u3000\n", "\u200b", "x\u2028", " \u00a0y") == [
        "", None, "", "", "", "x", "y"]
    assert _fold(None, None) == [None, None]
    assert fold(pl.Series("text", [], dtype=pl.String)).to_list() == []


def test_fold_does_not_change_its_input():
    texts = pl.Series("text", ["A  b", "É\u00a0\u00a0F", None])
    before = texts.to_list()
    assert fold(texts).to_list() == ["a b", "é f", None]
    assert texts.to_list() == before
