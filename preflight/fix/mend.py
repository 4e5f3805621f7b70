"""Mending a record's text: repair, normalize, strip, truncate, in that order."""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from preflight.checks.base import Context
from preflight.checks.encoding import confirmed_mojibake
from preflight.checks.invisible import InvisibleUnicode
from preflight.checks.nested_strings import (
    key_clash,
    key_step,
    mended,
    odd_key,
    shown,
    strings_in,
    value_at,
)
from preflight.checks.string_fields import inner_fields, other_strings
from preflight.checks.tokens import TokenLength, token_limit
from preflight.config import RuleSet
from preflight.field_paths import record_value, split_path, with_value
from preflight.field_paths import value_at as value_in
from preflight.fix.plan import ORDER, default_fix
from preflight.text import as_text

# The actions of the character checks, which read every string field by default.
_CHARACTER = {"invisible_unicode": {"strip"}, "encoding": {"repair", "normalize"}}


class Mender:
    """Applies the transforms to one record's text fields and message contents."""

    def __init__(self, rules: RuleSet, ctx: Context, marker: str) -> None:
        self.ctx = ctx
        self.marker = marker
        self.limit = None
        invisible = next((r for r in rules.rules if r.check == "invisible_unicode"), None)
        self._invisible = InvisibleUnicode(
            InvisibleUnicode.Params(**(invisible.params if invisible else {})), ctx
        )
        # What other string fields get (an instruction beside the response text): the
        # mending of the character checks that read them (all_string_fields), never a
        # truncation.
        self._others: set[str] = set()
        self._keys: set[str] = set()  # the actions the rules set: what mends a schema's names
        for r in rules.rules:
            if r.check in _CHARACTER and r.params.get("all_string_fields", True):
                self._others |= _CHARACTER[r.check]
                if r.enabled and (r.fix or default_fix(r.check)) in _CHARACTER[r.check]:
                    self._keys.add(r.fix or default_fix(r.check))
        token_rule = next((r for r in rules.rules if r.check == "token_length"), None)
        if token_rule is not None:
            self.limit = token_limit(TokenLength.Params(**token_rule.params), rules.model)

    def apply(self, record: dict[str, Any], actions: set[str]) -> dict[str, Any]:
        before, record = record, dict(record)
        for name in self.ctx.text_fields:
            if name not in record:  # nested in objects (data.text): mended last, below
                continue
            value = record.get(name)
            if isinstance(value, str):
                record[name] = self._text(value, actions)
            elif isinstance(value, bytes):  # a binary text column stays binary
                record[name] = self._text(value.decode("utf-8"), actions).encode("utf-8")
        if others := actions & self._others:
            for name in other_strings(record, self.ctx):
                record[name] = self._text(record[name], others)
            # Strings inside lists and objects (tokens, answers.text[0]): mended in place,
            # every list's length and every other value kept (a copy of what changed: the
            # unit's record stays as read).
            for name in inner_fields(record, self.ctx):
                record[name] = mended(record[name], lambda text: self._text(text, others),
                                      keys=True)
            if any(odd_key(name) for name in record):  # the record's own keys
                renamed = {(self._text(k, others) if odd_key(k) else k): v
                           for k, v in record.items()}
                record = renamed if len(renamed) == len(record) else record
        messages = self.ctx.messages
        if messages and isinstance(record.get(messages), list):
            others = actions & self._others
            record[messages] = [self._turn(t, actions, others) for t in record[messages]]
        for name in self.ctx.text_fields:
            # A text nested in objects (data.text): its object was mended above as another
            # string's (with all_string_fields); the text gets every action, from as read.
            steps = None if name in record else split_path(name, record)
            if steps and isinstance(value := value_in(before, steps), str):
                new = self._text(value, actions)
                if new != value_in(record, steps):
                    record = with_value(record, steps, new)
        return record

    def _turn(self, turn: Any, actions: set[str], others: set[str]) -> Any:
        """A turn with its content mended as text, and its other strings (role, name, tool
        calls) as the character checks that read them mend them."""
        if not isinstance(turn, dict):
            return turn
        out = {key: mended(value, lambda text: self._text(text, others), keys=True)
               if others else value for key, value in turn.items() if key != "content"}
        content = turn.get("content")
        if "content" in turn:
            if isinstance(content, str):
                out["content"] = self._text(content, actions - {"truncate"})
            elif isinstance(content, list) and others:  # parts: read as the turn's strings
                out["content"] = mended(content, lambda text: self._text(text, others))
            else:
                out["content"] = content
        out = {key: out[key] for key in turn}  # the keys in their order
        if others and any(odd_key(k) for k in turn):  # the turn's own keys (``ro\u200ble``)
            renamed = {(self._text(k, others) if odd_key(k) else k): v for k, v in out.items()}
            out = renamed if len(renamed) == len(out) else out
        return out

    def name_mend(self) -> Callable[[str], str] | None:
        """How the rules' character actions mend a name (a struct field's, in a Parquet or
        Arrow clean output: ``writers.renames``), or None when they mend none."""
        if not self._keys:
            return None
        actions = set(self._keys)
        return lambda name: self._text(name, actions)

    def may_rename_keys(self, raw: bytes, chars: frozenset[str]) -> bool:
        """Whether a JSON unit's text may hold a key that ``renamed_keys`` renames: one of
        ``chars`` (those of the key names the checks flagged: ``Plan.keys``), as written or
        as its escape (``\\u200B``). A substring search, so that only such units are parsed."""
        if "strip" not in self._keys or not chars:
            return False
        written, escape = _key_patterns(chars)
        return (any(w in raw for w in written)
                or (b"\\" in raw and escape.search(raw) is not None))

    def renamed_keys(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with the keys that hide characters (at any depth: a turn's, a nested
        object's) renamed as the rules' character actions mend a name, every value as it
        was; the same object when none is. For a record the checks did not flag: its keys
        hold no value (null), yet the clean output must not keep their names."""
        mend = self.name_mend()
        return record if mend is None else _keys_mended(record, mend)

    def renamed_keys_clash(self, record: dict[str, Any]) -> str | None:
        """Why ``renamed_keys`` cannot rename the record's keys (two keys of one object
        made one: ``key_clash``), if so: the record is set aside, as a flagged one is."""
        mend = self.name_mend()
        return None if mend is None else key_clash(record, mend, (), schema=False)

    def unmendable_keys(self, record: dict[str, Any], actions: set[str], *, schema: bool
                        ) -> str | None:
        """Why the record's keys cannot be mended by ``actions`` (``key_clash``: two keys
        made one, or with ``schema`` — Parquet, Arrow, CSV, whose column and struct field
        names are the schema's, or the header's — such a name changed), if so: the record
        is set aside, as it is, rather than losing a value or keeping the hidden character."""
        others = actions & self._others
        if not others:
            return None
        fields = dict(record)  # the turns' keys too (messages[0]["ro\u200ble"])
        own = {k: None for k in record}  # the record's own keys: its columns
        return key_clash(own, lambda text: self._text(text, others), (), schema=schema) or (
            key_clash(fields, lambda text: self._text(text, others), (), schema=schema))

    def unmendable(self, record: dict[str, Any]) -> str | None:
        """A binary text field that is not valid UTF-8 (its checks read it with U+FFFD,
        which a fix cannot write back as the bytes it replaced), if any."""
        for name in self.ctx.text_fields:
            value = record.get(name)
            if isinstance(value, bytes):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return name
        return None

    def emptied(self, before: dict[str, Any], after: dict[str, Any]) -> str | None:
        """The text field a fix left empty (or only whitespace), if any; or the item of a
        list it did (``tokens[3]``, ``answers.text[0]``: an emptied token would be dropped
        by a tokenizer, shifting every tag after it)."""
        for name in self.ctx.text_fields:
            old = as_text(record_value(before, name))
            new = as_text(record_value(after, name))
            if old is not None and old.strip() and new is not None and not new.strip():
                return name
        for name in inner_fields(after, self.ctx):
            if after[name] is before.get(name):  # nothing inside it changed
                continue
            for path, old in strings_in(_before_value(before, after, name), (name,)):
                if not old.strip() or not any(isinstance(step, int) for step in path):
                    continue
                new = value_at(after, path)
                if isinstance(new, str) and not new.strip():
                    return shown(path)
        return None

    def _text(self, text: str, actions: set[str]) -> str:
        for action in ORDER:
            if action not in actions:
                continue
            if action == "repair":
                for start, end, char in reversed(confirmed_mojibake(text)):
                    text = text[:start] + char + text[end:]
                text = unicodedata.normalize("NFC", text)
            elif action == "normalize":
                text = unicodedata.normalize("NFC", text)
            elif action == "strip":
                drop = {at for at, _ in self._invisible.violations(text)}
                text = "".join(ch for at, ch in enumerate(text) if at not in drop)
            elif action == "truncate" and self.limit and self.ctx.tokenizer:
                text = self.ctx.tokenizer.truncate(text, self.limit, self.marker)
        return text


def _keys_mended(value: Any, mend: Callable[[str], str]) -> Any:
    """``value`` with its objects' odd keys mended (an object where two would become one
    left as it is: ``key_clash`` sets such a record aside first); the same object when
    nothing changed."""
    if isinstance(value, list):
        items = [_keys_mended(item, mend) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    fields = {key: _keys_mended(item, mend) for key, item in value.items()}
    if any(odd_key(k) for k in value):
        renamed = {(mend(k) if odd_key(k) else k): v for k, v in fields.items()}
        fields = renamed if len(renamed) == len(fields) else fields
    if list(fields) == list(value) and all(fields[k] is v for k, v in value.items()):
        return value
    return fields


@functools.lru_cache(maxsize=8)
def _key_patterns(chars: frozenset[str]) -> tuple[tuple[bytes, ...], re.Pattern[bytes]]:
    """``chars`` as written in UTF-8, and a pattern of their JSON escapes: ``\\u200b`` in
    any case, a pair's high half for one past U+FFFF, a short escape (``\\b``) where JSON
    has one."""
    units, shorts = set(), set()
    for char in chars:
        point = ord(char)
        units.add(f"{point:04x}" if point <= 0xFFFF
                  else f"{0xD800 + ((point - 0x10000) >> 10):04x}")
        if len(short := json.dumps(char)[1:-1]) == 2:  # \b, \f, \n, \r, \t, \", \\
            shorts.add(re.escape(short[1:].encode()))
    either = b"|".join([b"u(?i:" + b"|".join(u.encode() for u in sorted(units)) + b")",
                        *sorted(shorts)])
    written = tuple(c.encode("utf-8", "surrogatepass") for c in sorted(chars))
    return written, re.compile(rb"\\(?:" + either + b")")


def _before_value(before: dict[str, Any], after: dict[str, Any], name: str) -> Any:
    """``name``'s value before the fix: a key the fix renamed (a hidden character stripped
    from ``"note\ufeff"``) is the key at the same place (a rename keeps the order and the
    number of keys; a clash is set aside before), the paths below it named as after it."""
    if name in before:
        return before[name]
    keys = list(before)
    at = list(after).index(name)
    return before[keys[at]] if len(keys) == len(after) else None


def key_renames(before: Any, after: Any, path: tuple[str | int, ...] = ()
                ) -> list[tuple[str, str]]:
    """The keys a fix renamed between ``before`` and ``after`` (a record, as read and as
    mended): ``(path, new key)``, the path as findings name a key (``meta["so\\u200burce"]``,
    a list's index as ``[*]``: one entry per place, whatever the record)."""
    out: list[tuple[str, str]] = []
    if before is after:
        return out
    if isinstance(before, dict) and isinstance(after, dict) and len(before) == len(after):
        for (old, a), (new, b) in zip(before.items(), after.items(), strict=True):
            if old != new:
                out.append((_key_path((*path, old)), new))
            out += key_renames(a, b, (*path, old))
    elif isinstance(before, list | tuple) and isinstance(after, list | tuple):
        for a, b in zip(before, after, strict=False):
            if _entry(a) and _entry(b):  # a map's (key, value) entry, as Arrow reads it
                if a[0] != b[0]:
                    out.append((_key_path((*path, a[0])), b[0]))
                out += key_renames(a[1], b[1], (*path, a[0]))
            else:
                out += key_renames(a, b, (*path, -1))
    return out


def _key_path(path: tuple[str | int, ...]) -> str:
    """``shown``'s path with each list index written ``[*]``."""
    out = ""
    for step in path:
        out += "[*]" if isinstance(step, int) else key_step(str(step), first=not out)
    return out


def _entry(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
