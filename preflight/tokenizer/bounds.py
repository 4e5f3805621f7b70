"""What a tokenizer's saved pipeline proves about its counts: the exact bounds per family.

Bounds (tested per family in ``tests/test_tokenizer.py``):

- byte-level BPE with no normalizer, ByteLevel last in its pre-tokenizer (GPT-2, RoBERTa,
  Llama 3, tiktoken): every token covers at least one byte of the text, so
  ``tokens <= utf8_bytes + 1 (prefix space) + specials`` (twice the bytes when ByteLevel adds
  a space before every split: ``prefix_per_split``), and
  no token covers more than the longest vocabulary entry, so
  ``tokens >= ceil(utf8_bytes / longest_token_bytes) + specials``;
- byte-level BPE whose pieces never join a non-space character and the space after it
  (GPT-2's or Llama 3's split, no added token holding a space; ``_splits_before_spaces``)
  and tiktoken encodings on GPT-2's, r50k's, cl100k's or o200k's pattern: a text's tokens
  are those of its start cut before such a space plus those of the rest, so a text counts
  as the sum of its pieces' counts, each distinct piece encoded once (``pieces``:
  ``preflight.token_pieces``);
- any other tokenizer: no bound is proven, every text is tokenised.

The ``TokenCounter`` (``preflight.tokenizer.counter``) applies the bounds; this module only
reads a ``tokenizer.json``'s pipeline (and tiktoken's patterns) to decide which hold.
"""

from __future__ import annotations

from typing import Any

# Pre-tokenizer steps that only cut the text (or drop some of it) before ByteLevel maps it.
_CUTTING_STEPS = frozenset({"Split", "Digits", "Punctuation", "Whitespace", "WhitespaceSplit",
                            "UnicodeScripts", "CharDelimiterSplit"})
# ... of which these drop what they cut on.
_DROPPING_STEPS = frozenset({"Whitespace", "WhitespaceSplit", "CharDelimiterSplit"})


# The pre-tokenizer steps before a byte-level BPE's ByteLevel, and that step.
_Steps = tuple[list[dict[str, Any]], dict[str, Any]]


def _byte_level_steps(spec: dict[str, Any]) -> _Steps | None:
    """The steps before a byte-level BPE's ByteLevel, and that step: None unless the model
    is BPE with no normalizer and the pre-tokenizer is ByteLevel alone or last in a Sequence
    after cutting steps only. (After ByteLevel a space is ``Ġ``, a letter to any regex: a
    later step would join a word and the space after it, and a second ByteLevel would map
    every byte twice.)"""
    if spec.get("model", {}).get("type") != "BPE" or spec.get("normalizer") is not None:
        return None
    pre = spec.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if not parts or parts[-1].get("type") != "ByteLevel":
        return None
    if any(p.get("type") not in _CUTTING_STEPS for p in parts[:-1]):
        return None
    return parts[:-1], parts[-1]


def _lower_bound_holds(spec: dict[str, Any], steps: _Steps, base: dict[str, int]) -> bool:
    """Whether no token covers more bytes than the longest vocabulary entry: no step before
    ByteLevel drops text (``Whitespace``, ``WhitespaceSplit``, ``CharDelimiterSplit``, a
    ``Removed`` behaviour), no added token swallows the whitespace beside it (``lstrip``,
    ``rstrip``), and the vocabulary holds all 256 byte symbols (a missing one is dropped,
    or fused into one unknown token with its neighbours)."""
    for part in steps[0]:
        if part.get("type") in _DROPPING_STEPS or part.get("behavior") == "Removed":
            return False
    if any(t.get("lstrip") or t.get("rstrip") for t in spec.get("added_tokens") or []):
        return False
    from tokenizers import pre_tokenizers

    return set(pre_tokenizers.ByteLevel.alphabet()) <= base.keys()


def _prefix_space_per_split(steps: _Steps, shortest_added: int) -> bool:
    """Whether ByteLevel may add a space before more than the text's start: it prefixes
    every split that does not start with one, and a cutting step before it, or an added
    token of one byte (which saves no token to pay for the next split's space), can make
    a split of every byte."""
    if not steps[1].get("add_prefix_space"):
        return False
    return bool(steps[0]) or shortest_added == 1


# Pre-tokenizer regexes none of whose matches holds a non-space character followed by a
# space (Llama 3 / GPT-4's, Qwen 2's); GPT-2's is ByteLevel's own (``use_regex``).
_SPACE_SPLITTING = frozenset({
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
})


# tiktoken patterns none of whose matches holds a non-space character followed by a space:
# GPT-2's (as released, and tiktoken's r50k/p50k with possessive quantifiers), cl100k's and
# o200k's. A match may read the end of the text (``\s++$``) only through whitespace, and a
# cut text's start ends with a non-space character.
TIKTOKEN_SPACE_SPLITTING = frozenset({
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
})


def _splits_before_spaces(spec: dict[str, Any], steps: _Steps) -> bool:
    """Whether a byte-level BPE's pieces all end before a space that follows a non-space
    character: before its ByteLevel (GPT-2's regex, ``use_regex``) only a known ``Split``
    and ``Digits``, and no added token holds whitespace or strips the whitespace after it
    (added tokens are matched before the pre-tokenizer). BPE dropout is off by then."""
    before, byte_level = steps
    regex = bool(byte_level.get("use_regex", True))
    for part in before:
        if part.get("type") == "Split":
            if (part.get("pattern", {}).get("Regex") not in _SPACE_SPLITTING
                    or part.get("behavior") != "Isolated" or part.get("invert")):
                return False
            regex = True
        elif part.get("type") != "Digits":
            return False
    if not regex:
        return False
    return not any(t.get("rstrip") or any(c.isspace() for c in t.get("content", ""))
                   for t in spec.get("added_tokens") or [])
