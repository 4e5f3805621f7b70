"""encoding's and fold's NFC prefilter: only texts with a character outside the NFC-stable
ranges are normalised, and that never changes which texts are found not NFC."""

from __future__ import annotations

import unicodedata

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.text import NFC_CANDIDATE, NFC_STABLE_RANGES

# Characters in and around the stable ranges: combining marks, singletons, Hangul jamo, kana
# voicing marks, CJK compatibility ideographs, and the range edges.
AROUND = ("e\u0301\u0300\u0338\u212b\u2126\u2000\u2001\u2065\u037e\u0483\u0489\u1100\u1161"
          "\u11a8\uac00\u3099\u304b\uf900\u2209\u2208\u2019\u20ac\u4e00\u0400\u04ff\u1e9b"
          "\u0323\U0001f600\U0001d15e\u0f73\u0344")


def _composes_with_previous() -> set[int]:
    """Code points that are the second half of a canonical composition ("maybe" in NFC)."""
    out = set()
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2:
            out.add(int(d.split()[1], 16))
    return out


def test_every_character_in_the_stable_ranges_is_nfc_stable_and_assigned():
    second = _composes_with_previous()
    bad = [
        f"U+{cp:04X}"
        for a, b in NFC_STABLE_RANGES for cp in range(a, b + 1)
        if unicodedata.combining(chr(cp)) or unicodedata.normalize("NFC", chr(cp)) != chr(cp)
        or cp in second or unicodedata.category(chr(cp)) == "Cn"
    ]
    assert bad == []
    # And polars (its own Unicode tables) agrees on each of them.
    chars = pl.Series([chr(cp) for a, b in NFC_STABLE_RANGES for cp in range(a, b + 1)
                       if not 0xD800 <= cp < 0xE000])
    assert (chars.str.normalize("NFC") == chars).all()
    assert not chars.str.contains(NFC_CANDIDATE).any()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(), st.text(alphabet=st.sampled_from(AROUND + "ab "))),
                max_size=30))
def test_texts_outside_the_candidates_are_nfc(texts):
    series = pl.Series(texts, dtype=pl.String)
    changed = series.str.normalize("NFC") != series
    candidate = series.str.contains(NFC_CANDIDATE)
    assert not (changed & ~candidate).any()


def test_the_check_finds_non_nfc_text_beside_stable_characters(gate):
    texts = ["“quoted” — e\u0301", "漢字 \u212b", "Привет И\u0306", "가\u11a8", "“fine” — é",
             "日本語", "Ёлка"]
    g = gate(texts, "encoding")
    assert g.rows("not_nfc") == [0, 1, 2, 3]
    assert g.result.codes == {"not_nfc": 4}
