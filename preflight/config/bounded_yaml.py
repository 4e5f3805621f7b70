"""YAML parsed safely and bounded: alias expansion counted (no "billion laughs"), a key
written twice refused, ``1e-4`` read as a number; and a syntax error shown at its line with a
caret and a hint."""

from __future__ import annotations

import re
from typing import Any

import yaml

# Anchors and aliases may share settings, but what they expand to is counted while the file
# is parsed, so a "billion laughs" file fails in milliseconds instead of expanding to
# billions of values. The count runs as the file is read, so a file that simply holds too
# many values fails after those, not after minutes of parsing all of them.
MAX_YAML_VALUES = 100_000
# Collections inside collections: PyYAML composes them recursively, so `[[[[...` 50,000 deep
# (100 KB) was a RecursionError; a rules file nests a handful of levels.
MAX_YAML_DEPTH = 100


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts the values the document expands to (an alias counts
    as everything it stands for) and stops past ``MAX_YAML_VALUES``, at an alias that
    refers to a value containing it, or past ``MAX_YAML_DEPTH`` nested collections; and that
    refuses a key written twice in one mapping (PyYAML keeps the last, so `max_count: 0`
    then `max_count: 100` would open the gate). A merge (``<<: *defaults``) may still be
    overridden by the mapping's own keys."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._sizes: dict[yaml.Node, int] = {}  # nodes hash by identity
        self._total = 0  # values so far, each alias counted as what it expands to
        self._aliased = False  # whether an alias added to the total
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and target not in self._sizes:
                raise yaml.composer.ComposerError(
                    None, None, f"alias *{event.anchor} refers to a value that contains it",
                    event.start_mark)
            if target is not None:
                self._count(self._sizes[target], event, aliased=True)
        elif isinstance(event, yaml.ScalarEvent):
            self._count(1, event)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            self._count(1, event)
            if self._depth >= MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"lists and mappings here nest more than {MAX_YAML_DEPTH} "
                    "levels deep; a rules file needs a few: is it the right file?",
                    event.start_mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node not in self._sizes:
            children: list[yaml.Node] = []
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            elif isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
                self._refuse_duplicate_keys(node)
            self._sizes[node] = 1 + sum(self._sizes[child] for child in children)
        return node

    def _count(self, values: int, event: yaml.Event, *, aliased: bool = False) -> None:
        self._total += values
        self._aliased = self._aliased or aliased
        if self._total <= MAX_YAML_VALUES:
            return
        if self._aliased:
            problem = (f"anchors and aliases here expand to more than {MAX_YAML_VALUES:,} "
                       "values (aliases nested inside aliases); a rules file needs far "
                       "fewer: write the values out")
        else:
            problem = (f"the file holds more than {MAX_YAML_VALUES:,} values by here; a "
                       "rules file holds a few hundred: is it the right file?")
        raise yaml.composer.ComposerError(None, None, problem, event.start_mark)

    def _refuse_duplicate_keys(self, node: yaml.MappingNode) -> None:
        # Checked as the mapping is composed, before any merge is flattened into it.
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                key_node, yaml.ScalarNode
            ):
                continue
            if key_node.tag != "tag:yaml.org,2002:str":
                raise yaml.composer.ComposerError(
                    None, None, f"the key {key_node.value!r} is not a string; every key in a "
                    "rules file is a name (quote it if you mean the text)", key_node.start_mark)
            key = (key_node.tag, self.construct_scalar(key_node))
            if key in first:
                line = first[key].start_mark.line + 1
                raise yaml.composer.ComposerError(
                    None, None, f"duplicate key {key_node.value!r} (first at line {line}); a "
                    "key may appear once in a mapping: keep the one you mean",
                    key_node.start_mark)
            first[key] = key_node


# YAML 1.1 reads `1e-4` (no dot) as a string; read it as the number everyone means (YAML
# 1.2 does), so `lr: 3e-4` is a float and `n: 1e9` a float that an integer field refuses.
_BoundedLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


class YamlWord(str):
    """``yes``, ``no``, ``on`` or ``off`` as written in a rules file: YAML 1.1's booleans,
    but also names. ``settle_words`` makes it a boolean where a switch is meant and keeps
    the word where a name is (``labels: [yes, no]``, a yes/no classifier's classes, were
    ``[True, False]``: "not a valid string (got True)")."""

    @property
    def truth(self) -> bool:
        return self.lower() in ("yes", "on")


class _RulesLoader(_BoundedLoader):
    """``_BoundedLoader`` that keeps YAML 1.1's other boolean words as ``YamlWord``."""


def _boolean(loader: _RulesLoader, node: yaml.ScalarNode) -> bool | YamlWord:
    value = loader.construct_scalar(node)
    return value.lower() == "true" if value.lower() in ("true", "false") else YamlWord(value)


_RulesLoader.add_constructor("tag:yaml.org,2002:bool", _boolean)


def yaml_load(text: str | bytes, *, words: bool = False) -> Any:
    """Parse YAML safely (plain data only), with alias expansion bounded: a
    ``yaml.YAMLError`` when the text is not valid or expands too far. With ``words``
    (a rules file), ``yes``/``no``/``on``/``off`` come back as ``YamlWord`` for
    ``settle_words``."""
    return yaml.load(text, Loader=_RulesLoader if words else _BoundedLoader)


def settle_words(data: Any, *, name: bool = False) -> Any:
    """``data`` (a rules file's mapping) with each ``YamlWord`` a boolean, as YAML 1.1
    reads it, except where a name is expected (``name``): the items of ``model.labels``
    and the values of ``fields``, which keep the word as written."""
    if isinstance(data, YamlWord):
        return str(data) if name else data.truth
    if isinstance(data, list):
        return [settle_words(v, name=name) for v in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if key == "fields" and isinstance(value, dict):
            out[key] = {k: settle_words(v, name=True) for k, v in value.items()}
        elif key == "model" and isinstance(value, dict):
            out[key] = {k: settle_words(v, name=k == "labels") for k, v in value.items()}
        else:
            out[key] = settle_words(value, name=name)
    return out


def yaml_problem(e: yaml.YAMLError, raw: bytes) -> str:
    """Where and what a YAML syntax error is: `` at line L, column C: PROBLEM``, then the
    offending line with a caret under the column, and a hint when it is about indentation."""
    if isinstance(e, yaml.reader.ReaderError):  # PyYAML's own words name "<byte string>"
        what = (f"character U+{e.character:04X} at character {e.position:,}"
                if e.encoding == "unicode" else f"byte 0x{e.character:02x} at byte {e.position:,}")
        return (f": it is not text: {what} ({e.reason}); a rules file is UTF-8 text: is it the "
                "right file?")
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    if mark is None:
        return f": {problem}"
    lines = raw.decode("utf-8", "replace").splitlines()
    out = f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if mark.line < len(lines):
        line = lines[mark.line][:200].replace("\t", "→")  # one column each, as YAML counts
        out += f"\n  {mark.line + 1} | {line}\n  {' ' * len(str(mark.line + 1))} | " \
               f"{' ' * min(mark.column, len(line))}^"
    if "\t" in problem or "'\\t'" in problem:
        out += "\n  hint: YAML indents with spaces, not tabs"
    elif any(p in problem for p in ("block end", "mapping values", "expected <block",
                                    "expected '-'", "block mapping", "block collection")):
        out += ("\n  hint: check the indentation: the items of one list (`- `) or mapping start "
                "in the same column, and a nested one starts further right (spaces, not tabs)")
    return out
