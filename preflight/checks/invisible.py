"""``invisible_unicode``: characters a reader cannot see but a model trains on.

Zero-width characters split words, bidi controls reorder what a reviewer sees ("Trojan
Source"), tag characters smuggle hidden instructions. Legitimate uses stay allowed: ZWJ in
emoji sequences, ZWNJ/ZWJ between letters of scripts that need them (Arabic, Persian, Indic,
...), tag characters in emoji subdivision flags.

Finding rows is one vectorised regex over the batch; only rows that hit are examined per
character, to apply the allow-list and count per code point.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Annotated, Any

import polars as pl
from pydantic import AfterValidator, Field, StrictBool

from preflight.batch import Batch
from preflight.checks.base import findings
from preflight.checks.registry import register
from preflight.checks.string_fields import CharacterCheck, CharacterParams
from preflight.text import INVISIBLE_CLASS, is_invisible, snippet

_NAMED = {
    0x200B: "zero_width_space",
    0x200C: "zero_width_non_joiner",
    0x200D: "zero_width_joiner",
    0x2060: "word_joiner",
    0xFEFF: "byte_order_mark",
    0x00AD: "soft_hyphen",
    0x200E: "bidi_mark",
    0x200F: "bidi_mark",
    0x061C: "bidi_mark",
}
_BIDI_CONTROLS = {*range(0x202A, 0x202F), *range(0x2066, 0x206A)}
# Scripts whose orthography uses ZWNJ/ZWJ between letters.
_JOINING_SCRIPTS = (
    (0x0600, 0x08FF),  # Arabic, Syriac, Thaana, NKo, Arabic supplements (Persian, Urdu)
    (0x0900, 0x0DFF),  # Devanagari ... Sinhala (Indic)
    (0x0F00, 0x109F),  # Tibetan, Myanmar
    (0x1780, 0x18AF),  # Khmer, Mongolian
    (0xA8E0, 0xA8FF),  # Devanagari extended
    (0xFB50, 0xFDFF),  # Arabic presentation forms A
    (0xFE70, 0xFEFE),  # Arabic presentation forms B
)
_EMOJI_MODIFIERS = {0xFE0F, 0xFE0E, *range(0x1F3FB, 0x1F400)}
_BLACK_FLAG = 0x1F3F4
_TAG_CANCEL = 0xE007F
def code_for(cp: int) -> str:
    """The stable finding code for an invisible code point."""
    if cp in _NAMED:
        return _NAMED[cp]
    if cp in _BIDI_CONTROLS:
        return "bidi_control"
    if 0xE0000 <= cp <= 0xE007F:
        return "tag_character"
    if unicodedata.category(chr(cp)) == "Cc":
        return "control_character"
    return "format_character"


def _code_point_spec(spec: str) -> str:
    if not re.fullmatch(r"[Uu]\+[0-9A-Fa-f]{4,6}", spec):
        raise ValueError("write a code point as U+XXXX, e.g. U+200E")
    return spec


class InvisibleParams(CharacterParams):
    allow_emoji_zwj: StrictBool = Field(True, description="Allow ZWJ between emoji (👨‍👩‍👧).")
    allow_script_joiners: StrictBool = Field(
        True, description="Allow ZWNJ/ZWJ between letters of Arabic, Persian, Indic scripts."
    )
    allow_emoji_tags: StrictBool = Field(True, description="Allow tag characters in emoji flags.")
    allow: list[Annotated[str, AfterValidator(_code_point_spec)]] = Field(
        default_factory=list,
        description="Extra code points always allowed, written U+XXXX (e.g. U+200E).",
    )


@register("invisible_unicode")
class InvisibleUnicode(CharacterCheck):
    """Zero-width, bidi, tag, soft-hyphen, control and other format characters."""

    description = "Zero-width, bidi control, tag, soft hyphen, control and format characters."
    Params = InvisibleParams
    fixes = ("strip", "quarantine", "drop", "none")
    merged = ("code_points", "names", "held")

    def __init__(self, params: InvisibleParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self._allowed = {_parse_code_point(s) for s in params.allow}
        self.code_points: Counter[str] = Counter()

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        return self.flag(self.texts(
            batch, pl.col("text").str.contains(INVISIBLE_CLASS).fill_null(False)))

    def flag(self, hits: pl.DataFrame) -> pl.DataFrame | None:
        if not hits.height:
            return None
        out: dict[str, list[Any]] = {"i": [], "code": [], "detail": [], "snippet": []}
        for i, field, text in hits.iter_rows():
            per_code: dict[str, list[int]] = {}
            for at, cp in self.violations(text):
                per_code.setdefault(code_for(cp), []).append(at)
                self.code_points[f"U+{cp:04X}"] += 1
            for code, positions in per_code.items():
                points = sorted({f"U+{ord(text[p]):04X}" for p in positions})
                where = ", ".join(map(str, positions[:5])) + (" …" if len(positions) > 5 else "")
                out["i"].append(i)
                out["code"].append(code)
                out["detail"].append(
                    f"{field}: {len(positions)}× {'/'.join(points)} at char {where}"
                )
                out["snippet"].append(snippet(text, positions[0]))
        if not out["i"]:
            return None
        return findings(
            {"i": pl.Series(out["i"], dtype=pl.UInt32)},
            out["code"],
            out["detail"],
            snippet=out["snippet"],
        )

    def violations(self, text: str) -> list[tuple[int, int]]:
        """Positions and code points of the invisible characters this rule flags in
        ``text`` (the allow-list applied); ``fix``'s strip deletes exactly these."""
        return [
            (at, ord(ch))
            for at, ch in enumerate(text)
            if is_invisible(ch)
            and ord(ch) not in self._allowed
            and not self._allowed_in_context(text, at, ord(ch))
        ]

    def _allowed_in_context(self, text: str, at: int, cp: int) -> bool:
        p = self.params
        if cp == 0x200D and p.allow_emoji_zwj and _between_emoji(text, at):
            return True
        if cp in (0x200C, 0x200D) and p.allow_script_joiners and _between_script(text, at):
            return True
        return 0xE0000 <= cp <= 0xE007F and p.allow_emoji_tags and _in_emoji_flag(text, at)

    def summary(self) -> dict[str, Any]:
        return {"code_points": dict(sorted(self.code_points.items()))}


def _parse_code_point(spec: str) -> int:
    return int(spec.upper().removeprefix("U+"), 16)


def _is_pictographic(cp: int) -> bool:
    return (
        0x1F000 <= cp <= 0x1FAFF
        or 0x2600 <= cp <= 0x27BF
        or 0x2300 <= cp <= 0x23FF
        or 0x2B00 <= cp <= 0x2BFF
        or cp in (0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D)
    )


def _between_emoji(text: str, at: int) -> bool:
    before = at - 1
    while before >= 0 and ord(text[before]) in _EMOJI_MODIFIERS:
        before -= 1
    after = at + 1
    return (
        before >= 0
        and after < len(text)
        and _is_pictographic(ord(text[before]))
        and _is_pictographic(ord(text[after]))
    )


def _in_script(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _JOINING_SCRIPTS)


def _between_script(text: str, at: int) -> bool:
    return 0 < at < len(text) - 1 and _in_script(text[at - 1]) and _in_script(text[at + 1])


def _in_emoji_flag(text: str, at: int) -> bool:
    """A tag character inside 🏴 + tag letters/digits + CANCEL TAG (a subdivision flag)."""
    start = at
    while start > 0 and 0xE0020 <= ord(text[start - 1]) <= 0xE007E:
        start -= 1
    end = at
    while end < len(text) and 0xE0020 <= ord(text[end]) <= 0xE007E:
        end += 1
    return (
        start > 0
        and ord(text[start - 1]) == _BLACK_FLAG
        and end < len(text)
        and ord(text[end]) == _TAG_CANCEL
        and end - start <= 7
        and at <= end
    )
