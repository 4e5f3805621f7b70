"""What starting preflight loads: ``--help`` (of the group and of every command) and
``import preflight`` load no heavy library, and numba loads only for the checks that use it
(issue 17, item 3). Each case runs in a fresh interpreter and reads ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What --help and `import preflight` must not load (each costs 0.05-1 s to import).
HEAVY = ("numba", "torch", "matplotlib", "tokenizers", "transformers", "tiktoken", "datasets",
         "polars", "pyarrow", "numpy", "pydantic", "rich", "jinja2")

HELP_EVERY_COMMAND = """
import json, sys
import click
from preflight.cli import main

def commands(group, prefix):
    yield prefix
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, [*prefix, name])
        else:
            yield [*prefix, name]

shown = []
for args in commands(main, []):
    try:
        main.main([*args, "--help"], prog_name="preflight")
    except SystemExit as e:
        assert e.code == 0, (args, e.code)
    shown.append(" ".join(args))
print(json.dumps({"commands": shown, "loaded": sorted(sys.modules)}))
"""


def _python(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def test_python_m_preflight_help_loads_no_heavy_library() -> None:
    proc = _python("-X", "importtime", "-m", "preflight", "--help")
    assert "Usage:" in proc.stdout and "check" in proc.stdout
    # -X importtime lists every module imported, one a line: "import time: self | cum | name"
    loaded = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
              if line.startswith("import time:") and "|" in line]
    assert "click" in loaded and "preflight.cli" in loaded  # the listing is real
    assert _heavy(loaded) == []


def test_every_command_help_loads_no_heavy_library() -> None:
    found = json.loads(_python("-c", HELP_EVERY_COMMAND).stdout.splitlines()[-1])
    for command in ("", "check", "smoke", "fix", "diff", "init", "report render",
                    "rules list", "rules validate", "rules show"):
        assert command in found["commands"], command
    assert _heavy(found["loaded"]) == []


def test_import_preflight_loads_no_heavy_library() -> None:
    out = _python("-c", "import json, sys, preflight; preflight.run_preflight; "
                        "print(json.dumps(sorted(sys.modules)))").stdout
    assert "preflight.errors" in json.loads(out)
    assert _heavy(json.loads(out)) == []


def test_public_names_load_on_first_use() -> None:
    import preflight

    for name in preflight.__all__:
        assert getattr(preflight, name) is not None, name
    from preflight.config import load_rules

    assert preflight.load_rules is load_rules
    assert set(preflight.__all__) <= set(dir(preflight))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        preflight.nope  # noqa: B018


RUN = """
import json, sys
from preflight import run_preflight
rules = {"rules": [{"id": "r", "check": %r}], "fields": {"text": "text"}}
report = run_preflight(%r, rules, smoke=False)
print(json.dumps({"records": report.source.records, "rules": [r.id for r in report.rules],
                  "loaded": sorted(sys.modules)}))
"""


def _run_loads(tmp_path: Path, check: str) -> dict[str, object]:
    data = tmp_path / "d.jsonl"
    texts = [f"record number {i} of a small corpus with a few words" for i in range(30)]
    texts[7] = texts[3]  # a duplicate for the duplicate checks to find
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    found = json.loads(_python("-c", RUN % (check, str(data)), cwd=tmp_path).stdout)
    assert found["records"] == 30 and "r" in found["rules"]
    return found


def test_checks_registry_imports_without_numba() -> None:
    out = _python("-c", "import json, sys; from preflight.checks import registry; "
                        "names = [c.name for c in registry.all_checks()]; "
                        "print(json.dumps({'names': names, 'loaded': sorted(sys.modules)}))")
    found = json.loads(out.stdout)
    assert "near_duplicate" in found["names"] and "overlap" in found["names"]
    assert {"numba", "torch", "matplotlib", "tokenizers"}.isdisjoint(found["loaded"])


@pytest.mark.parametrize("check", ["exact_duplicate", "invisible_unicode", "encoding"])
def test_a_run_without_near_duplicates_loads_no_numba(tmp_path: Path, check: str) -> None:
    loaded = set(_run_loads(tmp_path, check)["loaded"])  # type: ignore[arg-type]
    assert "polars" in loaded  # the run really ran
    assert {"numba", "torch", "matplotlib", "tokenizers", "transformers"}.isdisjoint(loaded)


def test_a_near_duplicate_run_loads_numba(tmp_path: Path) -> None:
    loaded = set(_run_loads(tmp_path, "near_duplicate")["loaded"])  # type: ignore[arg-type]
    assert "numba" in loaded
    assert {"torch", "matplotlib"}.isdisjoint(loaded)


NO_PANDAS = """
import json, sys
from preflight import run_preflight
report = run_preflight(%r, None, %r, smoke=False)
print(json.dumps({"codes": {r.id: r.codes for r in report.rules if r.codes},
                  "loaded": sorted(sys.modules)}))
"""


def test_a_default_run_with_findings_loads_no_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas (0.3 s) the first time it types Python or numpy values; the
    reader and the findings do not ask it to, also for blocks with a malformed line and
    with a float column (each process, each pool worker)."""
    lines = [json.dumps({"id": i, "text": f"record {i} of a corpus with a few words in it",
                         "score": i / 7}) for i in range(400)]
    lines[5] = lines[4]  # an exact duplicate
    lines[9] = json.dumps({"id": 9, "text": "zero\u200bwidth", "score": 2.0**60})
    lines[200] = '{"id": 200, "text": "cut off'  # malformed: its block goes line by line
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = json.loads(_python("-c", NO_PANDAS % (str(data), str(tmp_path / "out")),
                               cwd=tmp_path).stdout)
    assert found["codes"]["malformed"] == {"invalid_json": 1}
    assert found["codes"]["exact-dupes"] == {"exact_duplicate_of": 1}
    assert "zero_width_space" in found["codes"]["hidden-chars"]
    assert (tmp_path / "out" / "findings.parquet").is_file()
    assert "pandas" not in found["loaded"]


@pytest.mark.parametrize("shape", ["json-array", "csv", "parquet", "arrow", "shards",
                                   "datasets"])
def test_other_input_formats_with_findings_load_no_pandas(tmp_path: Path, shape: str) -> None:
    """The same on every other input shape (findings with ids, floats, one past 2**53)."""
    import polars as pl

    records = [{"id": i, "text": f"record {i} of a corpus with a few words in it",
                "score": i / 7} for i in range(400)]
    records[5] = dict(records[4])  # an exact duplicate
    records[9] = {"id": 9, "text": "zero\u200bwidth", "score": 2.0**60}
    frame = pl.DataFrame(records)
    data = tmp_path / "data"
    if shape == "json-array":
        data = tmp_path / "d.json"
        data.write_text(json.dumps(records, indent=1), encoding="utf-8")
    elif shape == "csv":
        data = tmp_path / "d.csv"
        frame.write_csv(data)
    elif shape == "parquet":
        data = tmp_path / "d.parquet"
        frame.write_parquet(data)
    elif shape == "arrow":
        data = tmp_path / "d.arrow"
        frame.write_ipc(data)
    elif shape == "shards":
        data.mkdir()
        for k in range(2):
            (data / f"part-{k}.jsonl").write_text("".join(
                json.dumps(r) + "\n" for r in records[k * 200:(k + 1) * 200]), encoding="utf-8")
    else:
        import datasets

        datasets.Dataset.from_list(records).save_to_disk(str(data))
    found = json.loads(_python("-c", NO_PANDAS % (str(data), str(tmp_path / "out")),
                               cwd=tmp_path).stdout)
    assert found["codes"]["exact-dupes"] == {"exact_duplicate_of": 1}
    assert "zero_width_space" in found["codes"]["hidden-chars"]
    assert "pandas" not in found["loaded"]


@pytest.mark.parametrize("shape", ["jsonl", "json-array"])
def test_a_field_whose_type_changes_loads_no_pandas(tmp_path: Path, shape: str) -> None:
    """A field written as a string here and a number there (the schema faults the sample
    corpora plant) is typed from Python values: without pyarrow's pandas import too."""
    records: list[dict[str, object]] = [
        {"id": i, "text": f"record {i} of a corpus with a few words in it", "label": i % 3,
         "meta": {"tags": ["a", "b"], "score": i / 7}} for i in range(300)]
    records[40]["text"] = 12345  # a number where the text should be
    records[41]["label"] = "2"  # a string label among integers
    records[42]["meta"] = "none"  # a string where an object stood
    data = tmp_path / ("d.jsonl" if shape == "jsonl" else "d.json")
    if shape == "jsonl":
        data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        data.write_text(json.dumps(records, indent=1), encoding="utf-8")
    found = json.loads(_python("-c", NO_PANDAS % (str(data), str(tmp_path / "out")),
                               cwd=tmp_path).stdout)
    assert found["codes"]["schema"] == {"wrong_type": 1}  # the text field is declared
    assert "pandas" not in found["loaded"]
