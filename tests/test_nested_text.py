"""The text nested in an object (``{"id": 1, "data": {"text": ..., "lang": "en"}}``, a
Parquet/Arrow struct column, a ``datasets`` struct feature) is the text: inferred as
``data.text``, named by ``--text-field data.text``, ``fields.text`` or ``--set``, checked by
every text check and mended in place by ``fix``. It was read by no text check ("flatten it
first"), and ``--text-field data.text`` was exit 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from preflight import run_preflight
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.outputs import fix_setting_aside, read_records, write_records
from tests.test_cli import flat, invoke
from tests.tokenizers import build_bpe, made_up_text

ZW = "\u200b"
SUFFIXES = [".jsonl", ".json", ".parquet", ".arrow", "shards", "dataset"]


def _records(*, loose: bool) -> list[dict[str, Any]]:
    """Twelve records, faults planted: a zero-width space in row 2's text, row 4 a copy of
    row 1, row 6's text empty, row 8's object null; with ``loose`` (JSON only: a column
    cannot hold them) row 9's ``data`` a string and row 10 without one."""
    rows: list[dict[str, Any]] = [
        {"id": i, "data": {"text": f"document {i} tells of item {i} and its kind",
                           "lang": "en"}} for i in range(12)]
    rows[2]["data"]["text"] = f"document 2 te{ZW}lls of item 2"
    rows[4]["data"]["text"] = rows[1]["data"]["text"]
    rows[6]["data"]["text"] = ""
    rows[8]["data"] = None
    if loose:
        rows[9]["data"] = "a string where an object belongs"
        del rows[10]["data"]
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix:
        return write_records(path, rows)
    if path.name == "dataset":  # a datasets save_to_disk folder, data a struct feature
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
        return path
    path.mkdir()  # a folder of two JSON Lines shards
    write_records(path / "part-0.jsonl", rows[:6])
    write_records(path / "part-1.jsonl", rows[6:])
    return path


def _findings(report: Any) -> dict[tuple[str, int], str]:
    """(check, row in the corpus) -> detail; shard rows counted on from the first's six."""
    frame = report.findings()
    out = {}
    for check, row, file, detail in frame.select("check", "row", "file", "detail").iter_rows():
        out[(check, row + (6 if file == "part-1.jsonl" else 0))] = detail
    return out


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_nested_text_is_inferred_and_every_text_check_reads_it(tmp_path: Path,
                                                                   suffix: str) -> None:
    loose = suffix in (".jsonl", ".json", "shards")
    data = _write(tmp_path / f"d{suffix}" if suffix[0] == "." else tmp_path / suffix,
                  _records(loose=loose))
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.rules_file.fields["text"] == "data.text"
    assert report.rules_file.inferred["text"] == "'data.text' (nested in 'data')"
    found = _findings(report)
    frame = report.findings()
    hidden = frame.filter(pl.col("check") == "invisible_unicode")
    # Read once, as the text: not again as a string nested in 'data'.
    assert hidden.height == 1 and hidden["detail"][0].startswith("data.text: 1× U+200B")
    assert found[("exact_duplicate", 4)].startswith("duplicate of row 1 ")
    assert found[("empty", 6)] == "data.text: empty string"
    assert found[("empty", 8)] == "data.text: missing or null"
    if loose:  # a string where the object belongs, no object at all: findings, not crashes
        assert found[("empty", 9)] == ("data.text: missing or null ('data' is a string, "
                                         "not an object)")
        assert found[("empty", 10)] == "data.text: missing or null"
    empties = {row for check, row in found if check == "empty"}
    assert empties == ({6, 8, 9, 10} if loose else {6, 8})
    assert sorted(frame["row"].drop_nulls().to_list()) == sorted(frame["row"].to_list())


@pytest.mark.parametrize(("suffix", "out"), [
    (".jsonl", "clean.jsonl"), (".json", "clean.jsonl"), (".parquet", "clean.parquet"),
    (".arrow", "clean.arrow"), ("shards", "clean.jsonl"), ("dataset", "clean.parquet")])
def test_fix_mends_the_nested_text_in_place_and_sets_aside_whole_records(
        tmp_path: Path, suffix: str, out: str) -> None:
    loose = suffix in (".jsonl", ".json", "shards")
    rows = _records(loose=loose)
    data = _write(tmp_path / f"d{suffix}" if suffix[0] == "." else tmp_path / suffix, rows)
    clean = tmp_path / out
    fixed, aside = fix_setting_aside(data, clean, tmp_path / "q.jsonl")
    gone = {4, 6, 8, 9, 10} if loose else {4, 6, 8}
    want = [copy.deepcopy(r) for i, r in enumerate(rows) if i not in gone]
    want[2]["data"]["text"] = "document 2 tells of item 2"
    assert fixed == want
    assert sorted(e["record"]["id"] for e in aside) == sorted(gone)  # whole records, as read
    assert {e["record"]["id"]: e["record"] for e in aside} == {i: rows[i] for i in gone}
    if suffix == ".jsonl":  # untouched lines byte for byte, the changed one in its string
        before, after = data.read_bytes().splitlines(), clean.read_bytes().splitlines()
        kept = [line for i, line in enumerate(before) if i not in gone]
        assert [a for a, b in zip(after, kept, strict=True) if a != b] == [after[2]]
        assert after[2] == before[2].replace(ZW.encode(), b"")
    if suffix == ".parquet":
        assert pq.read_schema(clean) == pq.read_schema(data)
    if suffix == "dataset":
        import datasets

        kept_schema = datasets.load_from_disk(str(data)).data.schema.remove_metadata()
        assert pq.read_schema(clean).remove_metadata() == kept_schema
    again = run_preflight(clean, smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


@pytest.mark.parametrize("how", [
    ["--text-field", "data.text"], ["--set", "fields.text=data.text"], "rules"])
def test_the_nested_text_named_by_option_set_or_rules_file(tmp_path: Path, how: Any) -> None:
    rows = _records(loose=True)
    rows[3]["body"] = "a longer top-level string that inference would otherwise take " * 3
    data = _write(tmp_path / "d.jsonl", rows)
    if how == "rules":
        rules = tmp_path / "rules.yaml"
        rules.write_text("fields:\n  text: data.text\n  id: id\nrules:\n"
                         "  - {id: empty, check: empty}\n"
                         "  - {id: hidden, check: invisible_unicode}\n")
        how = ["--rules", str(rules)]
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", *how)
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["rules_file"]["fields"]["text"] == "data.text"
    frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    empty = frame.filter(pl.col("check") == "empty")
    assert sorted(empty["row"].to_list()) == [6, 8, 9, 10]
    hidden = frame.filter(pl.col("check") == "invisible_unicode")
    assert hidden["row"].to_list() == [2] and hidden["detail"][0].startswith("data.text:")


def test_a_top_level_key_with_the_dot_wins_over_the_path(tmp_path: Path) -> None:
    rows = [{"id": i, "data.text": f"top level {i}", "data": {"text": f"nested {i}"}}
            for i in range(3)]
    rows[1]["data"]["text"] = f"nested{ZW} 1"  # read as a nested string, not as the text
    data = _write(tmp_path / "d.jsonl", rows)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--text-field", "data.text")
    frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    hidden = frame.filter(pl.col("check") == "invisible_unicode")
    assert hidden["row"].to_list() == [1], result.output
    assert hidden["detail"][0].startswith("data.text:")
    assert frame.filter(pl.col("check") == "empty").height == 0


@pytest.mark.parametrize(("records", "message"), [
    ([{"id": 1, "data": {"body": "x", "lang": "en"}}],
     "--text-field: data.text: no field 'text' in object 'data'; fields found in that "
     "object: 'body', 'lang'"),
    ([{"id": 1, "data": {"items": [{"text": "x"}]}}],
     "data.items.text: 'data.items' holds lists, and a text field's path is not followed "
     "into a list"),
    ([{"id": 1, "data": "a string"}, {"id": 2, "data": "another"}],
     "data.text: 'data' holds strings, not objects"),
    ([{"id": 1, "data": {"deep": {"text": "x"}}}],
     "data.text: no field 'text' in object 'data'; fields found in that object: 'deep'"),
])
def test_a_path_that_leads_nowhere_is_exit_2(tmp_path: Path, records: list,
                                            message: str) -> None:
    data = _write(tmp_path / "d.jsonl", records)
    name = message.split(": ")[1] if message.startswith("--") else message.split(":")[0]
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", "--text-field", name)
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)


def test_a_list_on_the_path_in_mixed_records_is_exit_2(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", [{"id": 1, "data": [{"text": "x"}]},
                                        {"id": 2, "data": None}])
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--text-field", "data.text")
    assert result.exit_code == 2, result.output
    assert "'data' holds lists" in flat(result.output)


def test_csv_cannot_nest(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    csv.write_text("id,a\n1,hello\n2,world\n")
    for name, said in (("a.b", "'a' holds strings, not objects"),
                       ("x.b", "no column 'x.b' in the data; columns found: id, a")):
        result = invoke("check", csv, "--no-smoke", "--out", tmp_path / "r",
                        "--text-field", name)
        assert result.exit_code == 2, result.output
        assert said in flat(result.output)


def test_a_very_deep_path(tmp_path: Path) -> None:
    # 40 objects down: past the depth a typed column holds (read value by value there).
    def nest(text: str) -> dict[str, Any]:
        value: Any = {"text": text}
        for _ in range(40):
            value = {"d": value}
        return value

    rows = [{"id": i, "data": nest(f"deep text {i}")} for i in range(4)]
    rows[2]["data"] = nest(f"deep{ZW} text")
    rows[3]["data"] = nest("deep text 1")
    data = _write(tmp_path / "d.jsonl", rows)
    path = "data." + "d." * 40 + "text"
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", "--text-field", path)
    assert result.exit_code == 1, result.output
    frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    got = {(c, r) for c, r in frame.select("check", "row").iter_rows()}
    assert got == {("invisible_unicode", 2), ("exact_duplicate", 3)}
    assert frame.filter(pl.col("check") == "invisible_unicode")["detail"][0].startswith(path)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bpe(tmp_path_factory.mktemp("bpe"))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_token_length_and_truncation_on_the_nested_text(tmp_path: Path, bpe: Path,
                                                        suffix: str) -> None:
    tok = Tokenizer.from_file(str(bpe))
    long = " ".join(made_up_text(60, seed=5))
    rows = [{"id": 0, "data": {"text": long, "lang": "en"}},
            {"id": 1, "data": {"text": "short and fine", "lang": "en"}}]
    data = _write(tmp_path / f"d{suffix}", rows)
    clean, quarantine = tmp_path / f"clean{suffix}", tmp_path / "q.jsonl"
    result = invoke("fix", data, "--out", clean, "--quarantine", quarantine,
                    "--context-window", "50", "--tokenizer", bpe, "--marker", " <cut>")
    assert result.exit_code == 0, result.output
    assert quarantine.read_text() == ""
    fixed = read_records(clean)
    cut = fixed[0]["data"]["text"]
    assert cut.endswith(" <cut>") and len(tok.encode(cut).ids) <= 50
    assert long.startswith(cut.removesuffix(" <cut>"))
    assert fixed[0]["data"]["lang"] == "en" and fixed[1] == rows[1]
    assert "data.text" not in fixed[0]  # written inside the object, not beside it


def test_the_smoke_test_trains_on_the_nested_text() -> None:
    from preflight.config import Fields, ModelFacts
    from preflight.smoke.encode import Encoder

    enc = Encoder("lm", Fields(text="data.text"), ModelFacts(), None, max_length=64)
    rows = [{"data": {"text": "hello there"}}, {"data": None}, {"data": "a string"}]
    ids = [e.ids for e in enc.encode(rows)]
    flat_ids = Encoder("lm", Fields(text="text"), ModelFacts(), None, max_length=64).encode(
        [{"text": "hello there"}])[0].ids
    assert ids[0] == flat_ids and len(ids[0] or []) >= len("hello there")
    assert ids[1] == ids[2]  # no text: what a record with none encodes to, no crash


def test_two_workers_equal_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 2_000)
    rows = _records(loose=True) * 20  # every record after the first twelve a copy
    data = _write(tmp_path / "d.jsonl", rows)
    one = run_preflight(data, smoke=False, out=tmp_path / "one", workers=1)
    two = run_preflight(data, smoke=False, out=tmp_path / "two", workers=2)
    assert "pool:scan" in two.timings
    # The text found in every piece: no rule "could not run" for want of 'data.text'.
    assert all(r.message is None for r in two.rules), [r.message for r in two.rules]
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


def test_near_duplicates_of_the_nested_text(tmp_path: Path) -> None:
    words = made_up_text(400, seed=3)
    rows = [{"id": i, "data": {"text": " ".join(words[i * 20:(i + 1) * 20])}} for i in range(20)]
    rows.append({"id": 20, "data": {"text": rows[5]["data"]["text"] + " extra"}})
    data = _write(tmp_path / "d.parquet", rows)
    rules = tmp_path / "rules.yaml"
    rules.write_text("fields: {text: data.text}\nrules:\n"
                     "  - {id: near, check: near_duplicate, threshold: 0.7}\n")
    report = run_preflight(data, rules=rules, smoke=False, out=tmp_path / "r")
    frame = report.findings()
    assert frame.select("row", "code", "cluster").rows() == [(20, "near_duplicate_of", 5)]


def test_dry_run_names_the_nested_text_once(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", _records(loose=True))
    result = invoke("fix", data, "--dry-run", "--show-text", "--out", tmp_path / "c.jsonl",
                    "--quarantine", tmp_path / "q.jsonl")
    assert result.exit_code == 0, result.output
    assert result.output.count("row 2 data.text:") == 1, result.output


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_text_inside_a_column_whose_name_holds_a_dot_is_read_once(tmp_path: Path,
                                                                      suffix: str) -> None:
    """``a.b.c`` with a column named ``a.b``: the nested string was set aside as ``a.b.c``
    while it is shown ``["a.b"].c``, so the character checks read it twice (two findings
    for one zero-width space)."""
    rows = [{"id": i, "a.b": {"c": f"text number {i}"}} for i in range(3)]
    rows[1]["a.b"]["c"] = f"text{ZW} number 1"
    data = write_records(tmp_path / f"d{suffix}", rows)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--text-field", "a.b.c")
    frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    hidden = frame.filter(pl.col("check") == "invisible_unicode")
    assert hidden["row"].to_list() == [1], result.output
