"""Rules files: every kind of mistake is a ConfigError (exit 2) that names the file, the key
path and what was expected — through ``load_rules``, ``rules validate`` and ``check --rules``."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, get_args, get_origin

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from preflight.checks import registry
from preflight.cli import main
from preflight.config import ModelFacts, Rule, RuleSet, SmokeConfig, load_rules, preset_names
from preflight.config import load as rules_loading
from preflight.errors import ConfigError

RULE = "rules:\n  - {id: a, check: empty}\n"

# (case id, rules file text, substrings the message must contain)
BAD_RULES: list[tuple[str, str, list[str]]] = [
    (
        "non-string-key",
        "rules:\n  - {id: a, check: empty, 1: 2}\n",
        ["is not a string"],
    ),
    (
        "typo-in-common-key",
        "rules:\n  - {id: a, check: empty, max_fracton: 0.1}\n",
        ["rules[0]", "max_fracton", "'max_fraction'"],
    ),
    (
        "unknown-check",
        "rules:\n  - {id: a, check: invisble_unicode}\n",
        ["rules[0].check", "invisble_unicode", "'invisible_unicode'"],
    ),
    (
        "wrong-type",
        'rules:\n  - {id: a, check: empty, max_count: "many"}\n',
        ["rules[0].max_count", "integer", "'many'"],
    ),
    (
        "out-of-range",
        "rules:\n  - {id: a, check: empty, max_fraction: 5}\n",
        ["rules[0].max_fraction", "1", "5"],
    ),
    (
        "unknown-check-parameter",
        "rules:\n  - {id: a, check: exact_duplicate, bogus_param: 3}\n",
        ["rules[0].bogus_param", "exact_duplicate", "min_chars"],
    ),
    (
        "wrong-parameter-type",
        "rules:\n  - {id: a, check: exact_duplicate, min_chars: lots}\n",
        ["rules[0].min_chars", "integer", "'lots'"],
    ),
    (
        "bad-allowed-code-point",
        "rules:\n  - {id: a, check: invisible_unicode, allow: [not-a-code-point]}\n",
        ["rules[0].allow", "not-a-code-point", "U+"],
    ),
    (
        "unknown-top-level-key",
        "rulez: []\n" + RULE,
        ["rulez", "'rules'"],
    ),
    (
        "unknown-key-under-fields",
        "fields: {txt: text}\n" + RULE,
        # The allowed keys listed must be those of `fields`, not of the top level.
        ["fields.txt", "messages"],
    ),
    (
        "invalid-yaml",
        "rules:\n  - {id: a, check: empty\n  - foo: [1,\n",
        ["YAML", "line 3"],
    ),
    (
        "empty-file",
        "",
        ["empty"],
    ),
    (
        "rules-not-a-list",
        "rules: {id: a, check: empty}\n",
        ["`rules`", "list"],
    ),
    (
        "missing-rules",
        "fields: {text: text}\n",
        ["`rules`", "missing"],
    ),
    (
        "top-level-not-a-mapping",
        "- {id: a, check: empty}\n",
        ["mapping"],
    ),
    (
        "rule-not-a-mapping",
        "rules:\n  - empty\n",
        ["rules[0]", "mapping"],
    ),
    (
        "duplicate-rule-id",
        "rules:\n  - {id: a, check: empty}\n  - {id: a, check: malformed}\n",
        ["rules[1].id", "duplicate", "'a'"],
    ),
    (
        "duplicate-rule-id-after-an-invalid-rule",
        "rules:\n  - {id: x, check: nope}\n  - {id: a, check: empty}\n"
        "  - {id: a, check: malformed}\n",
        ["rules[0].check", "rules[2].id", "duplicate"],
    ),
    (
        "fix-not-allowed",
        "rules:\n  - {id: a, check: malformed, fix: strip}\n",
        ["rules[0].fix", "strip", "quarantine"],
    ),
    (
        "missing-check",
        "rules:\n  - {id: a, severity: error}\n",
        ["rules[0].check", "missing", "invisible_unicode"],
    ),
    (
        "unknown-severity",
        "rules:\n  - {id: a, check: empty, severity: fatal}\n",
        ["rules[0].severity", "'fatal'", "warn"],
    ),
    (
        "bad-model-fact",
        "model: {context_window: -1}\n" + RULE,
        ["model.context_window", "0"],
    ),
    (
        "unknown-task",
        "task: translation\n" + RULE,
        ["task", "'translation'"],
    ),
    # Numbers are strict and bounded: a boolean is not a count, and a value far past any
    # real setting is a config error, not gigabytes of memory or an "internal error".
    (
        "boolean-max-count",
        "rules:\n  - {id: a, check: empty, max_count: true}\n",
        ["rules[0].max_count", "integer", "True"],
    ),
    (
        "boolean-max-fraction",
        "rules:\n  - {id: a, check: empty, max_fraction: false}\n",
        ["rules[0].max_fraction", "number", "False"],
    ),
    (
        "boolean-check-parameter",
        "rules:\n  - {id: a, check: near_duplicate, num_perm: true}\n",
        ["rules[0].num_perm", "integer", "True"],
    ),
    (
        "huge-shingle-size",
        "rules:\n  - {id: a, check: near_duplicate, n: 1000000000}\n",
        ["rules[0].n", "less than or equal to 64", "1000000000"],
    ),
    (
        "shingle-size-written-1e9",  # YAML 1.2 reading: a float, which an int field refuses
        "rules:\n  - {id: a, check: near_duplicate, n: 1e9}\n",
        ["rules[0].n", "integer", "1000000000.0"],
    ),
    (
        "min-chars-past-64-bits",
        f"rules:\n  - {{id: a, check: exact_duplicate, min_chars: {2**70}}}\n",
        ["rules[0].min_chars", "less than or equal to", str(2**70)],
    ),
    (
        "smoke-seed-past-64-bits",
        f"smoke: {{seed: {2**70}}}\n" + RULE,
        ["smoke.seed", "less than or equal to", str(2**70)],
    ),
    (
        "near-duplicate-seed-past-32-bits",
        f"rules:\n  - {{id: a, check: near_duplicate, seed: {2**40}}}\n",
        ["rules[0].seed", "less than or equal to 4294967295"],
    ),
    (
        "boolean-model-fact",
        "model: {context_window: true}\n" + RULE,
        ["model.context_window", "integer", "True"],
    ),
    (
        "huge-context-window",
        "model: {context_window: 1000000000000}\n" + RULE,
        ["model.context_window", "less than or equal to 100000000"],
    ),
    (
        "string-smoke-steps",
        "smoke: {steps: '50'}\n" + RULE,
        ["smoke.steps", "integer", "'50'"],
    ),
    (
        "infinite-learning-rate",
        "smoke: {lr: .inf}\n" + RULE,
        ["smoke.lr", "finite", "inf"],
    ),
    (
        "boolean-numeric-bound",
        "rules:\n  - {id: a, check: numeric, max: true}\n",
        ["rules[0].max", "number", "True"],
    ),
    (
        "huge-token-limit",
        f"rules:\n  - {{id: a, check: token_length, max_tokens: {2**64}}}\n",
        ["rules[0].max_tokens", "less than or equal to 100000000"],
    ),
    (
        "alias-bomb",  # "billion laughs": 9^9 values from 300 bytes
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
                  for p, c in zip("abcdefgh", "bcdefghi", strict=True))
        + "fields: {text: *i}\n" + RULE,
        ["YAML", "line 6", "expand to more than 100,000 values"],
    ),
    (
        "recursive-alias",
        "fields: &f {text: [*f]}\n" + RULE,
        ["YAML", "alias *f refers to a value that contains it"],
    ),
    # PyYAML keeps the last of two equal keys: each of these opened the gate.
    (
        "duplicate-key-in-a-rule",
        "rules:\n  - {id: e, check: empty, max_count: 0, max_count: 100}\n",
        ["line 2", "duplicate key 'max_count'", "keep the one you mean"],
    ),
    (
        "duplicate-top-level-key",
        RULE + "rules:\n  - {id: b, check: empty, severity: info}\n",
        ["line 3", "duplicate key 'rules' (first at line 1)"],
    ),
    (
        "duplicate-severity",
        "rules:\n  - id: e\n    check: empty\n    severity: error\n    severity: info\n",
        ["line 5", "duplicate key 'severity' (first at line 4)"],
    ),
    (
        "duplicate-key-quoted-differently",
        "fields: {text: a, 'text': b}\n" + RULE,
        ["line 1", "duplicate key 'text'"],
    ),
    (
        "boolean-version",
        "version: true\n" + RULE,
        ["version", "write `version: 1`", "True"],
    ),
    (
        "float-version",
        "version: 1.0\n" + RULE,
        ["version", "write `version: 1`"],
    ),
]
# Hostile values that got past validation (or crashed it) before.
BAD_RULES += [
    (
        "check-is-a-list",  # was "internal error: TypeError: unhashable type: 'list'"
        "rules:\n  - {id: a, check: [empty]}\n",
        ["rules[0].check", "expected the name of one check, got a list", "invisible_unicode"],
    ),
    (
        "check-is-a-mapping",
        "rules:\n  - {id: a, check: {name: empty}}\n",
        ["rules[0].check", "got a mapping"],
    ),
    (
        "nested-too-deep",  # 100 KB of `[`: was "internal error: RecursionError"
        "model: " + "[" * 50_000 + "]" * 50_000 + "\n" + RULE,
        ["YAML", "line 1", "nest more than 100 levels deep"],
    ),
    (
        "not-text",  # a control character: PyYAML's message named "<byte string>"
        "rules: \x07\n",
        ["it is not text: character U+0007 at character 7", "is it the right file?"],
    ),
    (
        "empty-list-of-text-fields",  # was read as "no text field", without a word
        "fields: {text: []}\n" + RULE,
        ["fields.text", "name a column", "got []"],
    ),
    (
        "a-column-named-twice",  # each finding came twice
        "fields: {text: [body, body]}\n" + RULE,
        ["fields.text", "lists 'body' twice"],
    ),
    (
        "empty-tokenizer",  # was read as "no tokenizer": the estimate, silently
        "model: {tokenizer: ''}\n" + RULE,
        ["model.tokenizer", "name a tokenizer"],
    ),
    (
        "numeric-scale-zero",  # no value could ever overflow the dtype
        "rules:\n  - {id: a, check: numeric, dtype: fp16, scale: 0}\n",
        ["rules[0]", "scale: 0", "no value could overflow"],
    ),
]
CASE_IDS = [c[0] for c in BAD_RULES]


def flat(text: str) -> str:
    """The message with line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


def squash(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_load_rules_raises_config_error(
    tmp_path: Path, case: str, text: str, expected: list[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    message = str(info.value)
    assert str(path) in message  # names the file
    for part in expected:
        assert part in message, (case, part, message)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_rules_validate_exits_2(tmp_path: Path, case: str, text: str, expected: list[str]) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert "rules.yaml" in squash(result.stderr)
    for part in expected:
        assert part in flat(result.stderr), (case, part, result.stderr)


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_check_with_bad_rules_exits_2_before_reading(
    tmp_path: Path, case: str, text: str, expected: list[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "hello there"}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(data), "--rules", str(path),
                                       "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for part in expected:
        assert part in flat(result.stderr), (case, part, result.stderr)
    assert not out.exists()


def test_every_mistake_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n"
        "  - {id: a, check: empty, max_fracton: 0.1}\n"
        "  - {id: b, check: nope}\n"
        "  - {id: c, check: empty, max_count: -1}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    message = str(info.value)
    for part in ("rules[0].max_fracton", "rules[1].check", "rules[2].max_count"):
        assert part in message


def test_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "version: 1\ntask: lm\nfields: {text: [title, body], id: doc_id}\n"
        "model: {context_window: 4096}\n"
        "rules:\n"
        "  - {id: hidden, check: invisible_unicode, fix: strip, allow: [U+200E]}\n"
        "  - {id: dupes, check: exact_duplicate, severity: warn, max_fraction: 0.01,"
        " min_chars: 5}\n"
        "  - {check: empty}\n"
    )
    ruleset = load_rules(path)
    assert isinstance(ruleset, RuleSet)
    assert ruleset.path == str(path)
    assert ruleset.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ruleset.fields.text_fields() == ["title", "body"]
    assert ruleset.model.context_window == 4096
    assert [r.id for r in ruleset.rules] == ["hidden", "dupes", "empty"]  # id defaults to check
    hidden, dupes, empty = ruleset.rules
    assert hidden.severity == "error"
    assert hidden.fix == "strip"
    assert hidden.params["allow"] == ["U+200E"]
    assert dupes.params["min_chars"] == 5
    assert dupes.allowed() == (None, 0.01)
    assert empty.allowed() == (0, None)  # fail closed: one violation fails the rule

    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "3 rules" in result.stdout


def test_a_valid_rules_file_with_a_long_path_is_one_line(tmp_path: Path) -> None:
    """``rules validate`` printed its line at 80 columns when not on a terminal: a long
    path was cut across two lines (found by CI, whose temporary folders grew a digit)."""
    folder = tmp_path / ("a-long-folder-name-" * 6)
    folder.mkdir()
    path = folder / "rules.yaml"
    path.write_text("version: 1\nrules:\n  - {check: empty}\n")
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"valid: {path} (1 rules)"


def test_check_params_get_their_defaults() -> None:
    ruleset = load_rules({"rules": [{"id": "d", "check": "exact_duplicate"}]})
    assert ruleset.rules[0].params["min_chars"] == 1


def test_load_rules_from_a_dict() -> None:
    ruleset = load_rules({"fields": {"text": "content"}, "rules": [{"check": "empty"}]})
    assert ruleset.fields.text == "content"
    assert ruleset.path is None
    assert ruleset.sha256 is None
    with pytest.raises(ConfigError, match=r"rules\[0\]\.check"):
        load_rules({"rules": [{"id": "x", "check": "nope"}]})


def test_default_and_named_presets() -> None:
    default = load_rules()
    assert default.preset == "default"
    assert default.path is not None
    assert default.sha256
    assert load_rules(preset="pretrain-text").preset == "pretrain-text"
    with pytest.raises(ConfigError, match="no-such"):
        load_rules(preset="no-such")


def test_every_shipped_preset_is_valid() -> None:
    names = preset_names()
    assert {"default", "pretrain-text"} <= set(names)
    for name in names:
        assert load_rules(preset=name).rules


def test_rules_file_and_preset_together_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULE)
    with pytest.raises(ConfigError, match="preset"):
        load_rules(path, preset="default")


def test_missing_rules_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_rules(tmp_path / "absent.yaml")


# --------------------------------------------------------- bounds on what a rules file can ask


def _alias_bomb(levels: int = 9) -> str:
    """A "billion laughs" rules file: each level lists the one before nine times."""
    names = "abcdefghijklmnop"[:levels]
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in itertools.pairwise(names)]
    return "\n".join(lines) + f"\nfields: {{text: *{names[-1]}}}\n" + RULE


def test_alias_bomb_is_refused_fast_with_a_short_message(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(_alias_bomb())
    assert path.stat().st_size < 1024
    started = time.perf_counter()
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert time.perf_counter() - started < 1.0
    assert result.exit_code == 2, result.output[:500]
    assert len(result.output) < 1000
    assert "expand to more than 100,000 values" in flat(result.stderr)


def test_anchors_and_aliases_that_share_settings_still_load(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("x-strict: &strict {severity: error, max_count: 0}\n"
                    "rules:\n  - {<<: *strict, id: a, check: empty}\n"
                    "  - {<<: *strict, id: b, check: malformed}\n")
    with pytest.raises(ConfigError, match="x-strict"):  # an unknown top-level key, no more
        load_rules(path)
    path.write_text("rules:\n  - &r {id: a, check: empty, max_count: 2}\n"
                    "  - {<<: *r, id: b}\n")
    assert [r.allowed() for r in load_rules(path).rules] == [(2, None), (2, None)]


def test_a_merge_key_may_be_overridden_and_version_1_loads(tmp_path: Path) -> None:
    # `<<: *r` then the mapping's own `max_count` is an override, not a duplicate key.
    path = tmp_path / "rules.yaml"
    path.write_text("version: 1\nrules:\n  - &r {id: a, check: empty, severity: warn}\n"
                    "  - {<<: *r, id: b, severity: error}\n")
    ruleset = load_rules(path)
    assert ruleset.version == 1
    assert [(r.id, r.severity) for r in ruleset.rules] == [("a", "warn"), ("b", "error")]


def test_rules_file_that_never_ends_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["rules", "validate", "/dev/zero"])  # only read
    assert result.exit_code == 2, result.output[:500]
    assert "/dev/zero is not a regular file" in flat(result.stderr)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    writer = threading.Thread(target=_write_until_closed, args=(fifo,), daemon=True)
    writer.start()
    result = CliRunner().invoke(main, ["rules", "validate", str(fifo)])
    assert result.exit_code == 2, result.output[:500]
    assert "a rules file is at most 10 MiB" in flat(result.stderr)
    writer.join(timeout=10)


def _write_until_closed(fifo: Path) -> None:
    with contextlib.suppress(BrokenPipeError), fifo.open("wb") as f:
        while True:
            f.write(b"# " + b"x" * 65_000 + b"\n")


def test_rules_fifo_without_a_writer_is_exit_2_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rules_loading, "PIPE_WAIT_S", 0.5)  # where the pipe is read
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "hello there"}) + "\n")
    started = time.perf_counter()
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(data), "--rules", str(fifo),
                                       "--out", str(tmp_path / "out")])
    assert time.perf_counter() - started < 5
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = flat(result.stderr)
    assert str(fifo) in squash(result.stderr)
    assert "named pipe" in message and "nothing was written to it" in message
    assert not (tmp_path / "out").exists()


def test_rules_through_a_pipe_still_load(tmp_path: Path) -> None:
    # `--rules <(cat r.yaml)`: a pipe that has a writer is read to its end.
    (tmp_path / "r.yaml").write_text(RULE)
    proc = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m preflight rules validate <(cat r.yaml)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout and "(1 rules)" in proc.stdout
    fifo = tmp_path / "late.yaml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: (time.sleep(0.3), fifo.write_text(RULE)))
    writer.start()
    assert [r.id for r in load_rules(fifo).rules] == ["a"]
    writer.join()


def test_rules_file_that_is_a_folder_or_socket_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["rules", "validate", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "is a folder; give a YAML file" in flat(result.stderr)
    sock_path = tmp_path / "s.yaml"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        result = CliRunner().invoke(main, ["rules", "validate", str(sock_path)])
    assert result.exit_code == 2, result.output
    assert "is not a regular file" in flat(result.stderr)


def test_a_long_wrong_value_is_quoted_short(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("fields: {id: [" + ", ".join(["text"] * 20_000) + "]}\n" + RULE)
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    assert "fields.id" in str(info.value) and len(str(info.value)) < 1000


def _numbers(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The fields of ``model`` whose type is (optionally) an int or a float."""
    out = {}
    for name, f in model.model_fields.items():
        kinds = {a for a in get_args(f.annotation)} | {f.annotation}
        if get_origin(f.annotation) is tuple:
            kinds = set(get_args(f.annotation))
        kinds = {get_args(k)[0] if get_origin(k) is Annotated else k for k in kinds}
        if kinds & {int, float}:
            out[name] = f
    return out


NUMBER_MODELS = {
    **{f"{c.name}.Params": c.Params for c in registry.all_checks()},
    "Rule": Rule, "ModelFacts": ModelFacts, "SmokeConfig": SmokeConfig,
}


@pytest.mark.parametrize("where", sorted(NUMBER_MODELS))
def test_every_number_in_a_rules_file_is_bounded_and_strict(where: str) -> None:
    model = NUMBER_MODELS[where]
    for name, f in _numbers(model).items():
        limits = {type(m).__name__ for m in f.metadata}
        if get_origin(f.annotation) is tuple:  # a pair of numbers: each item is bounded
            limits = {type(m).__name__ for a in get_args(f.annotation)
                      for x in getattr(a, "__metadata__", ())
                      for m in (x.metadata if isinstance(x, FieldInfo) else [x])}
        if "float" in str(f.annotation) and not limits & {"Le", "Lt"}:
            # an open-ended float (a bound or a scale) must at least be finite
            assert any(getattr(m, "allow_inf_nan", None) is False for m in f.metadata), (
                where, name)
        else:
            assert limits & {"Le", "Lt"} and limits & {"Ge", "Gt"}, (where, name, limits)
        assert f.description, (where, name)
        with pytest.raises(ValidationError):  # a boolean is not a number
            model(**{name: True}) if model is not Rule else Rule(id="r", check="empty",
                                                                 **{name: True})


# ------------------------------------------------------------------- code a rules file names


def test_rules_validate_says_the_file_names_code_and_runs_none(tmp_path: Path) -> None:
    mark = tmp_path / "imported.txt"
    (tmp_path / "model.py").write_text(f"import pathlib\npathlib.Path({str(mark)!r}).touch()\n"
                                       "def build():\n    raise SystemExit(0)\n")
    path = tmp_path / "rules.yaml"
    path.write_text("smoke: {model: model.py:build}\n" + RULE)
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "names code to run: smoke.model = model.py:build" in flat(result.stdout)
    assert result.stderr == ""
    assert not mark.exists()  # validating never imports it

    path.write_text(RULE)
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0 and "code to run" not in result.stdout


def test_exponents_without_a_dot_are_numbers(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("smoke: {lr: 3e-4, grad_norm_warn: 1E3}\n" + RULE)
    smoke = load_rules(path).smoke
    assert (smoke.lr, smoke.grad_norm_warn) == (3e-4, 1000.0)


def test_a_file_of_too_many_plain_values_fails_where_it_passes_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted as the file is read: a 9 MiB file of 300,000 rules was parsed whole (minutes)
    # and then blamed on "anchors and aliases", which it had none of.
    from preflight.config import bounded_yaml

    monkeypatch.setattr(bounded_yaml, "MAX_YAML_VALUES", 50)
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n" + "".join(f"  - {{id: r{i}, check: empty}}\n" for i in range(40)),
                    encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    message = str(info.value)
    assert "the file holds more than 50 values by here" in message
    assert "aliases" not in message
    assert "at line 11," in message  # where the 51st value is (rule 10), not line 41


def test_a_column_named_the_empty_string_is_still_a_field(tmp_path: Path) -> None:
    # A CSV header left blank names a column ''; inference may take it as the text, and a
    # rules file may name it: `fields:` refuses an empty list, not that name.
    data = tmp_path / "d.csv"
    data.write_text(",n\n" + "".join(f"some text number {i},{i}\n" for i in range(5)),
                    encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(data), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert RuleSet(fields={"text": ""}, rules=[]).fields.text == ""
