"""YAML parsed safely and bounded: alias expansion counted (no "billion laughs"), a key
written twice refused, ``1e-4`` read as a number; and a syntax error shown at its line with a
caret and a hint."""

from __future__ import annotations

import re
from typing import Any

import yaml

# Anchors and aliases may share settings, but what they expand to is counted while the file
# is parsed, so a "billion laughs" file fails in milliseconds instead of expanding to
# billions of values.
MAX_YAML_VALUES = 100_000


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts the values each node expands to (an alias counts
    as everything it stands for) and stops past ``MAX_YAML_VALUES``, or at an alias that
    refers to a value containing it; and that refuses a key written twice in one mapping
    (PyYAML keeps the last, so `max_count: 0` then `max_count: 100` would open the gate).
    A merge (``<<: *defaults``) may still be overridden by the mapping's own keys."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._sizes: dict[yaml.Node, int] = {}  # nodes hash by identity

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and target not in self._sizes:
                raise yaml.composer.ComposerError(
                    None, None, f"alias *{event.anchor} refers to a value that contains it",
                    event.start_mark)
        node = super().compose_node(parent, index)
        if node not in self._sizes:
            children: list[yaml.Node] = []
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            elif isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
                self._refuse_duplicate_keys(node)
            size = 1 + sum(self._sizes[child] for child in children)
            if size > MAX_YAML_VALUES:
                raise yaml.composer.ComposerError(
                    None, None, f"anchors and aliases here expand to more than "
                    f"{MAX_YAML_VALUES:,} values (aliases nested inside aliases); a rules file "
                    "needs far fewer: write the values out", event.start_mark)
            self._sizes[node] = size
        return node

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


def yaml_load(text: str | bytes) -> Any:
    """Parse YAML safely (plain data only), with alias expansion bounded: a
    ``yaml.YAMLError`` when the text is not valid or expands too far."""
    return yaml.load(text, Loader=_BoundedLoader)


def yaml_problem(e: yaml.YAMLError, raw: bytes) -> str:
    """Where and what a YAML syntax error is: `` at line L, column C: PROBLEM``, then the
    offending line with a caret under the column, and a hint when it is about indentation."""
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
