"""``fix`` takes the input options ``check`` takes (``--eval``, ``--limit``, ``--no-progress``,
field overrides), and ``fix --dry-run`` redacts text unless ``--show-text``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflight import FixOptions, run_preflight
from preflight.errors import ConfigError
from tests.test_cli import flat, invoke, write_jsonl

SECRET = "Zanzibarquux"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _fix(tmp_path: Path, data: Path, *args: str) -> tuple[int, str]:
    result = invoke("fix", data, "--out", tmp_path / "clean.jsonl", "--quarantine",
                    tmp_path / "q.jsonl", "--no-progress", *args)
    return result.exit_code, result.output


def test_dry_run_redacts_text_unless_show_text(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": f"see {SECRET}\u200b here"}])
    code, output = _fix(tmp_path, data, "--dry-run")
    assert code == 0, output
    assert SECRET not in output
    assert "before: xxx Xxxxxxxxxxxx<U+200B> xxxx" in output
    assert "after:  xxx Xxxxxxxxxxxx xxxx" in output
    assert "(text redacted: --show-text shows it)" in output
    code, output = _fix(tmp_path, data, "--dry-run", "--show-text")
    assert code == 0, output
    assert f"before: see {SECRET}<U+200B> here" in output
    assert f"after:  see {SECRET} here" in output
    assert not (tmp_path / "clean.jsonl").exists()


def test_limit_fixes_only_the_first_records(tmp_path: Path) -> None:
    records = [{"id": str(i), "text": f"record {i} text"} for i in range(5)]
    records[1]["text"] = "record 1\u200b text"  # within the limit: stripped
    records[3]["text"] = "record 3\u200b text"  # past it: never read
    lines = [json.dumps(r) for r in records]
    lines.insert(1, "{not json")  # a malformed line before the limit: quarantined, not lost
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = _fix(tmp_path, data, "--limit", "2")
    assert code == 0, output
    assert "--limit 2: only the first 2 records were read" in flat(output)
    assert _lines(tmp_path / "clean.jsonl") == [records[0], {"id": "1", "text": "record 1 text"}]
    assert [q["row"] for q in _lines(tmp_path / "q.jsonl")] == [1]
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text(encoding="utf-8"))
    assert manifest["input"]["limit"] == 2
    assert manifest["balanced"] is True


def test_limit_in_the_api(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"t{i}"} for i in range(4)])
    options = FixOptions(out=tmp_path / "c.jsonl", quarantine=tmp_path / "q.jsonl")
    report = run_preflight(data, fix=options, limit=3)
    assert report.fix is not None and report.fix["clean"]["records"] == 3
    assert len(_lines(tmp_path / "c.jsonl")) == 3


def test_eval_sets_aside_contaminated_records(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [
        {"id": "a", "text": "the answer to the benchmark question is forty two"},
        {"id": "b", "text": "an unrelated training sentence about the weather"},
    ])
    held = write_jsonl(tmp_path / "eval.jsonl",
                       [{"id": "e", "text": "the answer to the benchmark question is forty two"}])
    code, output = _fix(tmp_path, train, "--eval", held)
    assert code == 0, output
    assert [r["id"] for r in _lines(tmp_path / "clean.jsonl")] == ["b"]
    (quarantined,) = _lines(tmp_path / "q.jsonl")
    assert quarantined["row"] == 0
    assert "in_eval_exact" in json.dumps(quarantined)


@pytest.mark.parametrize("option", [["--text-field", "payload"], ["--set", "fields.text=payload"]])
def test_field_override(tmp_path: Path, option: list[str]) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [
        {"id": "1", "summary": "a much longer summary column " * 4, "payload": "a\u200bb"},
    ])
    code, output = _fix(tmp_path, data, *option)
    assert code == 0, output
    assert _lines(tmp_path / "clean.jsonl")[0]["payload"] == "ab"


@pytest.mark.parametrize(("limit", "quarantined"), [(2, [1]), (3, [1, 4]), (9, [1, 4])])
def test_limit_keeps_what_the_gate_read(tmp_path: Path, limit: int,
                                        quarantined: list[int]) -> None:
    """Malformed lines after the last record are read by the gate when the limit is not
    reached before them, and then they must land in the quarantine (nothing lost)."""
    lines = ['{"text": "a"}', "{bad", '{"text": "b"}', '{"text": "c"}', "{bad too"]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = _fix(tmp_path, data, "--limit", str(limit))
    assert code == 0, output
    assert [q["row"] for q in _lines(tmp_path / "q.jsonl")] == quarantined
    assert len(_lines(tmp_path / "clean.jsonl")) == min(limit, 3)
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text(encoding="utf-8"))
    assert manifest["balanced"] is True


@pytest.mark.parametrize(("option", "example"), [
    ("--out", "clean.jsonl"), ("--quarantine", "rejected.jsonl"),
    ("--manifest", "fix-manifest.json")])
@pytest.mark.parametrize("end", ["/", "/."])
def test_an_output_ending_in_a_slash_is_refused_not_written_as_a_file(
        tmp_path: Path, option: str, example: str, end: str) -> None:
    # `--out out/` wrote a file named `out`: the folder the user meant became a file.
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "hello\u200b there"}])
    paths = {"--out": str(tmp_path / "clean.jsonl"), "--quarantine": str(tmp_path / "q.jsonl"),
             "--manifest": str(tmp_path / "m.json")}
    paths[option] = str(tmp_path / "folder") + end
    args = [a for opt, p in paths.items() for a in (opt, p)]
    result = invoke("fix", data, *args)
    assert result.exit_code == 2, result.output
    assert f"names a folder; this output is one file: name it, e.g. " \
           f"{tmp_path / 'folder'}/{example}" in flat(result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_init_out_ending_in_a_slash_is_refused(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "hello there"}])
    result = invoke("init", data, "--out", f"{tmp_path / 'conf'}/")
    assert result.exit_code == 2, result.output
    assert "e.g. " in result.output and not (tmp_path / "conf").exists()


def test_fix_options_take_strings_and_refuse_a_folder_or_nothing(tmp_path: Path) -> None:
    # FixOptions(out="clean.jsonl") raised AttributeError ('str' has no attribute 'suffix').
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "hello\u200b there"}])
    clean = str(tmp_path / "clean.jsonl")
    report = run_preflight(data, smoke=False, fix=FixOptions(
        out=clean, quarantine=str(tmp_path / "q.jsonl")))
    assert _lines(Path(clean)) == [{"id": "1", "text": "hello there"}]
    assert report.fix["clean"]["records"] == 1
    with pytest.raises(ConfigError, match="ends with a slash"):
        FixOptions(out=f"{tmp_path}/", quarantine="q.jsonl")
    with pytest.raises(ConfigError, match="quarantine is empty"):
        FixOptions(out="c.jsonl", quarantine=" ")


@pytest.mark.parametrize(("out", "quarantine", "flag", "hint"), [
    ("fx/clean", "q.jsonl", "--out", "fx/clean.jsonl"),
    ("clean.txt", "q.jsonl", "--out", "clean.txt.jsonl"),
    ("clean.jsonl", "fx/rej", "--quarantine", "fx/rej.jsonl"),
    ("clean.jsonl", "rej.parquet", "--quarantine", "rej.jsonl")])
def test_an_output_name_that_would_not_read_back_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str, quarantine: str,
        flag: str, hint: str) -> None:
    # preflight picks a reader by the suffix: fx/clean would be written but never read back
    monkeypatch.chdir(tmp_path)
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "plain words here"}])
    result = invoke("fix", data, "--out", out, "--quarantine", quarantine, "--no-progress")
    assert result.exit_code == 2, result.output
    message = flat(result.output)
    assert f"{flag} " in message
    assert f"name it {hint}" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_a_json_name_for_json_lines_outputs_reads_back(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "plain words here"}])
    result = invoke("fix", data, "--out", tmp_path / "clean.json", "--quarantine",
                    tmp_path / "q.json", "--no-progress")
    assert result.exit_code == 0, result.output
    assert invoke("check", tmp_path / "clean.json", "--no-smoke", "--out",
                  tmp_path / "r").exit_code == 0
