"""A text field inside an object whose key holds a dot or a bracket is named as findings
name it, quoted (``data["a.b"]``): it was "no column", though the findings printed that very
path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from preflight.cli import main
from preflight.field_paths import quoted_steps
from tests.outputs import read_records, write_shaped

ZW = "\u200b"
FIELD = 'data["a.b"]'


def _rows(n: int = 12) -> list[dict[str, Any]]:
    rows = [{"id": i, "data": {"a.b": f"some text number {i} here", "lang": "en"}}
            for i in range(n)]
    rows[3]["data"]["a.b"] = f"hid{ZW}den text"
    return rows


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("name", ["d.jsonl", "d.json", "d.parquet", "d.arrow", "shards",
                                  "dataset"])
def test_a_quoted_path_is_the_text_and_fix_mends_it(tmp_path: Path, name: str) -> None:
    data = write_shaped(tmp_path / name, _rows())
    checked = _invoke("check", data, "--text-field", FIELD, "--out", tmp_path / "o",
                      "--no-smoke")
    assert checked.exit_code == 1, checked.output
    assert f"{FIELD}: 1× U+200B at char 3" in checked.output
    clean, quarantine = tmp_path / "f" / "clean.jsonl", tmp_path / "f" / "q.jsonl"
    fixed = _invoke("fix", data, "--text-field", FIELD, "--out", clean,
                    "--quarantine", quarantine)
    assert fixed.exit_code == 0, fixed.output
    assert quarantine.read_text() == ""
    kept = read_records(clean)
    assert [r["id"] for r in kept] == list(range(12))
    assert kept[3]["data"] == {"a.b": "hidden text", "lang": "en"}
    assert [json.dumps(r) for r in kept[4:]] == [json.dumps(r) for r in _rows()[4:]]


def test_a_quoted_path_that_leads_nowhere_is_exit_2(tmp_path: Path) -> None:
    data = write_shaped(tmp_path / "d.jsonl", _rows())
    result = _invoke("check", data, "--text-field", 'data["a.c"]', "--out", tmp_path / "o")
    assert result.exit_code == 2, result.output
    assert "no field 'a.c' in object 'data'; fields found in that object: 'a.b', 'lang'" in \
        " ".join(result.output.split())


@pytest.mark.parametrize(("name", "steps"), [
    ('data["a.b"]', ("data", "a.b")),
    ('["k.v[0]"].x', ("k.v[0]", "x")),
    ('data["a.b"].c', ("data", "a.b", "c")),
    ('data["a\\"b"]', ("data", 'a"b')),
    ('data["\\u200b"]', ("data", ZW)),
    ('data["a.b"]c', None),  # a key after a bracket needs its dot
    ('data["a.b', None),
])
def test_quoted_steps_read_the_paths_findings_write(name: str,
                                                    steps: tuple[str, ...] | None) -> None:
    assert quoted_steps(name) == steps
