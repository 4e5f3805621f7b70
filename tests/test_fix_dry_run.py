"""``fix --dry-run`` answers what the real run would: round one runs through writers that write
nowhere, so a record Parquet or Arrow cannot hold is refused alike (exit 2, the same message)
and the counts are the real run's; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import preflight.fix.writers.table as table_writer
from preflight import FixOptions, run_preflight
from preflight.cli import main

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "invisible", "check": "invisible_unicode"}]}
CLEAN = {"id": 0, "text": "fine"}
# Records after a clean one, as JSON text (escapes kept as written).
FAULTS = {
    "lone_surrogate": ['{"id": 1, "text": "a \\ud800 b"}'],
    "past_int64": ['{"id": 1, "text": "b", "n": 9223372036854775808}'],
    "past_uint64": ['{"id": 1, "text": "b", "n": 18446744073709551616}'],
    "past_float64": ['{"id": 1, "text": "b", "n": 1e400}'],
    "below_float64": ['{"id": 1, "text": "b", "n": 0.%s1}' % ("0" * 330)],  # no exponent
    "clashing_types": ['{"id": 1, "text": "b", "n": 1}', '{"id": 2, "text": "c", "n": "one"}'],
    "empty_struct": ['{"id": 1, "text": "b", "n": {}}'],  # Parquet holds no struct<>; Arrow does
}


def _write(folder: Path, layout: str, records: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if layout == "json":
        src = folder / "in.json"
        src.write_text("[\n" + ",\n".join(records) + "\n]\n", encoding="utf-8")
    else:
        src = folder / "in.jsonl"
        src.write_text("".join(f"{r}\n" for r in records), encoding="utf-8")
    return src


def _both(tmp_path: Path, src: Path | str, out: str, *, stdin: bytes | None = None,
          extra: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """The dry run (checked to write nothing), then the real run."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    folder = tmp_path / "out"
    args = ["fix", str(src), "--rules", str(rules), "--out", str(folder / out),
            "--quarantine", str(folder / "q.jsonl"), "--no-progress", *extra]
    dry = CliRunner().invoke(main, [*args, "--dry-run"], input=stdin)
    assert not folder.exists(), "the dry run wrote something"
    real = CliRunner().invoke(main, args, input=stdin)
    return dry, real


@pytest.mark.parametrize("out", ["clean.parquet", "clean.arrow"])
@pytest.mark.parametrize("layout", ["jsonl", "json"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, fault: str, layout: str,
                                                     out: str) -> None:
    # The dry run said "0 would be quarantined", exit 0; the real run was exit 2.
    src = _write(tmp_path / "in", layout, [json.dumps(CLEAN), *FAULTS[fault]])
    dry, real = _both(tmp_path, src, out)
    refused = not (fault == "empty_struct" and out.endswith(".arrow"))
    assert real.exit_code == (2 if refused else 0), real.output
    assert dry.exit_code == real.exit_code, dry.output
    if refused:
        assert dry.output == real.output
        said = " ".join(real.output.split())
        assert ("row 1" in said) == (fault not in ("clashing_types", "empty_struct"))
        if fault == "clashing_types":  # the field is named, not "a field's values"
            assert "(field 'n': values have types that cannot share a column" in said


# Chunks of two records: what only typing the whole output finds.
ACROSS_CHUNKS = {
    # types that share no column, in different chunks
    "clash": ([{"n": 1}, {"n": 2}, {"n": "one"}], 2),
    # an integer a float column cannot hold exactly: only casting the chunk finds it
    "int_then_float": ([{"n": 2**60 + 1}, {"n": 1}, {"n": 1.5}], 2),
    # a first chunk Parquet cannot hold alone (struct<>), written in the unified schema
    "empty_struct_then_field": ([{"n": {}}, {"n": {}}, {"n": {"a": 1}}], 0),
    "null_then_text": ([{"n": None}, {"n": None}, {"n": "x"}], 0),
}


@pytest.mark.parametrize("out", ["clean.parquet", "clean.arrow"])
@pytest.mark.parametrize("case", list(ACROSS_CHUNKS))
def test_a_dry_run_types_the_chunks_as_the_real_run(tmp_path: Path, case: str, out: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_writer, "_CHUNK", 2)
    values, code = ACROSS_CHUNKS[case]
    records = [json.dumps({"id": i, "text": f"t{i}", **v}) for i, v in enumerate(values)]
    dry, real = _both(tmp_path, _write(tmp_path / "in", "jsonl", records), out)
    assert real.exit_code == code, real.output
    assert dry.exit_code == code, dry.output
    if code:
        assert dry.output == real.output


@pytest.mark.parametrize("out", ["clean.parquet", "clean.arrow", "clean.jsonl"])
@pytest.mark.parametrize("layout", ["jsonl", "json", "csv"])
def test_a_dry_run_counts_what_the_real_run_does(tmp_path: Path, layout: str, out: str
                                                 ) -> None:
    # A record left empty by its fix is set aside by the real run; the dry run counted it
    # as changed.
    texts = ["fine", "zero\u200bwidth", "\u200b", "also fine"]
    if layout == "csv":
        src = tmp_path / "in" / "in.csv"
        src.parent.mkdir()
        src.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)),
                       encoding="utf-8")
    else:
        src = _write(tmp_path / "in", layout,
                     [json.dumps({"id": i, "text": t}) for i, t in enumerate(texts)])
    options = FixOptions(out=tmp_path / "out" / out, quarantine=tmp_path / "out" / "q.jsonl")
    dry = run_preflight(src, RULES, smoke=False,
                        fix=FixOptions(**{**vars(options), "dry_run": True})).fix
    assert not (tmp_path / "out").exists()
    real = run_preflight(src, RULES, smoke=False, fix=options).fix
    assert dry is not None and real is not None
    assert (dry["would_change"], dry["would_quarantine"]) == (1, 1)
    assert (real["clean"]["changed"], real["quarantine"]["records"]) == (1, 1)
    assert dry["not_checked"] is None


def test_a_dry_run_of_a_shard_folder_names_the_shard(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.jsonl").write_text('{"id": 0, "text": "fine"}\n')
    (shards / "b.jsonl").write_text('{"id": 1, "text": "ok"}\n{"id": 2, "text": "\\udc00"}\n')
    dry, real = _both(tmp_path, shards, "clean.parquet")
    assert real.exit_code == dry.exit_code == 2, real.output
    assert dry.output == real.output
    assert "row 1 of b.jsonl" in " ".join(real.output.split())


@pytest.mark.parametrize("fault", ["past_int64", None])
def test_a_dry_run_of_standard_input(tmp_path: Path, fault: str | None) -> None:
    lines = [json.dumps(CLEAN), *(FAULTS[fault] if fault else [])]
    piped = "".join(f"{line}\n" for line in lines).encode()
    dry, real = _both(tmp_path, "-", "clean.arrow", stdin=piped)
    assert real.exit_code == dry.exit_code == (2 if fault else 0), real.output
    if fault:
        assert dry.output == real.output
    else:
        assert "0 would be quarantined" in dry.output


def test_the_dry_run_says_the_real_run_gates_its_output_again(tmp_path: Path) -> None:
    # Deleting a control character can make two records equal: the real run checks again.
    src = _write(tmp_path / "in", "jsonl", [json.dumps({"id": 0, "text": "a\u0007b"}),
                                            json.dumps({"id": 1, "text": "ab"})])
    dry, _ = _both(tmp_path, src, "clean.parquet")
    assert dry.exit_code == 0, dry.output
    assert "gates its clean output again" in " ".join(dry.output.split())


def test_numbers_at_the_64_bit_edges_are_written(tmp_path: Path) -> None:
    # Only a record with 19 digits in a row or an exponent is parsed again for its numbers.
    src = _write(tmp_path / "in", "jsonl", [
        '{"id": 0, "text": "a", "n": 9223372036854775807, "x": 1.5e300}',
        '{"id": 1, "text": "b", "n": -9223372036854775808, "x": 123456789012345678.5}'])
    dry, real = _both(tmp_path, src, "clean.parquet")
    assert real.exit_code == dry.exit_code == 0, real.output
    table = pq.read_table(tmp_path / "out" / "clean.parquet")
    assert table.column("n").to_pylist() == [2**63 - 1, -(2**63)]
