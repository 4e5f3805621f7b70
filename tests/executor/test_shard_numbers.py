"""A column of numbers only later shards hold: fields are inferred from the first shard, so
when it lacked the column (or held it in only some records) the ``numeric`` check never read
it, and a NaN there passed the gate with no word (a single file at least says "not checked:
numbers in only some records"). Now the gate fails with one ``unjudged_numbers`` finding
naming the shards and the option that checks them; the same with one worker and two."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.outputs import write_records

N = 300


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool even the small test files, cut into pieces of about 8 KB."""
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)


def _folder(tmp: Path, fmt: str, *, first: bool = False) -> Path:
    """part-0 without scores (or, ``first``, a score in every 5th record); part-1 and part-2
    with a score in every record, a NaN at part-2 row 11."""
    folder = tmp / "shards"
    folder.mkdir()
    for k in range(3):
        rows: list[dict[str, object]] = [
            {"text": f"shard {k} document {i} about this and that"} for i in range(N)]
        for i, row in enumerate(rows):
            if k or (first and i % 5 == 0):
                row["score"] = float("nan") if (k, i) == (2, 11) else i / 7
        write_records(folder / f"part-{k}.{fmt}", rows)
    return folder


FORMATS = ["jsonl", "jsonl.gz", "json", "csv", "parquet", "arrow"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("first", [False, True])
def test_numbers_only_later_shards_hold_fail_the_gate_saying_how(tmp_path: Path, fmt: str,
                                                                 first: bool) -> None:
    folder = _folder(tmp_path, fmt, first=first)
    one = run_preflight(folder, None, tmp_path / "one", workers=1, smoke=False)
    two = run_preflight(folder, None, tmp_path / "two", workers=2, smoke=False)
    assert "pool:scan" in two.timings
    assert "numeric" not in one.rules_file.fields
    found = pl.read_parquet(tmp_path / "one" / "findings.parquet")
    assert found.filter(pl.col("rule") == "schema")["code"].to_list() == ["unjudged_numbers"]
    detail = one.findings().filter(pl.col("code") == "unjudged_numbers")["detail"][0]
    assert f"'score' holds numbers in 2 shard(s) (part-1.{fmt}, part-2.{fmt})" in detail
    assert "--set fields.numeric=score" in detail
    assert one.verdict == "fail"
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_option_it_names_finds_the_nan(tmp_path: Path, fmt: str, workers: int) -> None:
    folder = _folder(tmp_path, fmt)
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--workers",
                                       str(workers), "--out", str(tmp_path / "r0")])
    assert result.exit_code == 1, result.output
    detail = pl.read_parquet(tmp_path / "r0" / "findings.parquet")["detail"][0]
    option = detail.split("--set ")[1].split(" checks")[0]
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--set", option,
                                       "--set", "values.allow_null=true", "--workers",
                                       str(workers), "--out", str(tmp_path / "r"),
                                       "--format", "json"])
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    assert found.select("file", "row", "code").rows() == [(f"part-2.{fmt}", 11, "nan")]
    assert "unjudged_numbers" not in result.output


def test_shards_that_all_hold_the_numbers_have_no_such_finding(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "jsonl")
    (folder / "part-0.jsonl").unlink()
    report = run_preflight(folder, None, tmp_path / "r", workers=2, smoke=False)
    assert report.rules_file.fields["numeric"] == "score"
    found = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    assert found.select("file", "row", "code").rows() == [("part-2.jsonl", 11, "nan")]


def _two_numbers(tmp: Path) -> Path:
    """part-0: ``a`` in every record (a NaN at row 5); part-1: ``a`` and ``b``."""
    folder = tmp / "two"
    folder.mkdir()
    for k in range(2):
        rows = [{"text": f"shard {k} document {i} about this", "a": i / 3,
                 **({"b": i / 7} if k else {})} for i in range(N)]
        if k == 0:
            rows[5]["a"] = float("nan")
        (folder / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_the_option_keeps_the_numbers_already_checked(tmp_path: Path) -> None:
    """The finding's option named the new field alone: following it, ``a`` (inferred
    from the first shard) went unchecked and its NaN passed."""
    folder = _two_numbers(tmp_path)
    report = run_preflight(folder, None, tmp_path / "r", workers=1, smoke=False)
    detail = report.findings().filter(pl.col("code") == "unjudged_numbers")["detail"][0]
    assert "--set 'fields.numeric=[a,b]'" in detail, detail
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--set",
                                       "fields.numeric=[a,b]", "--out",
                                       str(tmp_path / "r2"), "--format", "json"])
    found = pl.read_parquet(tmp_path / "r2" / "findings.parquet")
    assert ("part-0.jsonl", 5, "nan") in found.select("file", "row", "code").rows()
    assert "unjudged_numbers" not in result.output


@pytest.mark.parametrize("workers", [1, 2])
def test_a_number_the_first_shard_holds_is_not_unjudged_when_fields_are_set(
        tmp_path: Path, workers: int) -> None:
    """``--set fields.numeric=b`` leaves ``a`` out on purpose; the gate failed with
    "'a' holds numbers ... but not in every record of the first" (it is in all of them)."""
    folder = _two_numbers(tmp_path)
    CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--set", "fields.numeric=b",
                              "--workers", str(workers), "--out", str(tmp_path / "r")])
    found = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    assert "unjudged_numbers" not in found["code"].to_list()


def test_the_options_it_names_work_pasted_into_a_shell(tmp_path: Path) -> None:
    """A field named ``my score``: the message said ``--set fields.numeric=my score``,
    which a shell splits into two arguments (``fix``: "Got unexpected extra argument
    (score)")."""
    folder = tmp_path / "shards"
    folder.mkdir()
    write_records(folder / "part-0.jsonl", [{"text": f"first shard record {i} here"}
                                            for i in range(20)])
    write_records(folder / "part-1.jsonl", [
        {"text": f"second shard record {i} here", "my score": float("nan") if i == 7 else i / 3}
        for i in range(20)])
    report = run_preflight(folder, None, tmp_path / "r", workers=1, smoke=False)
    details = " ".join(report.findings()["detail"])
    options = shlex.split(details.split("--set ")[1].split(" checks")[0])
    assert options == ["fields.numeric=my score"], details
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--set", *options,
                                       "--out", str(tmp_path / "r2")])
    found = pl.read_parquet(tmp_path / "r2" / "findings.parquet")
    # (part-0's records, which lack the field, are its findings too)
    assert ("part-1.jsonl", 7, "nan") in found.select("file", "row", "code").rows(), (
        result.output)
