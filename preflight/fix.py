"""``preflight fix``: a cleaned corpus and a quarantine, with nothing lost.

The gate runs first; each finding then meets its rule's ``fix`` action (or the check's
default, the first of its ``fixes``). Per record, the actions apply in one fixed order:

    repair -> normalize -> strip -> truncate -> drop -> keep_first -> quarantine

``repair`` turns confirmed mojibake back into the characters it stood for (and NFC-normalises);
damage it cannot undo without guessing (U+FFFD, lone surrogates) sends the record to the
quarantine. ``normalize`` applies NFC, ``strip`` deletes the flagged invisible characters (the
allow-listed joiners stay), ``truncate`` cuts a too-long text on the tokenizer's token
boundary and appends ``--marker``. ``drop``, ``keep_first`` (for the non-first members of a
duplicate cluster) and ``quarantine`` move the record to the quarantine, next to its row, id
and reasons, untouched. ``none`` leaves it be.

Invariants: every input record (malformed lines too, kept verbatim) ends in exactly one of the
two outputs, in input order; the input is never modified; outputs are written under a
temporary name in their folder and renamed when complete; the quarantine file is always
written. After writing, the gate runs again on the clean output with the rules that have a
fix action, and records it still flags (a repair or a truncation can make two records equal)
go to the quarantine in another round, so running ``fix`` on its own output changes nothing.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tempfile
import unicodedata
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import xxhash
import zstandard

from preflight.checks import registry
from preflight.checks.base import Context
from preflight.checks.encoding import confirmed_mojibake
from preflight.checks.invisible import InvisibleUnicode
from preflight.config import Rule, RuleSet, to_dict
from preflight.errors import ConfigError
from preflight.report.model import Report
from preflight.source import format_of, open_source
from preflight.text import visible

ORDER = ("repair", "normalize", "strip", "truncate", "drop", "keep_first", "quarantine")
TRANSFORMS = ("repair", "normalize", "strip", "truncate")
# What each transform can mend; any other code under it sends the record to the quarantine.
_MENDS = {
    "repair": {"mojibake", "not_nfc"},
    "normalize": {"not_nfc"},
    "truncate": {"too_long"},
}
MAX_ROUNDS = 3
_EXAMPLES = 5


@dataclass
class FixOptions:
    """Where ``fix`` writes and how."""

    out: Path
    quarantine: Path
    manifest: Path | None = None
    format: str | None = None  # jsonl or parquet; default: the input's (JSON Lines for CSV)
    marker: str = ""
    dry_run: bool = False


@dataclass
class _Plan:
    """What happens to each record that has findings, by (file label, row)."""

    transforms: dict[tuple[str | None, int], set[str]] = field(default_factory=dict)
    quarantine: dict[tuple[str | None, int], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    risky: bool = False  # a transform that could create a new finding was planned


def plan(findings: pl.DataFrame, rules: list[Rule], *, can_truncate: bool, chat: bool) -> _Plan:
    """Decide, per record, the transforms to apply or the quarantine, from its findings."""
    actions = {r.id: r.fix or _default_fix(r.check) for r in rules}
    result = _Plan()
    for row, file, rule, check, code, detail, cluster in findings.select(
        "row", "file", "rule", "check", "code", "detail", "cluster"
    ).iter_rows():
        if row is None:  # a corpus-level finding names no record
            continue
        action = actions.get(rule, "none")
        if action == "none":
            continue
        key = (file, row)
        mends = action == "strip" or code in _MENDS.get(action, set())
        if action == "truncate" and (not can_truncate or chat):
            mends = False
        # Counted under what really happens: a transform that cannot mend a code quarantines.
        result.counts[(rule, action if mends or action not in TRANSFORMS else "quarantine")] += 1
        if action in TRANSFORMS and mends:
            result.transforms.setdefault(key, set()).add(action)
            # Folding for duplicates ignores case, NFC and format characters, so stripping
            # those or normalising cannot make two records equal; a repair, a truncation or
            # deleting a control character can.
            if action in ("repair", "truncate") or code == "control_character":
                result.risky = True
            continue
        reason = {
            "rule": rule,
            "check": check,
            "code": code,
            "detail": detail,
            "action": action if action not in TRANSFORMS else "quarantine",
        }
        if cluster is not None:
            reason["kept_row"] = cluster
        result.quarantine[key].append(reason)
    return result


def _default_fix(check: str) -> str:
    cls = registry.get(check)
    return cls.fixes[0] if cls else "none"


class _Mender:
    """Applies the transforms to one record's text fields and message contents."""

    def __init__(self, rules: RuleSet, ctx: Context, marker: str) -> None:
        self.ctx = ctx
        self.marker = marker
        self.limit = None
        invisible = next((r for r in rules.rules if r.check == "invisible_unicode"), None)
        self._invisible = InvisibleUnicode(
            InvisibleUnicode.Params(**(invisible.params if invisible else {})), ctx
        )
        token_rule = next((r for r in rules.rules if r.check == "token_length"), None)
        if token_rule is not None:
            window = token_rule.params.get("max_tokens") or rules.model.context_window
            if window:
                self.limit = window - token_rule.params.get("reserve", 0)

    def apply(self, record: dict[str, Any], actions: set[str]) -> dict[str, Any]:
        record = dict(record)
        for name in self.ctx.text_fields:
            if isinstance(record.get(name), str):
                record[name] = self._text(record[name], actions)
        messages = self.ctx.messages
        if messages and isinstance(record.get(messages), list):
            record[messages] = [
                {**t, "content": self._text(t["content"], actions - {"truncate"})}
                if isinstance(t, dict) and isinstance(t.get("content"), str)
                else t
                for t in record[messages]
            ]
        return record

    def emptied(self, before: dict[str, Any], after: dict[str, Any]) -> str | None:
        """The text field a fix left empty (or only whitespace), if any."""
        for name in self.ctx.text_fields:
            old, new = before.get(name), after.get(name)
            if isinstance(old, str) and old.strip() and isinstance(new, str) and not new.strip():
                return name
        return None

    def _text(self, text: str, actions: set[str]) -> str:
        for action in ORDER:
            if action not in actions:
                continue
            if action == "repair":
                for match, char in reversed(confirmed_mojibake(text)):
                    size = len(char.encode())
                    # The sequence's first `size` bytes' characters stand for `char`.
                    end = match.start() + _chars_for_bytes(match.group(), size)
                    text = text[: match.start()] + char + text[end:]
                text = unicodedata.normalize("NFC", text)
            elif action == "normalize":
                text = unicodedata.normalize("NFC", text)
            elif action == "strip":
                drop = {at for at, _ in self._invisible._violations(text)}
                text = "".join(ch for at, ch in enumerate(text) if at not in drop)
            elif action == "truncate" and self.limit and self.ctx.tokenizer:
                text = self.ctx.tokenizer.truncate(text, self.limit, self.marker)
        return text


def _chars_for_bytes(seq: str, size: int) -> int:
    """How many mojibake characters encode the first ``size`` bytes."""
    total = 0
    for k, ch in enumerate(seq):
        total += len(ch.encode("cp1252", "ignore") or ch.encode("latin-1"))
        if total >= size:
            return k + 1
    return len(seq)


def run_fix(
    source: Any, rules: RuleSet, options: FixOptions, *, run_gate: Any
) -> tuple[Report, dict[str, Any]]:
    """Clean ``source`` into ``options.out`` and ``options.quarantine``; return the gate's
    report on the input and the manifest (or, with ``dry_run``, what would change).

    ``run_gate(source, rules, out)`` runs the gate and returns its Report (the CLI and API
    pass ``pipeline.run``)."""
    src_path = Path(source)
    fmt = format_of(src_path) if src_path.is_file() else None
    out_format = options.format or ("parquet" if fmt == "parquet" else "jsonl")
    if out_format not in ("jsonl", "parquet"):
        raise ConfigError(f"--format must be jsonl or parquet, got {out_format!r}")
    inside = src_path.resolve() if src_path.is_dir() else None
    for target in (options.out, options.quarantine, options.manifest):
        if target is None:
            continue
        if inside is not None and inside in target.resolve().parents:
            raise ConfigError(f"{target} is inside the input folder; write outputs elsewhere")
        if target.suffix.lower() in (".gz", ".zst", ".zstd"):
            raise ConfigError(f"{target}: fix writes plain files; compress them afterwards")
        if target.resolve() == src_path.resolve():
            raise ConfigError(f"{target} is the input; fix never modifies its input")
    fixable = [r for r in rules.rules if (r.fix or _default_fix(r.check)) != "none"]

    with tempfile.TemporaryDirectory(prefix="preflight-fix-") as tmp:
        work = Path(tmp)
        report = run_gate(src_path, rules, work / "report")
        ctx = Context(fields=_fields(report, rules), model=rules.model, tokenizer=_tokenizer(rules))
        findings = pl.read_parquet(work / "report" / "findings.parquet")
        the_plan = plan(
            findings, rules.rules, can_truncate=ctx.tokenizer is not None, chat=bool(ctx.messages)
        )
        if options.dry_run:
            return report, _dry_run(src_path, the_plan, _Mender(rules, ctx, options.marker), report)
        # Outputs are written under temporary names beside their final ones and renamed only
        # when complete; whatever happens, no temporary file is left behind.
        clean = _part(options.out, 0)
        quarantined = _part(options.quarantine, 0)
        written = [clean, quarantined]
        try:
            report, manifest = _fix_rounds(
                src_path,
                fmt,
                out_format,
                rules,
                options,
                report,
                ctx,
                the_plan,
                fixable,
                clean,
                quarantined,
                written,
                run_gate,
                work,
            )
        finally:
            for path in written:
                path.unlink(missing_ok=True)
        return report, manifest


def _fix_rounds(
    src_path: Path,
    fmt: str | None,
    out_format: str,
    rules: RuleSet,
    options: FixOptions,
    report: Report,
    ctx: Context,
    the_plan: _Plan,
    fixable: list[Rule],
    clean: Path,
    quarantined: Path,
    written: list[Path],
    run_gate: Any,
    work: Path,
) -> tuple[Report, dict[str, Any]]:
    """Write round one, then verify and re-fix until no fix-action rule has a finding."""
    counts = _write(
        src_path,
        fmt,
        out_format,
        the_plan,
        _Mender(rules, ctx, options.marker),
        clean,
        quarantined,
        origin=None,
    )
    rounds = 1
    origin = counts.pop("origin")
    # Stripping, normalising and dropping cannot create a finding (the duplicate checks
    # fold case, NFC and invisible characters away); a repair or a truncation can.
    last_plan = the_plan
    later: dict[int, list[dict[str, Any]]] = {}
    while rounds < MAX_ROUNDS and fixable and _can_create_findings(last_plan):
        again = run_gate(clean, _only(rules, fixable), work / f"verify{rounds}")
        if all(r.findings == 0 for r in again.rules):
            break
        extra = pl.read_parquet(work / f"verify{rounds}" / "findings.parquet")
        next_plan = plan(
            extra, fixable, can_truncate=ctx.tokenizer is not None, chat=bool(ctx.messages)
        )
        next_clean = _part(options.out, rounds)
        written.append(next_clean)
        more = _write(
            clean,
            out_format,
            out_format,
            next_plan,
            _Mender(rules, ctx, options.marker),
            next_clean,
            quarantined,
            origin=origin,
            later=later,
        )
        origin = more.pop("origin")
        counts["changed"] |= more["changed"]
        counts["quarantined"] += more["quarantined"]
        counts["clean"] = more["clean"]
        the_plan.counts.update(next_plan.counts)
        clean.unlink()
        clean, rounds, last_plan = next_clean, rounds + 1, next_plan
    counts["changed"] = len(counts["changed"] - later.keys())
    if later:
        _merge_quarantine(src_path, fmt, quarantined, later, _Mender(rules, ctx, ""))
    manifest = _manifest(src_path, clean, quarantined, counts, the_plan, report, rounds, options)
    os.replace(clean, options.out)
    os.replace(quarantined, options.quarantine)
    manifest["clean"]["path"], manifest["quarantine"]["path"] = (
        str(options.out),
        str(options.quarantine),
    )
    target = options.manifest or options.out.with_name("fix-manifest.json")
    _place_text(json.dumps(manifest, indent=2) + "\n", target)
    manifest["manifest_path"] = str(target)
    return report, manifest


def _can_create_findings(the_plan: _Plan) -> bool:
    return the_plan.risky


def _fields(report: Report, rules: RuleSet) -> Any:
    from preflight.config import Fields

    return Fields(**report.rules_file.fields) if rules.fields.is_empty() else rules.fields


def _tokenizer(rules: RuleSet) -> Any:
    from preflight.pipeline import rules_tokenizer

    return rules_tokenizer(rules)


def _only(rules: RuleSet, keep: list[Rule]) -> RuleSet:
    data = to_dict(rules)
    ids = {r.id for r in keep}
    data["rules"] = [r for r in data["rules"] if r["id"] in ids]
    from preflight.config import load_rules

    return load_rules(data)


# -- writing ----------------------------------------------------------------------------


def _records(path: Path, fmt: str | None) -> Iterator[tuple[str | None, int, bytes | None, Any]]:
    """Every input unit in order: (file label, row, raw line or None, parsed record or None).

    JSON Lines is read line by line so unchanged lines are copied byte for byte and
    malformed lines travel verbatim; other formats go through the Source."""
    if fmt == "jsonl":
        from preflight.source.jsonl import parse_line

        with _open_raw(path) as f:
            for row, line in enumerate(f):
                body = line.rstrip(b"\n")
                if row == 0:
                    body = body.removeprefix(b"\xef\xbb\xbf")
                if not body.strip():
                    yield None, row, line, None  # a blank line: not a record, kept as is
                    continue
                yield None, row, line, _Lazy(body, parse_line)
        return
    source = open_source(path)
    for batch in source.batches():
        values = {name: batch.values(name) for name in batch.frame.columns}
        bad = {m.row: m for m in batch.malformed}
        for k, row in enumerate(batch.rows.tolist()):
            for r in sorted(r for r in list(bad) if r < row):
                yield batch.file, r, None, bad.pop(r)
            yield batch.file, row, None, {name: v[k] for name, v in values.items()}
        for r in sorted(bad):
            yield batch.file, r, None, bad[r]


class _Lazy:
    """A JSON line parsed only when needed."""

    def __init__(self, body: bytes, parse: Any) -> None:
        self.body, self._parse = body, parse

    def get(self) -> tuple[Any, Any]:
        return self._parse(self.body)


def _open_raw(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix in (".zst", ".zstd"):
        return zstandard.open(path, "rb")
    return open(path, "rb")


def _write(
    path: Path,
    fmt: str | None,
    out_format: str,
    the_plan: _Plan,
    mender: _Mender,
    clean: Path,
    quarantined: Path,
    *,
    origin: array[int] | None,
    later: dict[int, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """One round: the clean output, and the quarantine. In a later round (reading an earlier
    round's clean output, ``origin`` mapping its lines to input rows) quarantine decisions go
    to ``later`` instead, by input row, to be merged in order with the original records."""
    counts: dict[str, Any] = {
        "input": 0,
        "clean": 0,
        "quarantined": 0,
        "changed": set(),
        "blank": 0,
    }
    new_origin = array("q")  # input row of each clean line, 8 bytes each
    writer = _Writer(clean, out_format)
    with writer, open(quarantined, "ab" if later is not None else "wb") as q:
        for file, row, line, rec in _records(path, fmt):
            original_row = origin[row] if origin is not None else row
            key = (file, row)
            if rec is None and line is not None:  # blank line: kept in JSON Lines output
                counts["blank"] += 1
                if writer.fmt == "jsonl":
                    writer.raw(line)
                    new_origin.append(original_row)
                continue
            counts["input"] += 1
            if key in the_plan.quarantine:
                reasons = the_plan.quarantine[key]
                if later is not None:
                    assert origin is not None
                    for reason in reasons:
                        if "kept_row" in reason:
                            reason["kept_row"] = origin[reason["kept_row"]]
                    later[original_row] = reasons
                else:
                    q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                counts["quarantined"] += 1
                continue
            if key in the_plan.transforms:
                record = rec.get()[0] if isinstance(rec, _Lazy) else rec
                mended = mender.apply(record, the_plan.transforms[key])
                emptied = mender.emptied(record, mended)
                if emptied:  # nothing would be left to train on: set it aside instead
                    reasons = [
                        {
                            "rule": "fix",
                            "check": "empty",
                            "code": "empty_after_fix",
                            "detail": f"{emptied}: nothing left after "
                            + ", ".join(sorted(the_plan.transforms[key])),
                            "action": "quarantine",
                        }
                    ]
                    if later is not None:
                        later[original_row] = reasons
                    else:
                        q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                    counts["quarantined"] += 1
                    continue
                writer.record(mended)
                counts["changed"].add(original_row)
            elif line is not None and writer.fmt == "jsonl":
                writer.raw(line if line.endswith(b"\n") else line + b"\n")
            else:
                record = rec.get()[0] if isinstance(rec, _Lazy) else rec
                if not isinstance(record, dict):  # a malformed line cannot be a Parquet row
                    reasons = [
                        {
                            "rule": "fix",
                            "check": "malformed",
                            "code": "not_a_record",
                            "detail": "a malformed line cannot be written to Parquet",
                            "action": "quarantine",
                        }
                    ]
                    q.write(_quarantine_line(file, original_row, rec, line, reasons, mender))
                    counts["quarantined"] += 1
                    continue
                writer.record(record)
            counts["clean"] += 1
            new_origin.append(original_row)
    counts["origin"] = new_origin
    return counts


def _merge_quarantine(
    src: Path,
    fmt: str | None,
    quarantined: Path,
    later: dict[int, list[dict[str, Any]]],
    mender: _Mender,
) -> None:
    """Add the records quarantined in later rounds to the quarantine, in input order and
    with their original (input) records."""
    extra = {}
    for file, row, line, rec in _records(src, fmt):
        if row in later and not (rec is None and line is not None):
            extra[row] = _quarantine_line(file, row, rec, line, later[row], mender)
    merged = quarantined.with_name(quarantined.name + ".merge")
    with open(quarantined, "rb") as first, open(merged, "wb") as out:
        pending = sorted(extra.items())
        for entry in first:
            row = json.loads(entry)["row"]
            while pending and pending[0][0] < row:
                out.write(pending.pop(0)[1])
            out.write(entry)
        for _, entry in pending:
            out.write(entry)
    os.replace(merged, quarantined)


def _quarantine_line(
    file: str | None,
    row: int,
    rec: Any,
    line: bytes | None,
    reasons: list[dict[str, Any]],
    mender: _Mender,
) -> bytes:
    entry: dict[str, Any] = {"row": row, "file": file, "id": None, "reasons": reasons}
    record = rec.get()[0] if isinstance(rec, _Lazy) else rec
    if isinstance(record, dict):
        entry["id"] = _id(record, mender)
        entry["record"] = record
    elif line is None:  # a malformed element of a non-line format: the reader's verdict
        entry["malformed"] = getattr(rec, "detail", None)
    else:  # a malformed line, kept verbatim
        body = line.rstrip(b"\n")
        try:
            entry["raw"] = body.decode("utf-8")
        except UnicodeDecodeError:
            entry["raw_base64"] = base64.b64encode(body).decode()
    return _json_line(entry)


def _id(record: dict[str, Any], mender: _Mender) -> str | None:
    name = mender.ctx.fields.id
    value = record.get(name) if name else None
    return None if value is None else str(value)


def _json_line(value: Any) -> bytes:
    """One JSON line (NaN literals kept); a lone surrogate, which UTF-8 cannot hold, is
    written as its \\u escape, as it was read."""
    try:
        return (json.dumps(value, ensure_ascii=False, allow_nan=True) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(value, ensure_ascii=True, allow_nan=True) + "\n").encode()


class _Writer:
    """Clean output: JSON Lines (unchanged lines copied byte for byte) or Parquet."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path, self.fmt = path, fmt
        self._rows: list[dict[str, Any]] = []
        self._parquet: Any = None
        self._f: Any = None

    def __enter__(self) -> _Writer:
        if self.fmt == "jsonl":
            self._f = open(self.path, "wb")
        return self

    def raw(self, line: bytes) -> None:
        self._f.write(line)

    def record(self, record: dict[str, Any]) -> None:
        if self.fmt == "jsonl":
            self._f.write(_json_line(record))
            return
        self._rows.append(record)
        if len(self._rows) >= 65_536:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._rows:
            return
        table = pa.Table.from_pylist(self._rows)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, table.schema)
        self._parquet.write_table(table.cast(self._parquet.schema))
        self._rows = []

    def __exit__(self, *exc: object) -> None:
        if self.fmt == "jsonl":
            self._f.close()
            return
        self._flush()
        if self._parquet is None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({}), self.path)
        else:
            self._parquet.close()


# -- results ----------------------------------------------------------------------------


def _hash(path: Path) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _manifest(
    src: Path,
    clean: Path,
    quarantined: Path,
    counts: dict[str, Any],
    the_plan: _Plan,
    report: Report,
    rounds: int,
    options: FixOptions,
) -> dict[str, Any]:
    actions: dict[str, dict[str, int]] = defaultdict(dict)
    for (rule, action), n in sorted(the_plan.counts.items()):
        actions[rule][action] = n
    return {
        "input": {
            "path": str(src),
            "records": counts["input"],
            "blank_lines": counts["blank"],
            "fingerprint": report.source.fingerprint.get("xxh3_128"),
        },
        "clean": {
            "path": str(options.out),
            "records": counts["clean"],
            "changed": counts["changed"],
            "xxh3_128": _hash(clean),
        },
        "quarantine": {
            "path": str(options.quarantine),
            "records": counts["quarantined"],
            "xxh3_128": _hash(quarantined),
        },
        "balanced": counts["clean"] + counts["quarantined"] == counts["input"],
        "findings_per_rule_and_action": dict(actions),
        "order": list(ORDER),
        "rounds": rounds,
        "gate_verdict_before": report.verdict,
    }


def _dry_run(src: Path, the_plan: _Plan, mender: _Mender, report: Report) -> dict[str, Any]:
    fmt = format_of(src) if src.is_file() else None
    examples = []
    for file, row, _line, rec in _records(src, fmt):
        key = (file, row)
        if key in the_plan.transforms and len(examples) < _EXAMPLES:
            record = rec.get()[0] if isinstance(rec, _Lazy) else rec
            after = mender.apply(record, the_plan.transforms[key])
            for name in [*mender.ctx.text_fields]:
                before, changed = record.get(name), after.get(name)
                if before != changed:
                    at = next(
                        (
                            k
                            for k, (x, y) in enumerate(zip(before, changed, strict=False))
                            if x != y
                        ),
                        min(len(before), len(changed)),
                    )
                    examples.append(
                        {
                            "row": row,
                            "field": name,
                            "before": visible(_around(before, at)),
                            "after": visible(_around(changed, at)),
                        }
                    )
    actions: dict[str, dict[str, int]] = defaultdict(dict)
    for (rule, action), n in sorted(the_plan.counts.items()):
        actions[rule][action] = n
    return {
        "dry_run": True,
        "input": {"path": str(src), "records": report.source.total},
        "would_change": len(the_plan.transforms.keys() - the_plan.quarantine.keys()),
        "would_quarantine": len(the_plan.quarantine),
        "findings_per_rule_and_action": dict(actions),
        "examples": examples,
    }


def _around(text: str, at: int, radius: int = 40) -> str:
    """The text near position ``at`` (where before and after first differ)."""
    start, end = max(0, at - radius), at + radius
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _part(final: Path, n: int) -> Path:
    """A temporary name beside ``final`` (the same folder, so the rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.stem}.{os.getpid()}.{n}.part{final.suffix}")


def _place_text(text: str, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(f".{final.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, final)
