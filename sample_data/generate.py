"""Generate the planted-fault sample corpora for preflight.

Running ``python sample_data/generate.py`` writes, next to this script, four small JSON Lines
corpora with faults planted at fixed rows, each with its table of faults:

* ``pretrain.jsonl`` -- 300 lines of ``{"id": "doc-NNNNN", "text": "...", "source": "..."}``
  made-up English-like prose (see FAULTS).
* ``sft_chat.jsonl`` -- 160 chat conversations ``{"id", "messages": [{"role", "content"}]}``
  (see CHAT_FAULTS).
* ``classification.jsonl`` -- 160 ``{"id", "text", "label"}`` records, 4 classes
  (see CLS_FAULTS).
* ``regression.jsonl`` -- 160 ``{"id", "features": [4 floats], "target"}`` records
  (see REG_FAULTS).
* ``NAME.faults.json`` -- each table as a list of objects ``{"row", "check", "code", "note"}``
  (plus ``"cluster"`` for duplicates, ``"field"`` and ``"needs"`` where useful), so tests can
  assert against it.
* ``README.md`` -- a description of the files and a table of every planted fault.

"row" is the 0-based physical line number, so
``sed -n "$((row+1))p" sample_data/NAME.jsonl`` prints it. The output is deterministic (one
fixed ``random.Random`` seed per corpus): running the script twice gives byte-identical files.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
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
    # Where in the record the fault sits ("label", "messages[3].content", "features[2]").
    field: str | None = None
    # Settings the finding depends on, as "section.key": value ("model.context_window").
    needs: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "row": self.row,
            "check": self.check,
            "code": self.code,
            "note": self.note,
        }
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.field is not None:
            out["field"] = self.field
        if self.needs is not None:
            out["needs"] = self.needs
        return out


CONTEXT_WINDOW = 4096
_CTX = {"model.context_window": CONTEXT_WINDOW}

FAULTS: list[Fault] = [
    Fault(10, "malformed", "invalid_json", 'truncated: {"id": "doc-00010", "text": "unterminated'),
    Fault(20, "malformed", "not_an_object", "valid JSON but an array: [1, 2, 3]"),
    Fault(30, "malformed", "invalid_utf8", "JSON object whose text holds a raw 0xFF byte"),
    Fault(40, "schema", "wrong_type", '"text" is the number 12345'),
    Fault(40, "token_length", "not_text", '"text" is the number 12345: nothing to count',
          needs=_CTX),
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
    # The same three copies are near-duplicates too (Jaccard 1 after folding).
    *(Fault(row, "near_duplicate", "near_duplicate_of", f"copy of row {R0}", R0)
      for row in (200, 220, 240)),
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


# --------------------------------------------------------------------------- more corpora
#
# Three more small corpora, one per task (chat SFT, classification, regression), each with
# its own seed so that none of them moves the random stream of pretrain.jsonl.

N_CHAT = 160
N_CLS = 160
N_REG = 160
CHAT_SEED = 71
CLS_SEED = 72
REG_SEED = 73
NUM_CLASSES = 4
LONG_WORDS = 6000  # words in the one over-long assistant turn (~33 KB of ASCII)
CLS_R0 = 30  # the original of the classification duplicate pair (clean, NOT a finding)

_FP16 = {"dtype": "fp16"}

CHAT_FAULTS: list[Fault] = [
    Fault(
        8,
        "chat_format",
        "unknown_role",
        'turn 2 has role "bot" (user, assistant, bot, user, assistant)',
        field="messages[2].role",
    ),
    Fault(
        16,
        "chat_format",
        "system_not_first",
        "system turn in the middle (user, assistant, system, user, assistant)",
        field="messages[2].role",
    ),
    Fault(
        24,
        "chat_format",
        "not_alternating",
        "two user turns in a row (system, user, user, assistant)",
        field="messages[2].role",
    ),
    Fault(
        32,
        "chat_format",
        "empty_content",
        'assistant content "" (a later assistant turn is non-empty)',
        field="messages[1].content",
    ),
    Fault(
        40,
        "chat_format",
        "content_not_string",
        "assistant content is the number 42",
        field="messages[1].content",
    ),
    Fault(48, "chat_format", "no_assistant_turn", "only system + user", field="messages"),
    Fault(56, "chat_format", "empty_conversation", "messages is []", field="messages"),
    Fault(64, "chat_format", "not_a_list", "messages is a string", field="messages"),
    Fault(
        64,
        "schema",
        "wrong_type",
        "messages is a string, not an array (schema types the declared messages field as an array)",
        field="messages",
    ),
    Fault(
        72,
        "chat_format",
        "missing_role",
        'turn 2 is {"content": ...} with no "role"',
        field="messages[2]",
    ),
    Fault(80, "chat_format", "turn_not_object", "turn 2 is a plain string", field="messages[2]"),
    Fault(
        96,
        "invisible_unicode",
        "zero_width_space",
        "U+200B inside a word of the first user turn",
        field="messages[0].content",
    ),
    Fault(
        112,
        "token_length",
        "too_long",
        f"one assistant turn of over {LONG_WORDS:,} words; with "
        f"context_window {CONTEXT_WINDOW} and any tokenizer or the estimate",
        field="messages[1].content",
        needs=_CTX,
    ),
    Fault(
        128,
        "none",
        "allowed_tool_turn",
        "user, assistant, tool, assistant: a tool turn "
        "right after an assistant turn and followed by one",
    ),
    Fault(136, "none", "allowed_persian_zwnj", "Persian turns with U+200C ZWNJ used correctly"),
    Fault(
        144,
        "none",
        "allowed_emoji_zwj",
        "emoji family U+1F468 U+200D U+1F469 U+200D U+1F467 in a user turn",
    ),
]

CLS_FAULTS: list[Fault] = [
    Fault(
        12,
        "label_range",
        "label_out_of_range",
        f"label 4 with num_classes {NUM_CLASSES}",
        field="label",
        needs={"model.num_classes": NUM_CLASSES},
    ),
    Fault(
        24,
        "label_range",
        "label_out_of_range",
        "label -1",
        field="label",
        needs={"model.num_classes": NUM_CLASSES},
    ),
    Fault(36, "label_range", "label_wrong_type", 'label "2" (a string)', field="label"),
    Fault(
        48, "label_range", "label_wrong_type", "label 1.5 (a float with a fraction)", field="label"
    ),
    Fault(60, "label_range", "label_wrong_type", "label true (a boolean)", field="label"),
    Fault(72, "label_range", "label_null", "label null", field="label"),
    Fault(
        72,
        "schema",
        "missing_field",
        "label null (schema requires the declared label field by default)",
        field="label",
    ),
    Fault(84, "empty", "empty_text", '"text" is "" (label valid)', field="text"),
    Fault(96, "none", "valid_zero_label", "label 0 (an integer)", field="label"),
    Fault(108, "none", "valid_zero_label", "label 0.0 (a whole float is class 0)", field="label"),
    Fault(
        120,
        "exact_duplicate",
        "exact_duplicate_of",
        f"identical text (and label) to row {CLS_R0}",
        CLS_R0,
        field="text",
    ),
]

REG_FAULTS: list[Fault] = [
    Fault(10, "numeric", "nan", "target NaN (unquoted literal)", field="target"),
    Fault(20, "numeric", "pos_inf", "target Infinity (unquoted literal)", field="target"),
    Fault(30, "numeric", "neg_inf", "target -Infinity (unquoted literal)", field="target"),
    Fault(40, "numeric", "null", "target null", field="target"),
    Fault(
        40,
        "schema",
        "missing_field",
        "target null (schema requires the declared target field by default)",
        field="target",
    ),
    Fault(50, "numeric", "nan_string", 'target "NaN" (a string)', field="target"),
    Fault(
        60, "numeric", "inf_string", 'target "1e400" (a string; float() gives inf)', field="target"
    ),
    Fault(70, "numeric", "numeric_string", 'target "3.5" (a string)', field="target"),
    Fault(80, "numeric", "not_a_number", 'target "abc"', field="target"),
    Fault(
        90, "numeric", "outlier", "target 1e6: robust z in the tens of thousands", field="target"
    ),
    Fault(
        90,
        "numeric",
        "dtype_overflow",
        "target 1e6 > 65504; with dtype: fp16",
        field="target",
        needs=_FP16,
    ),
    Fault(
        100,
        "numeric",
        "dtype_overflow",
        "target 70000.0 > 65504; with dtype: fp16",
        field="target",
        needs=_FP16,
    ),
    Fault(100, "numeric", "outlier", "target 70000.0: robust z in the thousands", field="target"),
    Fault(
        110,
        "numeric",
        "nan",
        "features[2] is NaN (unquoted literal); target clean",
        field="features[2]",
    ),
    Fault(
        120,
        "numeric",
        "outlier",
        "target 65504.0 (fp16's largest finite value): an "
        "outlier, but NOT dtype_overflow with dtype: fp16",
        field="target",
    ),
    Fault(130, "none", "valid_zero_target", "target 0 (an integer)", field="target"),
    Fault(135, "none", "valid_zero_target", "target 0.0", field="target"),
    Fault(140, "none", "valid_negative_target", "target -1.5", field="target"),
    Fault(145, "none", "valid_negative_target", "target -0.25", field="target"),
]


class Prose:
    """Unique made-up prose: no two pieces share a ``dedup_key`` within one corpus."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()

    def text(self, lo: int = 1, hi: int = 4) -> str:
        while True:
            text = " ".join(make_sentence(self.rng) for _ in range(self.rng.randint(lo, hi)))
            key = dedup_key(text)
            if key not in self.seen and len(key) >= 12:
                self.seen.add(key)
                return text


def turn(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


def _encode(lines: list[str]) -> list[bytes]:
    return [line.encode("utf-8") for line in lines]


def build_chat_lines() -> list[bytes]:
    rng = random.Random(CHAT_SEED)
    p = Prose(rng)

    def clean() -> list[dict[str, Any]]:
        turns = []
        if rng.random() < 0.4:
            turns.append(turn("system", "You are a helpful assistant. " + p.text(1, 2)))
        for _ in range(rng.randint(1, 3)):
            turns += [turn("user", p.text(1, 3)), turn("assistant", p.text(1, 5))]
            if rng.random() < 0.08:
                tool = json.dumps({"result": p.text(1, 1)})
                turns += [turn("tool", tool), turn("assistant", p.text(1, 3))]
        return turns

    convs: list[Any] = [clean() for _ in range(N_CHAT)]

    def ua(n: int = 1) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            out += [turn("user", p.text(1, 3)), turn("assistant", p.text(1, 4))]
        return out

    def sys_turn() -> dict[str, Any]:
        return turn("system", "You are a helpful assistant. " + p.text(1, 1))

    long_words: list[str] = []
    while len(long_words) < LONG_WORDS:
        long_words += make_sentence(rng).split(" ")
    zwnj, zwj = "\u200c", "\u200d"
    family = f"\U0001f468{zwj}\U0001f469{zwj}\U0001f467"

    convs[8] = [*ua(), turn("bot", p.text()), *ua()]
    convs[16] = [*ua(), sys_turn(), *ua()]
    convs[24] = [
        sys_turn(),
        turn("user", p.text()),
        turn("user", p.text()),
        turn("assistant", p.text()),
    ]
    convs[32] = [turn("user", p.text()), turn("assistant", ""), *ua()]
    convs[40] = [turn("user", p.text()), turn("assistant", 42), *ua()]
    convs[48] = [sys_turn(), turn("user", p.text())]
    convs[56] = []
    convs[64] = "user: " + p.text(1, 1) + " assistant: " + p.text(1, 1)
    convs[72] = [*ua(), {"content": p.text()}, *ua()]
    convs[80] = [*ua(), p.text(1, 1), *ua()]
    convs[96] = ua(2)
    convs[96][0]["content"] = inject_in_word(rng, convs[96][0]["content"], "\u200b")
    convs[112] = [turn("user", p.text(1, 2)), turn("assistant", " ".join(long_words))]
    convs[128] = [
        turn("user", "What is the weather in the harbor town today?"),
        turn("assistant", "Let me look that up for you."),
        turn("tool", json.dumps({"town": "harbor", "temperature_c": 14, "sky": "cloudy"})),
        turn("assistant", "It is cloudy in the harbor town today, about 14 degrees."),
    ]
    convs[136] = [
        turn("user", f"من می{zwnj}خواهم امروز به کتابخانه بروم. ساعت کاری آن چیست؟"),
        turn(
            "assistant",
            f"کتابخانه از ساعت نه صبح باز است و کتاب{zwnj}ها را می{zwnj}توانید "
            "تا عصر امانت بگیرید.",
        ),
    ]
    convs[144] = [
        turn("user", f"Our family {family} wants a quiet trip to the island. Any ideas?"),
        turn("assistant", "Take the early boat, walk the coast road, and bring warm coats."),
    ]
    return _encode([dump({"id": f"chat-{row:05d}", "messages": m}) for row, m in enumerate(convs)])


def build_classification_lines() -> list[bytes]:
    rng = random.Random(CLS_SEED)
    p = Prose(rng)
    texts = [p.text() for _ in range(N_CLS)]
    labels: list[Any] = [rng.randrange(NUM_CLASSES) for _ in range(N_CLS)]
    planted_labels: dict[int, Any] = {
        12: 4,
        24: -1,
        36: "2",
        48: 1.5,
        60: True,
        72: None,
        96: 0,
        108: 0.0,
    }
    for row, label in planted_labels.items():
        labels[row] = label
    texts[84] = ""
    texts[120], labels[120] = texts[CLS_R0], labels[CLS_R0]
    return _encode(
        [
            dump({"id": f"cls-{row:05d}", "text": texts[row], "label": labels[row]})
            for row in range(N_CLS)
        ]
    )


def build_regression_lines() -> list[bytes]:
    rng = random.Random(REG_SEED)
    # Uniform, not Gaussian: no tails, so 0 and the small negatives (the negatives below)
    # sit within ~1.6 robust z of the median, and only the planted values are outliers.
    features = [[round(rng.uniform(0.05, 0.95), 4) for _ in range(4)] for _ in range(N_REG)]
    targets: list[Any] = [round(rng.uniform(5.0, 95.0), 2) for _ in range(N_REG)]
    planted: dict[int, Any] = {
        10: float("nan"),
        20: float("inf"),
        30: float("-inf"),
        40: None,
        50: "NaN",
        60: "1e400",
        70: "3.5",
        80: "abc",
        90: 1e6,
        100: 70000.0,
        120: 65504.0,
        130: 0,
        135: 0.0,
        140: -1.5,
        145: -0.25,
    }
    for row, target in planted.items():
        targets[row] = target
    features[110][2] = float("nan")
    # json.dumps writes NaN / Infinity / -Infinity as unquoted literals (allow_nan=True).
    return _encode(
        [
            dump({"id": f"reg-{row:05d}", "features": features[row], "target": targets[row]})
            for row in range(N_REG)
        ]
    )


# --------------------------------------------------------------------------- readme


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def fault_table(faults: list[Fault], *, fields: bool) -> list[str]:
    head = "| row | check | code | field | what |" if fields else "| row | check | code | what |"
    rule = "|----:|-------|------|-------|------|" if fields else "|----:|-------|------|------|"
    out = [head, rule]
    for f in faults:
        what = md_cell(f.note)
        if f.needs:
            what += " (needs " + ", ".join(f"'{k}: {v}'" for k, v in f.needs.items()) + ")"
        if f.cluster is not None and fields:
            what += f" (cluster {f.cluster})"
        cells = [str(f.row), f.check, f"`{f.code}`"]
        if fields:
            cells.append(f"`{f.field}`" if f.field else "")
        out.append("| " + " | ".join([*cells, what]) + " |")
    return out


def corpus_tables(faults: list[Fault]) -> list[str]:
    return [
        "### Planted faults (must be findings)",
        "",
        *fault_table([f for f in faults if f.check != "none"], fields=True),
        "",
        "### Negatives (must NOT be findings)",
        "",
        *fault_table([f for f in faults if f.check == "none"], fields=True),
        "",
    ]


def robust_z_rows(lines: list[bytes]) -> list[str]:
    """The robust z (0.6745 * (x - median) / MAD) of every listed target, over all finite
    numeric targets, as a gate computing median/MAD would see them."""
    targets = [json.loads(line)["target"] for line in lines]
    numbers = [
        float(t)
        for t in targets
        if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
    ]
    med = statistics.median(numbers)
    mad = statistics.median(abs(x - med) for x in numbers)
    clean = [
        0.6745 * abs(float(t) - med) / mad
        for row, t in enumerate(targets)
        if row not in {f.row for f in REG_FAULTS} and isinstance(t, float)
    ]
    out = [
        f"Over the {len(numbers)} finite numeric targets: median {med:g}, MAD {mad:g}; the "
        f"clean rows reach at most robust z {max(clean):.2f}. Listed values:",
        "",
        "| row | target | robust z |",
        "|----:|-------:|---------:|",
    ]
    for row in sorted({f.row for f in REG_FAULTS if f.field == "target"}):
        t = targets[row]
        if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t):
            out.append(f"| {row} | {t!r} | {0.6745 * abs(float(t) - med) / mad:,.2f} |")
    return out


def render_readme(corpora: dict[str, list[bytes]]) -> str:
    faults = [f for f in FAULTS if f.check != "none"]
    negatives = [f for f in FAULTS if f.check == "none"]
    n = {name: len(lines) for name, lines in corpora.items()}
    intro = [
        "# sample_data",
        "",
        "Small, made-up corpora in JSON Lines with faults planted at fixed rows, for "
        "exercising preflight's checks end to end:",
        "",
        "| file | lines | task | records |",
        "|------|------:|------|---------|",
        f"| `pretrain.jsonl` | {n['pretrain']} | pre-training text | "
        '`{"id": "doc-00017", "text": "...", "source": "web/blog"}` |',
        f"| `sft_chat.jsonl` | {n['sft_chat']} | chat SFT | "
        '`{"id": "chat-00017", "messages": [{"role": "user", "content": "..."}, ...]}` |',
        f"| `classification.jsonl` | {n['classification']} | classification "
        f"({NUM_CLASSES} classes) | "
        '`{"id": "cls-00017", "text": "...", "label": 2}` |',
        f"| `regression.jsonl` | {n['regression']} | regression | "
        '`{"id": "reg-00017", "features": [0.12, 0.5, 0.33, 0.9], "target": 47.25}` |',
        "",
        "Generated (deterministically, fixed `random.Random` seeds, byte-identical on every "
        "run) by:",
        "",
        "```sh",
        "python sample_data/generate.py",
        "```",
        "",
        "which writes each `NAME.jsonl`, its `NAME.faults.json` (the tables below, as JSON "
        "objects `{row, check, code, note}` plus, where useful, `cluster` (the kept row of a "
        "duplicate group), `field` (where in the record the fault sits) and `needs` (the "
        'settings the finding depends on, e.g. `{"model.context_window": 4096}`)) and this '
        "README. Do not edit these files by hand; change `generate.py` and re-run it.",
        "",
        "**row** is the 0-based physical line number, so "
        '`sed -n "$((row+1))p" sample_data/NAME.jsonl` shows it; ids are `PREFIX-%05d` of '
        "the row. Text is random English-like prose built from an embedded word list. Every "
        "row not listed in a corpus's tables is a clean record: unique plain-ASCII prose, no "
        "leading/trailing whitespace, in-range values. A table lists a row once per code a "
        "correct gate must give it (with the corpus's suggested rules); the negatives must "
        "give none.",
        "",
    ]
    head = [
        "## pretrain.jsonl",
        "",
        f"{N_LINES} physical lines; `random.Random({SEED})`. Default rules (no rules file).",
        "",
        "### Planted faults (must be findings)",
        "",
        *fault_table(faults, fields=False),
    ]
    mid = [
        "",
        f"Row {R0} is the original of the duplicate cluster: it is clean and **not** a finding; "
        f"rows {', '.join(str(f.row) for f in faults if f.cluster is not None)} are its copies "
        f'(`"cluster": {R0}`). Row 240 is both a duplicate and a zero-width-space finding.',
        "",
        "### Negatives (must NOT be findings)",
        "",
        *fault_table(negatives, fields=False),
    ]
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
    chat = [
        "## sft_chat.jsonl",
        "",
        f"{N_CHAT} lines; `random.Random({CHAT_SEED})`. Suggested rules: "
        "`fields: {messages: messages, id: id}`, "
        f"`model: {{context_window: {CONTEXT_WINDOW}}}`, with the `chat_format`, "
        "`invisible_unicode`, `token_length`, `schema` and `exact_duplicate` checks. A clean "
        "conversation is an optional system turn first, then user/assistant turns "
        "alternating, ending with an assistant turn, every content a non-empty string; some "
        "clean rows also have a `tool` turn right after an assistant turn and followed by an "
        "assistant turn. Every content string in the file is unique, and every clean "
        f"conversation is far below {CONTEXT_WINDOW} tokens (under 2 KB).",
        "",
        *corpus_tables(CHAT_FAULTS),
        "Notes:",
        "",
        "- Alternation is judged on the user/assistant roles. The rows with an unknown role "
        "(8), a missing role (72) or a turn that is not an object (80) put that turn between "
        "an assistant turn and a user turn, and row 16's system turn sits in the same place: "
        "with that turn left out the rest alternates, so each is its own code only (not "
        "`not_alternating`). Rows 32 and 40 still have a later, valid assistant turn, so "
        "they are not `no_assistant_turn`; row 56 (`[]`) is `empty_conversation` only.",
        "- Row 64's messages is a string, so the text checks see no content there.",
        "- The `empty` check reads the text fields, not `messages[*].content`: an empty "
        "assistant turn is `chat_format`'s `empty_content` only.",
        f"- Row 112 renders to over {LONG_WORDS:,} words (~36 KB): over {CONTEXT_WINDOW} "
        "tokens with any subword tokenizer and with the UTF-8 bytes / 3 estimate.",
        "- Row 136 is Persian (Arabic script) with ZWNJ between letters; row 144's ZWJ joins "
        "an emoji sequence. Both are allowed by default.",
        "",
    ]
    cls = [
        "## classification.jsonl",
        "",
        f"{N_CLS} lines; `random.Random({CLS_SEED})`. Suggested rules: "
        "`fields: {text: text, label: label, id: id}`, "
        f"`model: {{num_classes: {NUM_CLASSES}}}`, with the `label_range`, `schema`, `empty` "
        "and `exact_duplicate` checks. Clean labels are integers drawn uniformly from "
        f"0..{NUM_CLASSES - 1}, so every class occurs in clean rows (no `class_absent`) and "
        "none dominates.",
        "",
        *corpus_tables(CLS_FAULTS),
        "Notes:",
        "",
        f"- Row {CLS_R0} is the original of the duplicate pair: clean and **not** a finding; "
        f'row 120 is its copy (`"cluster": {CLS_R0}`), with the same label.',
        "- Row 84's empty text has a valid label; empty text is never grouped as a duplicate.",
        "- The label column mixes integers, floats, a string, a boolean and null, so a "
        "reader cannot type it as one Arrow column.",
        "",
    ]
    reg = [
        "## regression.jsonl",
        "",
        f"{N_REG} lines; `random.Random({REG_SEED})`. Suggested rules: "
        "`fields: {target: target, features: features, id: id}` with the `numeric` check "
        "(its robust outliers on the target; `dtype: fp16` for the rows whose `needs` says "
        "so) and `schema`. Clean targets are uniform in [5, 95] with 2 decimals (uniform, not "
        "Gaussian: no tails, so 0 and the small negatives stay near the bulk); clean features "
        "are four values uniform in [0.05, 0.95] with 4 decimals.",
        "",
        *corpus_tables(REG_FAULTS),
        "Notes:",
        "",
        "- Rows 10, 20, 30 and 110 hold Python's unquoted `NaN`, `Infinity` and `-Infinity` "
        "literals (Python's `json` reads them; strict parsers reject the line). Non-finite "
        "values are `nan` / `pos_inf` / `neg_inf` only: not outliers, not `dtype_overflow`. "
        "String values (rows 50-80) are their string code only.",
        "- 1e6 (row 90) and 70000.0 (row 100) both overflow fp16 (largest finite 65504) and "
        "are outliers; 65504.0 (row 120) is an outlier but fits fp16. Without `dtype: fp16` "
        "the `dtype_overflow` entries do not apply (bf16 and fp32 hold all three).",
        "",
        *robust_z_rows(corpora["regression"]),
        "",
    ]
    return "\n".join(intro + head + mid + tail + chat + cls + reg)


CORPORA: dict[str, tuple[Any, list[Fault]]] = {
    "pretrain": (build_lines, FAULTS),
    "sft_chat": (build_chat_lines, CHAT_FAULTS),
    "classification": (build_classification_lines, CLS_FAULTS),
    "regression": (build_regression_lines, REG_FAULTS),
}


def main() -> None:
    written: dict[str, list[bytes]] = {}
    for name, (build, faults) in CORPORA.items():
        lines = build()
        written[name] = lines
        (HERE / f"{name}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        table = [f.as_dict() for f in faults]
        (HERE / f"{name}.faults.json").write_bytes(
            (json.dumps(table, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        )
        print(f"{name}: wrote {len(lines)} lines and {len(table)} table entries")
    (HERE / "README.md").write_bytes(render_readme(written).encode("utf-8"))


if __name__ == "__main__":
    main()
