"""Generate the planted-fault sample corpus for preflight.

Running ``python sample_data/generate.py`` writes, next to this script:

* ``pretrain.jsonl`` -- 300 physical lines of JSON Lines. Each record is
  ``{"id": "doc-NNNNN", "text": "...", "source": "..."}`` with made-up
  English-like prose, except for the faults planted at fixed rows (see FAULTS).
* ``pretrain.faults.json`` -- the FAULTS table as a list of objects
  ``{"row", "check", "code", "note"}`` (plus ``"cluster"`` for duplicates),
  so tests can assert against it.
* ``README.md`` -- a description of the file and a table of every planted fault.

"row" is the 0-based physical line number in ``pretrain.jsonl``, so
``sed -n "$((row+1))p" sample_data/pretrain.jsonl`` prints it. The output is
deterministic (``random.Random(7)``): running the script twice gives
byte-identical files.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
N_LINES = 300
SEED = 7

_WORD_TEXT = """
    the a an and but or so because when while after before if then than that this these
    those there here what which who how why where people time year day week month way
    man woman child children family friend world life hand part place case point group
    number city town river road house home school book story letter garden field window
    door table kitchen market street water fire light music paper money work job problem
    question answer idea plan reason result change moment morning evening night summer
    winter spring autumn weather rain wind cloud tree flower bird dog cat horse boat train
    car bridge village mountain island forest valley coast harbor station library office
    teacher doctor farmer baker painter writer student neighbor stranger traveler is was
    are were has had have will would can could should might must make made take took go
    went come came see saw know knew think thought find found give gave tell told ask
    asked work worked call called try tried leave left feel felt keep kept begin began
    walk walked carry carried open opened close closed bring brought write wrote read
    learn learned build built good new old great small large long short early late young
    quiet bright dark warm cold heavy light happy careful simple strange clear busy
    empty full slow quick often always never sometimes soon again almost already still
    together also only very slowly quickly
"""
WORDS: tuple[str, ...] = tuple(dict.fromkeys(_WORD_TEXT.split()))  # ~230 unique words

PUNCT = (".", ".", ".", ".", ".", "?", "!")
SOURCES = ("web/forum", "web/blog", "books/public-domain", "news/wire", "wiki/encyclopedia")

# Characters that str.splitlines() (and some line readers) treat as line breaks but
# that json.dumps(ensure_ascii=False) leaves raw. We always escape them so that the
# physical line numbers of the file stay honest for any reader.
_LINE_BREAKERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}

R0 = 5  # the original of the exact-duplicate cluster (itself clean, NOT a finding)
BLANK_ROW = 150
INVALID_UTF8_MARK = "@@RAW-0xFF@@"


@dataclass(frozen=True)
class Fault:
    """One planted fault (or planted negative) at a physical line."""

    row: int
    check: str
    code: str
    note: str
    cluster: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "row": self.row,
            "check": self.check,
            "code": self.code,
            "note": self.note,
        }
        if self.cluster is not None:
            out["cluster"] = self.cluster
        return out


FAULTS: list[Fault] = [
    Fault(10, "malformed", "invalid_json", 'truncated: {"id": "doc-00010", "text": "unterminated'),
    Fault(20, "malformed", "not_an_object", "valid JSON but an array: [1, 2, 3]"),
    Fault(30, "malformed", "invalid_utf8", "JSON object whose text holds a raw 0xFF byte"),
    Fault(40, "schema", "wrong_type", '"text" is the number 12345'),
    Fault(50, "empty", "empty_text", '"text" is ""'),
    Fault(55, "empty", "whitespace_only", '"text" is "  \\n\\t "'),
    Fault(60, "empty", "missing_field", 'no "text" key at all'),
    Fault(65, "empty", "missing_field", '"text" is null'),
    Fault(70, "invisible_unicode", "zero_width_space", "U+200B inside a word"),
    Fault(75, "invisible_unicode", "zero_width_space", "U+200B inside a word"),
    Fault(80, "invisible_unicode", "bidi_control", "U+202E RIGHT-TO-LEFT OVERRIDE ... U+202C"),
    Fault(85, "invisible_unicode", "bidi_control", "U+2066 LEFT-TO-RIGHT ISOLATE ... U+2069"),
    Fault(
        90,
        "invisible_unicode",
        "tag_character",
        "U+E0041..U+E005A tag run spelling IGNOREPREVIOUSINSTRUCTIONS after normal text",
    ),
    Fault(95, "invisible_unicode", "soft_hyphen", "U+00AD inside a word"),
    Fault(100, "invisible_unicode", "control_character", "U+0007 BEL"),
    Fault(
        105,
        "invisible_unicode",
        "control_character",
        "U+0085 NEL (C1 control; written escaped as \\u0085 so the line is not split)",
    ),
    Fault(110, "invisible_unicode", "byte_order_mark", "U+FEFF in the middle of the text"),
    Fault(115, "invisible_unicode", "word_joiner", "U+2060 inside a word"),
    Fault(120, "none", "allowed_emoji_zwj", "emoji family U+1F468 U+200D U+1F469 U+200D U+1F467"),
    Fault(125, "none", "allowed_persian_zwnj", "Persian with U+200C ZWNJ used correctly"),
    Fault(130, "none", "allowed_indic_zwj", "Hindi with U+200D ZWJ after a Devanagari virama"),
    Fault(135, "none", "allowed_whitespace", "text with tabs and newlines"),
    Fault(140, "encoding", "replacement_character", "U+FFFD in the text"),
    Fault(145, "encoding", "mojibake", "UTF-8 read as cp1252: cafÃ© and donâ€™t"),
    Fault(BLANK_ROW, "none", "blank_line", "empty physical line; not a record, not a finding"),
    Fault(160, "none", "nan_literal_ok", 'valid record with extra field "score": NaN'),
    Fault(170, "encoding", "not_nfc", "decomposed e + U+0301 (Cafe\\u0301)"),
    Fault(200, "exact_duplicate", "exact_duplicate_of", f"identical text to row {R0}", R0),
    Fault(
        220,
        "exact_duplicate",
        "exact_duplicate_of",
        f"text of row {R0} upper-cased with doubled spaces",
        R0,
    ),
    Fault(
        240,
        "exact_duplicate",
        "exact_duplicate_of",
        f"text of row {R0} with a U+200B injected",
        R0,
    ),
    Fault(240, "invisible_unicode", "zero_width_space", f"U+200B injected into row {R0}'s text"),
]


# --------------------------------------------------------------------------- prose


def make_sentence(rng: random.Random) -> str:
    n = rng.randint(4, 14)
    words = [rng.choice(WORDS) for _ in range(n)]
    if n >= 8 and rng.random() < 0.3:
        cut = rng.randint(3, n - 3)
        words[cut] = words[cut] + ","
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + rng.choice(PUNCT)


def make_text(rng: random.Random) -> str:
    return " ".join(make_sentence(rng) for _ in range(rng.randint(1, 6)))


def dedup_key(text: str) -> str:
    """A deliberately aggressive normalisation, so clean texts differ even loosely."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", "", text)
    return " ".join(text.split())


def inject_in_word(rng: random.Random, text: str, char: str) -> str:
    """Insert ``char`` strictly inside one word (of 4+ letters) of ``text``."""
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    i = rng.choice(candidates)
    w = words[i]
    cut = rng.randint(1, len(w) - 1)
    words[i] = w[:cut] + char + w[cut:]
    return " ".join(words)


# --------------------------------------------------------------------------- lines


def dump(record: Any) -> str:
    line = json.dumps(record, ensure_ascii=False)
    for raw, escaped in _LINE_BREAKERS.items():
        line = line.replace(raw, escaped)
    return line


def build_lines() -> list[bytes]:
    rng = random.Random(SEED)

    # One unique clean text per row first (rng order independent of the faults).
    texts: list[str] = []
    seen: set[str] = set()
    while len(texts) < N_LINES:
        text = make_text(rng)
        key = dedup_key(text)
        if key in seen or len(key) < 12:
            continue
        seen.add(key)
        texts.append(text)
    sources = [rng.choice(SOURCES) for _ in range(N_LINES)]

    def rec(row: int, text: Any = None, **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"id": f"doc-{row:05d}"}
        out["text"] = texts[row] if text is None else text
        out["source"] = sources[row]
        out.update(extra)
        return out

    base = texts
    mojibake = "café and don’t".encode().decode("cp1252")
    tag_run = "".join(chr(0xE0000 + ord(c)) for c in "IGNOREPREVIOUSINSTRUCTIONS")
    zwsp, zwj, zwnj = "\u200b", "\u200d", "\u200c"
    family = f"\U0001f468{zwj}\U0001f469{zwj}\U0001f467"

    special: dict[int, str | bytes] = {
        10: '{"id": "doc-00010", "text": "unterminated',
        20: "[1, 2, 3]",
        30: dump(
            rec(30, f"The old export had a broken byte {INVALID_UTF8_MARK} right here. {base[30]}")
        )
        .encode("utf-8")
        .replace(INVALID_UTF8_MARK.encode(), b"\xff"),
        40: dump(rec(40, 12345)),
        50: dump(rec(50, "")),
        55: dump(rec(55, "  \n\t ")),
        60: dump({"id": "doc-00060", "source": sources[60]}),
        65: dump({"id": "doc-00065", "text": None, "source": sources[65]}),
        70: dump(rec(70, inject_in_word(rng, base[70], zwsp))),
        75: dump(rec(75, inject_in_word(rng, base[75], zwsp))),
        80: dump(rec(80, f"{base[80]} Open the file named invoice_\u202egpj.exe\u202c today.")),
        85: dump(rec(85, f"{base[85]} The user \u2066admin\u2069 left a note.")),
        90: dump(rec(90, f"{base[90]}{tag_run}")),
        95: dump(rec(95, inject_in_word(rng, base[95], "\u00ad"))),
        100: dump(rec(100, f"The bell rang\u0007 twice. {base[100]}")),
        105: dump(rec(105, f"The page ended here.\u0085{base[105]}")),
        110: dump(rec(110, f"The note began. \ufeff{base[110]}")),
        115: dump(rec(115, inject_in_word(rng, base[115], "\u2060"))),
        120: dump(rec(120, f"Our family {family} spent the summer at the lake. {base[120]}")),
        125: dump(rec(125, f"من می{zwnj}خواهم امروز به کتابخانه بروم و کتاب بخوانم.")),
        130: dump(rec(130, f"यह क्{zwj}षेत्र बहुत सुंदर है और हम वहाँ फिर जाएँगे।")),
        135: dump(rec(135, "Shopping list:\n\tbread\n\tmilk\n\teggs\nThat is all for today.")),
        140: dump(rec(140, f"{base[140]} The price was 12 \ufffd and nobody knew why.")),
        145: dump(rec(145, f"We met at the {mojibake} remember the rest. {base[145]}")),
        BLANK_ROW: "",
        160: dump(rec(160, score=float("nan"))),
        170: dump(rec(170, f"Cafe\u0301 on the corner opened early. {base[170]}")),
        200: dump(rec(200, base[R0])),
        220: dump(rec(220, "  ".join(base[R0].upper().split(" ")))),
        240: dump(rec(240, inject_in_word(rng, base[R0], zwsp))),
    }

    lines: list[bytes] = []
    for row in range(N_LINES):
        item = special.get(row)
        if item is None:
            item = dump(rec(row))
        lines.append(item if isinstance(item, bytes) else item.encode("utf-8"))
    return lines


# --------------------------------------------------------------------------- readme


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def render_readme() -> str:
    faults = [f for f in FAULTS if f.check != "none"]
    negatives = [f for f in FAULTS if f.check == "none"]
    head = [
        "# sample_data",
        "",
        "`pretrain.jsonl` is a small, made-up pre-training corpus "
        f"({N_LINES} physical lines of JSON Lines) with faults planted at fixed rows, "
        "for exercising preflight's checks end to end. Records look like "
        '`{"id": "doc-00017", "text": "...", "source": "web/blog"}`; the id is '
        "`doc-%05d` of the line number. Text is random English-like prose built from an "
        "embedded word list.",
        "",
        "Generated (deterministically, `random.Random(7)`, byte-identical on every run) by:",
        "",
        "```sh",
        "python sample_data/generate.py",
        "```",
        "",
        "which writes `pretrain.jsonl`, `pretrain.faults.json` (the table below, as JSON "
        "objects `{row, check, code, note}` plus `cluster` for duplicates) and this README. "
        "Do not edit these files by hand; change `generate.py` and re-run it.",
        "",
        "**row** is the 0-based physical line number, so "
        '`sed -n "$((row+1))p" sample_data/pretrain.jsonl` shows it. Every row not listed '
        "below is a clean record: unique plain-ASCII prose, no leading/trailing whitespace.",
        "",
        "## Planted faults (must be findings)",
        "",
        "| row | check | code | what |",
        "|----:|-------|------|------|",
    ]
    body = [f"| {f.row} | {f.check} | `{f.code}` | {md_cell(f.note)} |" for f in faults]
    mid = [
        "",
        f"Row {R0} is the original of the duplicate cluster: it is clean and **not** a finding; "
        f"rows {', '.join(str(f.row) for f in faults if f.cluster is not None)} are its copies "
        f'(`"cluster": {R0}`). Row 240 is both a duplicate and a zero-width-space finding.',
        "",
        "## Negatives (must NOT be findings)",
        "",
        "| row | check | code | what |",
        "|----:|-------|------|------|",
    ]
    neg = [f"| {f.row} | {f.check} | `{f.code}` | {md_cell(f.note)} |" for f in negatives]
    tail = [
        "",
        "Notes:",
        "",
        "- Row 160 uses Python's non-standard `NaN` literal; Python's `json` accepts it, "
        "strict parsers (e.g. `orjson`) reject it.",
        "- U+0085 (row 105) is written as the escape `\\u0085`, because raw it is a line "
        "break for `str.splitlines()`. Other invisible characters are written raw.",
        "- The invalid-UTF-8 line (row 30) means the file must be read as bytes, line by "
        "line, and decoded per line.",
        "",
    ]
    return "\n".join(head + body + mid + neg + tail)


def main() -> None:
    lines = build_lines()
    (HERE / "pretrain.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    faults = [f.as_dict() for f in FAULTS]
    (HERE / "pretrain.faults.json").write_bytes(
        (json.dumps(faults, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    )
    (HERE / "README.md").write_bytes(render_readme().encode("utf-8"))
    print(f"wrote {len(lines)} lines and {len(faults)} table entries to {HERE}")


if __name__ == "__main__":
    main()
