"""``format_str``: ``pl.format``'s text from ``concat_str``. ``pl.format`` panicked on a
column holding an empty chunk (what a filter leaves of a list expression's chunked
output): a pretty-printed JSON array of tokenized records with negative ids crashed
``check`` with a Rust panic and a traceback (polars #25187)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from preflight import run_preflight
from preflight.checks.token_lists import all_ignored, length_mismatch, out_of_range
from preflight.format_expr import format_str


def _chunked_ids() -> pl.Series:
    """Token id lists in four chunks; the third holds no negative id, so filtering the
    flagged rows leaves it empty."""
    sizes = [884, 867, 876, 373]
    values = [[1, 2]] * sum(sizes)
    for j in (5, 1234, 2999):
        values[j] = [-3, 4]
    parts, at = [], 0
    for n in sizes:
        parts.append(pl.Series("v", values[at:at + n], dtype=pl.List(pl.Int64)))
        at += n
    return pl.concat(parts, rechunk=False)


def test_the_token_list_details_survive_an_empty_chunk() -> None:
    ids = _chunked_ids()
    frame = out_of_range(ids, "input_ids", None, None, "token_id_out_of_range")
    assert frame["i"].to_list() == [5, 1234, 2999]
    assert frame["detail"][0] == ("input_ids[0]: -3 outside [0, 2^31), past any vocabulary "
                                  "(no vocab_size declared) (out-of-range values: 1)")
    labels = pl.concat([ids.slice(0, 10), pl.Series("v", [[-100]], dtype=pl.List(pl.Int64))],
                       rechunk=False)
    assert all_ignored(labels, "labels", -100)["i"].to_list() == [10]
    assert length_mismatch(ids, ids.list.head(1), "labels", "input_ids").height == len(ids)


@pytest.mark.parametrize(("template", "args"), [
    ("{} of {}", ("a", "b")), ("'{}'", ("s",)), ("no slots", ()), ("{}{}", ("a", "s")),
    ("x {} y", (pl.col("f") * 2,))])
def test_format_str_is_pl_format(template: str, args: tuple) -> None:
    frame = pl.DataFrame({"a": [1, None, 3], "b": [0.5, 2.0, None], "s": ["x", "y", None],
                          "f": [1.25, None, 1e20]})
    ours = frame.with_columns(format_str(template, *args).alias("t"))["t"].to_list()
    theirs = frame.with_columns(pl.format(template, *args).alias("t"))["t"].to_list()
    assert ours == theirs


def test_a_slot_count_mismatch_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="2 slots for 1 values"):
        format_str("{} {}", "a")


def test_a_pretty_json_array_of_token_ids_with_negative_ids_is_checked(
        tmp_path: Path) -> None:
    rng = random.Random(5)
    rows = []
    for _ in range(3000):
        ids = [min(int(rng.paretovariate(1.0) * 10), 50_000) for _ in range(rng.randint(5, 30))]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids),
                     "labels": [*ids[1:], -100]})
    for j in (5, 1234, 2999):
        rows[j]["input_ids"][0] = -3
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(rows, indent=2))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    frame = report.findings()
    assert frame["row"].to_list() == [5, 1234, 2999]
    assert set(frame["code"]) == {"token_id_out_of_range"}


def test_a_rust_panic_is_an_internal_error_not_a_failed_gate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyo3's PanicException derives from BaseException: it escaped the CLI's handler, with
    # a traceback and exit 1, which a CI reads as "the gate failed".
    from click.testing import CliRunner
    from polars.exceptions import PanicException

    from preflight.cli import main

    def panics(*args: object, **kwargs: object) -> None:
        raise PanicException("assertion failed: i < self.len()")

    monkeypatch.setattr("preflight.pipeline.scan", panics)
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a"}\n')
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert "internal error: PanicException: assertion failed" in " ".join(
        result.output.split())
    assert "Traceback" not in result.output
