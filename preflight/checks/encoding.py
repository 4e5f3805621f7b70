"""``encoding``: text damaged on its way in — U+FFFD, lone surrogates, mojibake, not NFC.

Mojibake is UTF-8 that was decoded as cp1252/Latin-1 ("cafÃ©", "donâ€™t"). A vectorised
regex finds candidate sequences (a UTF-8 lead byte's Latin-1 character followed by
continuation-byte characters); each candidate is confirmed by re-encoding it and decoding as
UTF-8, so Persian, Greek or German text is never flagged by accident.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import polars as pl
from pydantic import Field, StrictBool

from preflight.batch import Batch
from preflight.checks.base import findings
from preflight.checks.registry import register
from preflight.checks.string_fields import CharacterCheck, CharacterParams
from preflight.text import NFC_CANDIDATE, non_ascii, snippet

# Characters cp1252 maps the bytes 0x80-0xBF to, plus the Latin-1 C1 controls and U+00A0-BF.
_CONTINUATION = (
    "\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
    "\u2013\u2014\u2018-\u201a\u201c-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122"
)
_MOJIBAKE_PY = re.compile(f"[\u00c2-\u00f4][{_CONTINUATION}]{{1,3}}")
_MOJIBAKE_RUST = "[\\x{C2}-\\x{F4}][" + "".join(
    f"\\x{{{ord(c):04X}}}" if c != "-" else "-" for c in _CONTINUATION
) + "]"


def unmojibake(seq: str) -> str | None:
    """The character a mojibake sequence stood for, or None when it is not mojibake."""
    try:
        raw = b"".join(
            c.encode("cp1252") if c.encode("cp1252", "ignore") else c.encode("latin-1")
            for c in seq
        )
    except UnicodeEncodeError:
        return None
    need = {0xC: 2, 0xD: 2, 0xE: 3, 0xF: 4}.get(raw[0] >> 4)
    if need is None or len(raw) < need:
        return None
    try:
        return raw[:need].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _strong(ch: str) -> bool:
    """Characters whose mojibake form almost never occurs in real text on its own: Latin-1
    and Latin Extended-A letters, general punctuation, currency and letterlike symbols, and
    anything beyond the BMP (four mojibake characters in a row: emoji and the like)."""
    cp = ord(ch)
    return (
        0x80 <= cp <= 0x17F
        or 0x2000 <= cp <= 0x206F
        or 0x20A0 <= cp <= 0x214F
        or cp > 0xFFFF
    )


def confirmed_mojibake(text: str) -> list[tuple[int, int, str]]:
    """The mojibake sequences of ``text`` as ``(start, end, character it stood for)``: the
    characters ``text[start:end]`` are the UTF-8 bytes of that character read one byte per
    character (cp1252 and Latin-1 are single-byte encodings), so ``end - start`` is its
    UTF-8 length.

    A sequence that decodes to a Latin letter or punctuation counts alone ("cafÃ©",
    "donâ€™t"). One that decodes to anything else counts only next to another such sequence
    (mojibaked Cyrillic or CJK comes in runs), because a single one is usually real
    typography: German „groß“ or French « café » with a no-break space."""
    found = [(m, r) for m in _MOJIBAKE_PY.finditer(text) if (r := unmojibake(m.group()))]
    out = []
    for k, (m, r) in enumerate(found):
        before = k > 0 and found[k - 1][0].end() == m.start()
        after = k + 1 < len(found) and found[k + 1][0].start() == m.end()
        if _strong(r) or before or after:
            out.append((m.start(), m.start() + len(r.encode()), r))
    return out


class EncodingParams(CharacterParams):
    replacement_character: StrictBool = Field(True, description="Flag U+FFFD.")
    lone_surrogate: StrictBool = Field(True, description="Flag lone surrogates (\\ud800 escapes).")
    mojibake: StrictBool = Field(True, description="Flag UTF-8 decoded as cp1252/Latin-1.")
    nfc: StrictBool = Field(True, description="Flag text that is not in Unicode NFC.")


@register("encoding")
class Encoding(CharacterCheck):
    """U+FFFD, lone surrogates, mojibake and text not in NFC."""

    description = "U+FFFD, lone surrogates, mojibake (UTF-8 read as cp1252), text not in NFC."
    Params = EncodingParams
    fixes = ("repair", "normalize", "quarantine", "drop", "none")

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        p = self.params
        # Every problem here needs a non-ASCII character, and NFC can only differ where a
        # character outside the NFC-stable ranges appears (typographic punctuation, Cyrillic,
        # CJK and the like are inside): narrow the rows before the costly steps.
        wide = self.texts(batch, non_ascii(pl.col("text")))
        surrogates = None
        if p.lone_surrogate and batch.lone_surrogates:
            at = list(batch.lone_surrogates.items())
            surrogates = findings(
                {"i": pl.Series([i for i, _ in at], dtype=pl.UInt32)}, "lone_surrogate",
                [f"{count} lone surrogate(s) (read as U+FFFD)" for _, count in at])
        found = [f for f in (surrogates, self.flag(wide, batch.lone_surrogates))
                 if f is not None]
        return pl.concat(found).sort("i", maintain_order=True) if found else None

    def flag(self, wide: pl.DataFrame, surrogates: Any = ()) -> pl.DataFrame | None:
        """``CharacterCheck.flag``; ``surrogates``: the records whose U+FFFD are lone
        surrogates as read (``lone_surrogate``, not ``replacement_character``)."""
        p = self.params
        text = pl.col("text")
        flagged = wide.with_columns(
            fffd=text.str.contains("\ufffd", literal=True) & p.replacement_character,
            moji=text.str.contains(_MOJIBAKE_RUST) & p.mojibake,
            nfc=text.str.contains(NFC_CANDIDATE) & p.nfc,
        )
        flagged = flagged.with_columns(
            nfc=pl.when(pl.col("nfc")).then(text.str.normalize("NFC") != text).otherwise(False)
        ).filter(pl.col("fffd") | pl.col("moji") | pl.col("nfc"))
        out: dict[str, list[Any]] = {"i": [], "code": [], "detail": [], "snippet": []}

        def add(i: int, code: str, detail: str, snip: str | None) -> None:
            out["i"].append(i)
            out["code"].append(code)
            out["detail"].append(detail)
            out["snippet"].append(snip)

        for i, field, value, fffd, moji, nfc in flagged.iter_rows():
            if fffd and i not in surrogates:
                at = value.index("\ufffd")
                add(i, "replacement_character",
                    f"{field}: {value.count(chr(0xFFFD))}× U+FFFD, first at char {at}",
                    snippet(value, at))
            if moji:
                repaired = confirmed_mojibake(value)
                if repaired:
                    start, end, r = repaired[0]
                    seq = " ".join(f"U+{ord(c):04X}" for c in value[start:end])
                    add(i, "mojibake",
                        f"{field}: {len(repaired)} sequence(s) like {seq} → U+{ord(r):04X}",
                        snippet(value, start))
            if nfc:
                at = _first_difference(value, unicodedata.normalize("NFC", value))
                add(i, "not_nfc", f"{field}: not NFC from char {at}", snippet(value, at))
        if not out["i"]:
            return None
        frame = findings(
            {"i": pl.Series(out["i"], dtype=pl.UInt32)},
            out["code"],
            out["detail"],
            snippet=out["snippet"],
        )
        return frame.sort("i", maintain_order=True)


def _first_difference(a: str, b: str) -> int:
    for at, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return at
    return min(len(a), len(b))
