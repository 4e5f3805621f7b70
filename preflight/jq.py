"""The ``jq`` filter that a hint names, in a form jq 1.6 parses and a shell passes through.

``.KEY`` works only for an ASCII identifier (jq 1.6 rejects ``.données``); any other key is
``.["KEY"]`` with JSON escapes. The whole filter is shell-quoted (a key holding ``'`` broke
the single quotes a hint put around it), as is the file name.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def jq_path(keys: Sequence[str]) -> str:
    """``("splits", "my-train")`` -> ``.splits.["my-train"]``."""
    return "".join(f".{k}" if _IDENT.fullmatch(k) else f".[{json.dumps(k, ensure_ascii=False)}]"
                   for k in keys)


def jq_extract(keys: Sequence[str], file: str) -> str:
    """The command that writes the records listed under ``keys`` as JSON Lines."""
    return f"jq -c {shlex.quote(jq_path(keys) + '[]')} {shlex.quote(file)} > records.jsonl"
