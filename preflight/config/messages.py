"""How a rules-file mistake is worded: pydantic's errors as ``rules[2].max_fraction: ...``
lines, an unknown key with the nearest known one and the keys its section allows, and a wrong
value shown by its start (bounded whatever its size) or named by its kind."""

from __future__ import annotations

import difflib
import reprlib
from typing import Any

from pydantic import BaseModel, ValidationError

# RuleSet keys the loader sets (where the rules came from, fields named on the command line).
_INTERNAL = ("path", "sha256", "preset", "given_fields")
# A wrong value in an error message: its start is enough (bounded whatever its size).
_shown = reprlib.Repr()
_shown.maxlevel, _shown.maxlist, _shown.maxdict, _shown.maxstring = 3, 8, 8, 80
_shown.maxlong, _shown.maxother = 40, 80


def _messages(
    e: ValidationError,
    *,
    prefix: str,
    model: type[BaseModel],
    extra_keys: tuple[str, ...] = (),
    check: str | None = None,
) -> list[str]:
    out = []
    booleans: dict[int, bool] = {}  # model.labels items YAML read as booleans, by position
    for err in e.errors():
        if err["loc"][:2] == ("model", "labels") and isinstance(err.get("input"), bool):
            booleans[int(err["loc"][2])] = err["input"]  # one line for all, below
            continue
        loc = prefix
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            section = _section(model, err["loc"][:-1])
            known = [*(extra_keys if section is model else ()), *_file_keys(section)]
            owner = f"check {check!r}" if check and section is model else "this section"
            hint = _did_you_mean(key, known)
            out.append(f"{loc}: unknown key for {owner}{hint}; allowed: {', '.join(known)}")
        else:
            hint = "; write true or false, unquoted" if err["type"] == "bool_type" else ""
            # a validator's own message, without pydantic's "Value error, " before it
            msg = err["msg"].removeprefix("Value error, ")
            out.append(f"{loc}: {msg} (got {_shown.repr(err.get('input'))}){hint}")
    if booleans:
        out.insert(0, _boolean_labels(prefix, booleans))
    return out


def _boolean_labels(prefix: str, booleans: dict[int, bool]) -> str:
    """``labels: [true, false]``: YAML reads the words as booleans, which name no class."""
    words = [str(v).lower() for _, v in sorted(booleans.items())]
    quoted = ", ".join(f'"{w}"' for w in words)
    return (f"{prefix}{'.' if prefix else ''}model.labels: {', '.join(words)} read as "
            "booleans (unquoted true/false are booleans in YAML), not label names: "
            f"quote them, e.g. labels: [{quoted}]")


def _file_keys(model: type[BaseModel]) -> list[str]:
    """The keys of ``model`` a rules file may write."""
    return [k for k in model.model_fields if k not in ("params", *_INTERNAL)]


def _section(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    """The nested model a validation error's location points into."""
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            break
    return model


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" — did you mean {close[0]!r}?" if close else ""


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)
