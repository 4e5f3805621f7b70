"""Chat templates compiled and rendered the way transformers does, in a bounded sandbox.

What a chat template can ask is bounded: it renders in a sandboxed Jinja environment with a
bounded ``range``, bounded ``*``/``**``/``+`` results, an output-size limit and a time limit
per render (``TemplateLimitError``). A template that breaks a limit on a small sample
conversation is a ``ConfigError`` at load; one that breaks it on a record is that record's
``chat_template_error``. Jinja is imported only when a template is compiled.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from preflight.errors import ConfigError

# One chat-template render: items in one range(), range() items in all loops together,
# characters rendered (also the size of one `*` or `+` result) and seconds.
TEMPLATE_MAX_RANGE = 100_000
TEMPLATE_MAX_STEPS = 1_000_000
TEMPLATE_MAX_CHARS = 64 * 2**20
TEMPLATE_MAX_SECONDS = 5.0


class TemplateLimitError(ValueError):
    """A chat-template render broke one of the limits above (a record's
    ``chat_template_error``, or a ``ConfigError`` when the sample conversation breaks it)."""


# The running render's budget, per thread (a render is never shared between threads).
_budget = threading.local()
_PROBE = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "Hello, how are you?"},
          {"role": "assistant", "content": "Fine, thank you."}]


def render_limited(template: Any, **variables: Any) -> str:
    """Render a template compiled by ``compile_chat_template`` within the limits above."""
    parts: list[str] = []
    size = 0
    with _limits():
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > TEMPLATE_MAX_CHARS:
                raise TemplateLimitError(f"the chat template rendered more than "
                                         f"{TEMPLATE_MAX_CHARS // 2**20} MiB")
            _tick(0)
            parts.append(chunk)
    return "".join(parts)


@contextlib.contextmanager
def _limits() -> Iterator[None]:
    _budget.steps = 0
    _budget.deadline = time.monotonic() + TEMPLATE_MAX_SECONDS
    try:
        yield
    finally:
        _budget.deadline = None


def _tick(steps: int) -> None:
    """Count loop steps and check the clock (outside a limited render: no limits)."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is None:
        return
    _budget.steps += steps
    if _budget.steps > TEMPLATE_MAX_STEPS:
        raise TemplateLimitError(f"the chat template looped more than {TEMPLATE_MAX_STEPS:,} "
                                 "times in range() in one render")
    if time.monotonic() > deadline:
        raise TemplateLimitError(f"the chat template took more than {TEMPLATE_MAX_SECONDS:g} s "
                                 "to render one conversation")


class _Range:
    """``range`` for templates: at most ``TEMPLATE_MAX_RANGE`` items, each counted."""

    def __init__(self, *args: int) -> None:
        self._range = range(*args)
        if len(self._range) > TEMPLATE_MAX_RANGE:
            raise TemplateLimitError(f"range() of {len(self._range):,} items in the chat "
                                     f"template; at most {TEMPLATE_MAX_RANGE:,}")

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index: Any) -> Any:
        return self._range[index]

    def __contains__(self, item: object) -> bool:
        return item in self._range

    def __iter__(self) -> Iterator[int]:
        for i in self._range:
            _tick(1)
            yield i

    def __reversed__(self) -> Iterator[int]:
        for i in reversed(self._range):
            _tick(1)
            yield i


def _bounded_binop(op: Callable[[Any, Any], Any], name: str, left: Any, right: Any) -> Any:
    """``*``, ``**`` and ``+`` in a template, refusing results past the size limit before
    computing them (``"x" * 10**12``, ``10 ** 10**9``)."""
    _tick(0)
    if name == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and (
            abs(left) > 1 and right * max(abs(left).bit_length(), 1) > 8 * TEMPLATE_MAX_CHARS):
        raise TemplateLimitError("a power in the chat template is too large")
    if name == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(n, int) and (
                    len(seq) * n > TEMPLATE_MAX_CHARS):
                raise TemplateLimitError("a repetition in the chat template is too large")
    if name == "+" and isinstance(left, str | list | tuple) and isinstance(
            right, str | list | tuple) and len(left) + len(right) > TEMPLATE_MAX_CHARS:
        raise TemplateLimitError("a concatenation in the chat template is too large")
    return op(left, right)


def compile_chat_template(source: str, where: str, *,
                          probe: dict[str, Any] | None = None) -> Any:
    """Compile a Hugging Face chat template the way transformers does (sandboxed Jinja with
    loop controls and the ``{% generation %}`` tag); a broken one is a ``ConfigError``.
    With ``probe`` (the template's variables), render a three-turn sample conversation
    once: a template that breaks a limit on it would break it on every record, so it is a
    ``ConfigError`` too (any other exception is left to the records)."""
    from jinja2 import TemplateError, nodes
    from jinja2.compiler import CodeGenerator
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Codegen(CodeGenerator):
        """``a ~ b`` checked like ``+`` (after the join: it has no hook before)."""

        def visit_Concat(self, node: Any, frame: Any) -> None:
            self.write("environment.bounded_concat(")
            super().visit_Concat(node, frame)
            self.write(")")

    class _Bounded(ImmutableSandboxedEnvironment):
        code_generator_class = _Codegen
        intercepted_binops = frozenset({"*", "**", "+"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return _bounded_binop(self.binop_table[operator], operator, left, right)

        def bounded_concat(self, joined: Any) -> Any:
            _tick(0)
            if len(joined) > TEMPLATE_MAX_CHARS:
                raise TemplateLimitError("a concatenation in the chat template is too large")
            return joined

    class _Generation(Extension):
        """``{% generation %}...{% endgeneration %}`` marks assistant text; render it as is."""

        tags = {"generation"}  # noqa: RUF012 - Jinja's extension API

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env = _Bounded(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation]
    )
    env.globals["raise_exception"] = raise_exception
    env.globals["range"] = _Range
    try:
        template = env.from_string(source)
    except TemplateError as e:
        raise ConfigError(f"the chat template of {where} is not valid Jinja: {e}") from e
    if probe is not None:
        try:
            render_limited(template, messages=_PROBE, add_generation_prompt=False, **probe)
        except TemplateLimitError as e:
            raise ConfigError(f"the chat template of {where} broke a limit on a three-turn "
                              f"sample conversation: {e}; fix the template") from e
        except Exception:  # a template may reject the sample; the records will tell
            pass
    return template
