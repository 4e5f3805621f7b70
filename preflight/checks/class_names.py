"""Class names taken from the data (``label_range`` with string labels and no declared
classes): which names look like another class's spelling or a typo of it.

With no ``model.labels`` every distinct name is a class, so a slip in labelling creates a
class of its own that the model would then learn. From the class counts alone:

- a **variant** (``label_variant``): a name equal to another after trimming, collapsing
  spaces and case folding (``"Positive"`` beside ``"positive"``, ``"neg "`` beside
  ``"neg"``). The most used spelling is the class (ties: the trimmed one, then the first
  in sort order); every other spelling is flagged on its rows.
- a **stray** (``label_stray``): a name holding at most ``STRAY_MAX`` labels, within a
  small edit distance (optimal string alignment: insertions, deletions, substitutions and
  adjacent transpositions) of a class holding at least ``RATIO`` times more: 1 edit for
  names of up to 5 characters, 2 for longer ones. Names shorter than 3 characters (one edit
  is most of the name) or longer than ``LONGEST`` (free text) are not judged, nor is any
  name when more than half the classes hold ``STRAY_MAX`` labels or fewer: a long-tailed
  set of many rare classes is not a set of typos, and its rare names are only flagged when
  they sit next to a big class. Names that differ only in their numbers (``intent_87``
  beside ``intent_0``) are a numbered family, never a stray of one another.
"""

from __future__ import annotations

import re

STRAY_MAX = 2
RATIO = 20
LONGEST = 40
_SHORTEST = 3
_MOSTLY_RARE = 0.5
_NUMBER = re.compile(r"\d+")


def fold(name: str) -> str:
    """The spelling-free form of a name: trimmed, inner spaces collapsed, case folded."""
    return " ".join(name.split()).casefold()


def suspect_names(counts: dict[str, int], field: str) -> dict[str, tuple[str, str]]:
    """Each flagged name -> (code, detail), from the valid labels' ``counts`` per name."""
    groups: dict[str, list[str]] = {}
    for name in sorted(counts):
        groups.setdefault(fold(name), []).append(name)
    out: dict[str, tuple[str, str]] = {}
    for names in groups.values():
        names.sort(key=lambda n: (-counts[n], n != n.strip(), n))
        main = names[0]
        for name in names[1:]:
            out[name] = (
                "label_variant",
                f"{field}: {name!r} ({_labels(counts[name])}) is {main!r} "
                f"({_labels(counts[main])}) spelled another way (the same after "
                "trimming spaces and case folding)",
            )
    totals = {f: sum(counts[n] for n in names) for f, names in groups.items()}
    for folded, (target, distance) in _strays(totals).items():
        main = groups[target][0]
        for name in groups[folded]:
            n = totals[folded]
            out[name] = (
                "label_stray",
                f"{field}: {name!r} occurs {'once' if n == 1 else f'{n} times'}, "
                f"{distance} edit{'s' if distance > 1 else ''} from class {main!r} "
                f"({_labels(counts[main])}): a typo of {main!r}?",
            )
    return out


def _labels(n: int) -> str:
    return f"{n:,} label{'s' if n != 1 else ''}"


def _strays(totals: dict[str, int]) -> dict[str, tuple[str, int]]:
    """Folded names that look like a typo of a much bigger class -> (that class, edits)."""
    rare = [f for f, n in totals.items() if n <= STRAY_MAX]
    if len(rare) > _MOSTLY_RARE * len(totals):
        return {}
    rare = [f for f in rare if _SHORTEST <= len(f) <= LONGEST]
    big = [f for f, n in totals.items() if n >= RATIO and len(f) <= LONGEST + 2]
    if not rare or not big:
        return {}
    # Two names within k edits share a string that deleting at most k characters from each
    # gives (each edit costs at most one deletion per side): compare only those pairs.
    index: dict[str, list[str]] = {}
    for name in big:
        for variant in _deletions(name, 2):
            index.setdefault(variant, []).append(name)
    out: dict[str, tuple[str, int]] = {}
    for name in rare:
        limit = 1 if len(name) <= 5 else 2
        near = {g for v in _deletions(name, limit) for g in index.get(v, ())}
        found = [
            (g, d)
            for g in sorted(near)
            if totals[g] >= RATIO * totals[name] and not _numbered_alike(name, g)
            and (d := osa_distance(name, g, limit)) <= limit
        ]
        if found:  # the biggest class, then the closest
            out[name] = max(found, key=lambda p: (totals[p[0]], -p[1]))
    return out


def _numbered_alike(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ only in their numbers (``intent_87``, ``intent_0``;
    ``LABEL_17``, ``LABEL_1``): members of one numbered family, the rare one a rare class of
    a long tail, never a typo of the other."""
    return _NUMBER.sub("0", a) == _NUMBER.sub("0", b)


def _deletions(name: str, k: int) -> set[str]:
    """``name`` with up to ``k`` characters deleted, every way."""
    out = frontier = {name}
    for _ in range(k):
        frontier = {w[:i] + w[i + 1 :] for w in frontier for i in range(len(w))}
        out = out | frontier
    return out


def osa_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance between ``a`` and ``b`` (insertions, deletions,
    substitutions, adjacent transpositions), or ``limit + 1`` when it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        before, prev = prev, row
    return min(prev[-1], limit + 1)
