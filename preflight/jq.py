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
from pathlib import Path

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNPACK = {".gz": "gzip -dc", ".zst": "zstd -dc", ".zstd": "zstd -dc"}


def jq_path(keys: Sequence[str]) -> str:
    """``("splits", "my-train")`` -> ``.splits.["my-train"]``."""
    return "".join(f".{k}" if _IDENT.fullmatch(k) else f".[{json.dumps(k, ensure_ascii=False)}]"
                   for k in keys)


def jq_extract(keys: Sequence[str], file: str | None, *, each: bool = False) -> str:
    """The command that writes the records listed under ``keys`` in ``file`` as JSON Lines
    (``None``: standard input); ``each``: under ``keys`` in each element of a top-level
    array. A ``.gz``/``.zst`` file is decompressed into jq (which reads only text); the
    output is never the input (``> records.jsonl`` would empty a file of that name before
    jq reads it)."""
    return jq_command(('.[]' if each else '') + jq_path(keys) + '[]', file)


def jq_command(jq_filter: str, file: str | None, *, out: str = "records.jsonl") -> str:
    """``jq -c FILTER FILE > records.jsonl`` (``None``: standard input), as ``jq_extract``;
    ``out``: another output name."""
    jq = f"jq -c {shlex.quote(jq_filter)}"
    if file is None:
        return f"{jq} > {out}"
    if Path(file).resolve() == Path(out).resolve():
        out = Path(out).stem + "-extracted" + Path(out).suffix
    quoted = shlex.quote(file)
    suffix = Path(file).suffix.lower()
    if suffix in _UNPACK:
        return f"{_UNPACK[suffix]} {quoted} | {jq} > {out}"
    return f"{jq} {quoted} > {out}"
