"""A .json file that is one object holding the records ({"data": [...]}, SQuAD's layout and
what json.dump writes on one line) reads as one record or as malformed lines: the report
says why and what to do. It passed with "no text field" or with a version string as the
text, and every record inside unchecked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflight import run_preflight

RECORDS = [{"id": i, "text": f"record {i}" + ("\u200b" if i == 1 else "")} for i in range(5)]


@pytest.mark.parametrize(("wrapper", "indent"), [
    ({"data": RECORDS}, None), ({"version": "1.0", "data": RECORDS}, None),
    ({"version": "1.0", "data": RECORDS}, 2)], ids=["one-line", "beside-a-string", "pretty"])
def test_one_object_holding_the_records_is_a_warning(tmp_path: Path, wrapper: dict,
                                                      indent: int | None) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(wrapper, indent=indent))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [note] = report.source.warnings
    assert note.startswith("wrapped.json holds one JSON object, not an array of records")
    assert "jq -c '.data[]' wrapped.json" in note


def test_the_list_of_objects_is_named_when_no_text_is_inferred(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"rows": RECORDS}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    why = report.rules_file.inferred["text"]
    assert why.startswith("none: 'rows' holds a list of objects") and "'.rows[]'" in why


@pytest.mark.parametrize("text", [json.dumps(RECORDS), json.dumps(RECORDS, indent=2),
                                  "\n".join(json.dumps(r) for r in RECORDS)],
                         ids=["array", "pretty-array", "json-lines"])
def test_no_warning_for_an_array_or_json_lines(tmp_path: Path, text: str) -> None:
    path = tmp_path / "records.json"
    path.write_text(text)
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.source.warnings == []
    assert report.source.records == 5
