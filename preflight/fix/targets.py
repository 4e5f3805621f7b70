"""Where ``fix`` writes: the clean output's format, and the output paths it refuses (the
input or another file it reads, a link, a folder, two outputs on one path...)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from preflight.choices import OUT_NAMES
from preflight.config import RuleSet
from preflight.errors import ConfigError
from preflight.fix.writers import OUTPUT_FORMATS
from preflight.paths import find_beside, rules_base
from preflight.source.names import SUFFIXES, format_of

if TYPE_CHECKING:
    from preflight.fix import FixOptions

MANIFEST_NAME = "fix-manifest.json"


def manifest_path(options: FixOptions) -> Path:
    """Where the manifest goes: ``--manifest``, else beside ``--out``."""
    return options.manifest or options.out.with_name(MANIFEST_NAME)


# The clean output's format by its name: the input names, a JSON array written as JSON Lines
# (one record a line, streamed) and no Arrow stream (``.arrows``: the writer writes a file).
_SUFFIX_FORMATS = {suffix: "jsonl" if fmt == "json" else fmt
                   for suffix, fmt in SUFFIXES.items() if suffix != ".arrows"}


def output_format(options: FixOptions, input_format: str) -> str:
    """The clean output's format: ``--format``, else ``--out``'s suffix, else the input's
    (Parquet and Arrow keep their own; everything else becomes JSON Lines)."""
    named = _SUFFIX_FORMATS.get(options.out.suffix.lower())
    if options.format and named and named != options.format:
        raise ConfigError(
            f"--format {options.format} but --out {options.out} names "
            f"{named}: make them agree (the file would not read back as its "
            "name says)"
        )
    fmt = options.format or named
    if fmt is None:
        fmt = {"parquet": "parquet", "arrow": "arrow", "datasets": "arrow"}.get(
            input_format, "jsonl"
        )
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if fmt == "csv" and input_format != "csv":
        raise ConfigError(
            f"CSV output needs CSV input ({input_format} given): "
            "name --out .jsonl or .parquet, or pass --format"
        )
    jsonl = {"jsonl", "json"}  # a .json file of JSON Lines reads back as JSON Lines
    _refuse_unreadable_name("--out", options.out, fmt, jsonl if fmt == "jsonl" else {fmt})
    _refuse_unreadable_name("--quarantine", options.quarantine, "jsonl", jsonl)
    return fmt


def _refuse_unreadable_name(flag: str, path: Path, fmt: str, reads: set[str]) -> None:
    """Exit 2 when ``path``'s name would not read back as ``fmt`` (no suffix, an unknown
    one, or another format's): ``preflight check`` picks a file's reader by its name."""
    named = format_of(path)
    if not path.name or path.name in (".", "..") or named in reads:
        return  # a missing name is refused with its own message in check_paths
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return  # /dev/stdout, a folder: check_paths says why (no name would make it work)
    if named:
        said, better = f"names {_FORMAT_NAMES[named]}", path.with_suffix(f".{fmt}")
    else:
        said = f"has the suffix {path.suffix!r}" if path.suffix else "has no suffix"
        better = path.with_name(f"{path.name}.{fmt}")
    raise ConfigError(
        f"{flag} {path} {said}, but it would hold {_FORMAT_NAMES[fmt]}, which "
        "preflight could not read back (it picks a file's format by its "
        f"suffix): name it {better}"
    )


_FORMAT_NAMES = {
    "jsonl": "JSON Lines",
    "json": "JSON",
    "csv": "CSV",
    "parquet": "Parquet",
    "arrow": "Arrow",
}


def read_files(rules: RuleSet) -> dict[str, Path]:
    """The files besides the data that fix reads, which no output may replace: the rules
    file, the eval file and a tokenizer given as a path (each as the gate finds it)."""
    found = {"the rules file": Path(rules.path)} if rules.path else {}
    base = rules_base(rules)
    for what, name in (("the eval file", rules.eval), ("the tokenizer", rules.model.tokenizer)):
        if name and not name.startswith("tiktoken:"):
            with contextlib.suppress(ConfigError):  # a hub name, or missing: the gate says
                found[what] = find_beside(name, base, what=what)
    return found


def check_paths(src: Path, options: FixOptions, read: dict[str, Path]) -> None:
    """Exit 2 before any work when an output cannot be used: no file name, the input (or
    another file fix reads: ``read``), a symbolic link, folder, device or pipe (renaming
    over it would replace it), two outputs on one path, inside an input folder, a
    compressed name."""
    if not options.out.name or options.out.name in (".", ".."):
        raise ConfigError(f"--out {str(options.out)!r} names no file; give a file name")
    manifest = manifest_path(options)
    named = {
        "--out": options.out,
        "--quarantine": options.quarantine,
        "--manifest" if options.manifest else "the manifest (beside --out)": manifest,
    }
    inputs = {"the input": src, **read}
    folders = {what: p.resolve() for what, p in inputs.items() if p.is_dir()}
    seen: dict[Path, str] = {}
    for flag, target in named.items():
        if not target.name or target.name in (".", ".."):
            raise ConfigError(f"{flag} {str(target)!r} names no file; give a file name")
        for what, path in inputs.items():
            if _same_file(target, path):
                raise ConfigError(f"{flag} {target} is {what}; fix never modifies what it reads")
        blocked = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            raise ConfigError(
                f"{flag} {target}: {blocked} is a file, not a folder; name a path in a folder"
            )
        if target.is_symlink() or (target.exists() and not target.is_file()):
            kind = (
                "a symbolic link"
                if target.is_symlink()
                else ("a folder" if target.is_dir() else "not a regular file (a device or pipe)")
            )
            raise ConfigError(
                f"{flag} {target} is {kind}; fix writes a new file and renames "
                "it into place, which would replace it: name a regular file "
                "(or a path that does not exist yet)"
            )
        resolved = target.resolve()
        if resolved in seen:
            raise ConfigError(
                f"{seen[resolved]} and {flag} are the same file ({target}); "
                "give each output its own path"
            )
        seen[resolved] = flag
        for what, folder in folders.items():
            if folder in resolved.parents:
                raise ConfigError(
                    f"{flag} {target} is inside {what} ({folder}); write outputs elsewhere"
                )
        if target.name in OUT_NAMES:
            raise ConfigError(
                f"{flag} {target}: {target.name} is a name `preflight check --out` writes in "
                "its report folder (and removes first), so a check into that folder would "
                "delete or replace it; give it another name"
            )
        if target.suffix.lower() in (".gz", ".zst", ".zstd"):
            raise ConfigError(f"{flag} {target}: fix writes plain files; compress them afterwards")


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False
