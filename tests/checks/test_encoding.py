"""encoding: U+FFFD, lone surrogates, mojibake, not NFC — and real-language text left alone."""

from __future__ import annotations

import json

import pytest

POSITIVES = [
    ("bad \ufffd byte", "replacement_character"),
    ("cafÃ©", "mojibake"),
    ("donâ€™t", "mojibake"),  # ’ as UTF-8 read as cp1252
    ("donâ\x80\x99t", "mojibake"),  # the same read as Latin-1 (C1 controls)
    ("smile ðŸ˜€", "mojibake"),  # a 4-byte emoji read as cp1252
    ("Â© 2024", "mojibake"),
    ("e\u0301", "not_nfc"),
    ("10 \u212b", "not_nfc"),  # ANGSTROM SIGN, a singleton NFC replaces
    ("\u1100\u1161", "not_nfc"),  # Hangul jamo NFC composes
]


@pytest.mark.parametrize(("text", "code"), POSITIVES, ids=[t for t, _ in POSITIVES])
def test_each_code_is_found_on_its_row(gate, text, code):
    g = gate(["clean", text, "clean too"], "encoding")
    assert g.result.codes == {code: 1}
    assert g.rows(code) == [1]


def test_lone_surrogate_escape_is_found_and_not_double_counted(gate):
    lines = [
        json.dumps({"id": "a", "text": "fine"}),
        r'{"id": "b", "text": "a\ud800b"}',
        json.dumps({"id": "c", "text": "fine"}),
    ]
    g = gate(check="encoding", lines=lines)
    assert g.result.codes == {"lone_surrogate": 1}
    assert g.rows() == [1]
    assert g.report.source.records == 3
    assert g.report.source.malformed == 0


def test_lone_surrogate_next_to_a_malformed_line(gate):
    # A malformed line sends the block through the line-by-line reader: same result.
    lines = ["not json", r'{"id": "b", "text": "x\udc00y"}', json.dumps({"id": "c", "text": "ok"})]
    g = gate(check="encoding", lines=lines)
    assert g.result.codes == {"lone_surrogate": 1}
    assert g.rows() == [1]


def test_several_problems_in_one_row(gate):
    g = gate(["cafÃ© \ufffd e\u0301"], "encoding")
    assert g.codes_by_row() == {0: {"mojibake", "replacement_character", "not_nfc"}}
    assert g.result.violations == 1


def test_params_switch_codes_off(gate):
    texts = ["cafÃ©", "\ufffd", "e\u0301"]
    g = gate(texts, "encoding", mojibake=False, nfc=False)
    assert g.result.codes == {"replacement_character": 1}
    g = gate(texts, "encoding", replacement_character=False)
    assert g.result.codes == {"mojibake": 1, "not_nfc": 1}


NOT_MOJIBAKE = {
    "persian": "می‌خواهم کتاب بخوانم",
    "greek": "Καλημέρα κόσμε",
    "german": "Müller Straße",
    "french": "café, naïve façade, Ça coûte 5 €",
    "french_capital_a_circumflex": "Âge d'or",
    "spanish": "¿Qué? ¡Sí! Año",
    "portuguese": "São Paulo — “citação”",
    "danish": "Ærø og Ålborg",
    "chinese": "你好，世界",
    "japanese": "こんにちは世界",
    "emoji": "👍🏽 😀 ❤️",
    "ellipsis_after_e": "Straße…",
    # Real typography where a letter is followed by a cp1252 punctuation character:
    "german_quotes_after_eszett": "Er sagte „Das ist groß“.",
    "french_guillemets_nbsp": "« Un café\u00a0»",
}


@pytest.mark.parametrize("name", list(NOT_MOJIBAKE))
def test_real_language_text_is_not_flagged(gate, name):
    g = gate([NOT_MOJIBAKE[name]], "encoding")
    assert g.result.codes == {}
