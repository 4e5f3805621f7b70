"""Plain-Python baseline: the checks a careful person would hand-write for a JSONL corpus.

Usage::

    python benchmarks/baseline_check.py CORPUS.jsonl

Reads the file line by line in binary and, for every line: parses it with ``json.loads``
(invalid UTF-8, invalid JSON or a non-object count as malformed), takes ``text`` (missing or not
a string is counted), and checks for empty/whitespace-only text, invisible characters (one
compiled character class, counted per code point), U+FFFD, mojibake, NFC, and exact duplicates
on a normalised view (NFC, casefold, format characters removed, whitespace collapsed, stripped)
hashed with BLAKE2b-128 into a dict of first rows. Prints one JSON summary line at the end.

This is meant to be a fair, straightforward baseline: neither deliberately slow nor optimised.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

INVISIBLE = re.compile(
    "["
    "\u200b-\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069"
    "\U000e0000-\U000e007f\u00ad"
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f"
    "]"
)
MOJIBAKE = re.compile("[\u00c2-\u00f4][\u0080-\u00bf\u2018-\u201e\u20ac\u2122]")
WHITESPACE = re.compile(r"\s+")


def format_char_class() -> re.Pattern[str]:
    """Compile a character class of every code point in Unicode category Cf."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)) == "Cf":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return re.compile(f"[{body}]")


FORMAT_CHARS = format_char_class()


def dedup_key(text: str) -> bytes:
    """Return the BLAKE2b-128 digest of the normalised view of ``text``."""
    view = unicodedata.normalize("NFC", text).casefold()
    view = WHITESPACE.sub(" ", FORMAT_CHARS.sub("", view)).strip()
    return hashlib.blake2b(view.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def check(path: Path) -> dict[str, object]:
    """Run every check over ``path`` and return the summary."""
    counts = Counter(
        {
            "malformed": 0,
            "missing_text": 0,
            "empty_text": 0,
            "invisible_records": 0,
            "replacement_char": 0,
            "mojibake": 0,
            "not_nfc": 0,
            "exact_duplicates": 0,
        }
    )
    invisible_cp: Counter[str] = Counter()
    first_row: dict[bytes, int] = {}
    duplicated_keys: set[bytes] = set()
    records = 0
    nbytes = 0

    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        for row, line in enumerate(fh):
            records += 1
            nbytes += len(line)
            try:
                obj = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                counts["malformed"] += 1
                continue
            if not isinstance(obj, dict):
                counts["malformed"] += 1
                continue
            text = obj.get("text")
            if not isinstance(text, str):
                counts["missing_text"] += 1
                continue
            if not text.strip():
                counts["empty_text"] += 1
                continue

            found = INVISIBLE.findall(text)
            if found:
                counts["invisible_records"] += 1
                invisible_cp.update(found)
            if "\ufffd" in text:
                counts["replacement_char"] += 1
            if MOJIBAKE.search(text):
                counts["mojibake"] += 1
            if not unicodedata.is_normalized("NFC", text):
                counts["not_nfc"] += 1

            key = dedup_key(text)
            first = first_row.setdefault(key, row)
            if first != row:
                counts["exact_duplicates"] += 1
                duplicated_keys.add(key)
    seconds = time.perf_counter() - t0

    return {
        "tool": "baseline",
        "path": str(path),
        "records": records,
        "bytes": nbytes,
        "seconds": round(seconds, 3),
        "mb_per_s": round(nbytes / 1e6 / seconds, 2) if seconds > 0 else None,
        **counts,
        "duplicate_groups": len(duplicated_keys),
        "invisible_codepoints": {f"U+{ord(ch):04X}": n for ch, n in sorted(invisible_cp.items())},
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the checks and print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="JSON Lines file to check")
    args = parser.parse_args(argv)
    print(json.dumps(check(args.corpus)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
