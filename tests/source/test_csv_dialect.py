"""CSV dialects (issue 16, item 8): ``;``, tab and ``|`` sniffed, ``--delimiter`` to force
one, ``.tsv`` read as tab-separated; ``fix`` keeps a ``;`` CSV's delimiter and its untouched
rows byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.errors import ConfigError
from preflight.source import open_source
from preflight.source.csv_dialect import check_delimiter, sniff_delimiter
from tests.source.helpers import malformed, rows, values, write

ZW = "\u200b"


def read(path: Path, delimiter: str | None = None) -> list:
    return list(open_source(path, delimiter=delimiter).batches())


@pytest.mark.parametrize("d", [";", "\t", "|", ","])
def test_delimiter_is_sniffed(tmp_path: Path, d: str) -> None:
    # commas inside the text do not fool the sniffer into splitting there (quoted only
    # where the delimiter is the comma)
    q = '"' if d == "," else ""
    text = ("id{d}text{d}label\n1{d}{q}hello, world{q}{d}0\n2{d}{q}a, b, c{q}{d}3\n"
            "3{d}plain{d}1\n")
    path = write(tmp_path, "d.csv", text.format(d=d, q=q).encode())
    batches = read(path)
    assert values(batches, "text") == ["hello, world", "a, b, c", "plain"]
    assert values(batches, "label") == [0, 3, 1]  # typed as integers, as with commas
    assert rows(batches) == [0, 1, 2] and malformed(batches) == []


def test_sniffing_only_sees_the_first_lines(tmp_path: Path) -> None:
    assert sniff_delimiter(b"a;b\n1;2\n") == ";"
    assert sniff_delimiter(b"text\nonly one column; with a semicolon\n") == ","
    assert sniff_delimiter(b"") == ","


def test_tsv_is_tab_separated(tmp_path: Path) -> None:
    path = write(tmp_path, "d.tsv", b"text\tlabel\na; b, c|d\t1\n")
    assert values(read(path), "text") == ["a; b, c|d"]
    assert open_source(path).format == "csv"


def test_delimiter_can_be_forced(tmp_path: Path) -> None:
    # ';' splits the header into more fields, so it is sniffed; '|' is what was meant
    path = write(tmp_path, "d.csv", b"a;b|c;d\n1;2|3;4\n")
    assert [c for b in read(path) for c in b.frame.columns] == ["a", "b|c", "d"]
    assert values(read(path, "|"), "c;d") == ["3;4"]


def test_wrong_field_count_keeps_its_row_with_a_sniffed_delimiter(tmp_path: Path) -> None:
    path = write(tmp_path, "d.csv", b"text;label\nok;1\nbroken\nfine;2\n")
    batches = read(path)
    assert malformed(batches) == [(1, "wrong_field_count")]
    assert rows(batches) == [0, 2]


def test_cli_delimiter_option(tmp_path: Path) -> None:
    data = write(tmp_path, "d.csv", f"text|label\nhid{ZW}den|1\nfine|2\n".encode())
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", str(data), "--delimiter", "|", "--no-smoke",
                                       "--out", str(out)])
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    hidden = next(r for r in report["rules"] if r["check"] == "invisible_unicode")
    assert [e["row"] for e in hidden["examples"]] == [0]


def test_cli_delimiter_mistakes_are_exit_2(tmp_path: Path) -> None:
    csv_file = write(tmp_path, "d.csv", b"text\na\n")
    result = CliRunner().invoke(main, ["check", str(csv_file), "--delimiter", ";;",
                                       "--no-smoke", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert ("--delimiter must be one character such as ',' ';' '|' or tab (written tab or \\t), "
            "got ';;'") in result.output
    jsonl = write(tmp_path, "d.jsonl", b'{"text": "a"}\n')
    result = CliRunner().invoke(main, ["check", str(jsonl), "--delimiter", ";", "--no-smoke",
                                       "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"--delimiter applies to CSV input; {jsonl} is jsonl" in result.output


def test_check_delimiter_names() -> None:
    assert [check_delimiter(v) for v in ("tab", "\\t", "\t", ";", "|", None)] == [
        "\t", "\t", "\t", ";", "|", None]
    with pytest.raises(ConfigError):
        check_delimiter("x")


def test_fix_keeps_a_semicolon_csv(tmp_path: Path) -> None:
    lines = [b"id;text;label\r\n", b"1;hello, world;1\r\n", f"2;bon{ZW}jour;2\r\n".encode(),
             b'3;"a;b ""q""";3\r\n', b"4;plain   text;0\r\n"]
    data = write(tmp_path, "d.csv", b"".join(lines))
    out, quarantine = tmp_path / "clean.csv", tmp_path / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", str(data), "--out", str(out),
                                       "--quarantine", str(quarantine)])
    assert result.exit_code == 0, result.output
    written = out.read_bytes().splitlines(keepends=True)
    # untouched rows and the header byte for byte; the changed row keeps ';' and its line end
    assert written[:2] + written[3:] == lines[:2] + lines[3:]
    assert written[2] == b"2;bonjour;2\r\n"
    assert quarantine.read_bytes() == b""
    # the output reads back as the same table, split at ';'
    assert values(read(out), "text") == ["hello, world", "bonjour", 'a;b "q"', "plain   text"]


def test_fix_quotes_a_changed_field_holding_the_delimiter(tmp_path: Path) -> None:
    data = write(tmp_path, "d.csv", f'text|label\n"a|b{ZW}"|1\nplain|2\n'.encode())
    out = tmp_path / "clean.csv"
    result = CliRunner().invoke(main, ["fix", str(data), "--delimiter", "|", "--out", str(out),
                                       "--quarantine", str(tmp_path / "q.jsonl")])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == b'text|label\n"a|b"|1\nplain|2\n'


def _check(path: Path, out: Path, *extra: str) -> tuple[str, dict]:
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out", str(out),
                                       *extra])
    assert result.exit_code in (0, 1), result.output
    text = " ".join(result.output.split())
    return text, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize(("name", "extra", "shown", "how"), [
    ("d.csv", [], "';'", "sniffed"),
    ("d.csv", ["--delimiter", ";"], "';'", "--delimiter"),
    ("d.tsv", [], "tab", ".tsv"),
])
def test_delimiter_used_is_shown_and_recorded(tmp_path: Path, name: str, extra: list[str],
                                              shown: str, how: str) -> None:
    d = "\t" if name.endswith(".tsv") else ";"
    data = write(tmp_path, name, f"text{d}label\nfine{d}1\nalso fine{d}0\n".encode())
    out = tmp_path / "r"
    text, report = _check(data, out, *extra)
    assert f"{name} · csv (delimiter {shown}, {how}) · 2 records" in text
    assert (report["source"]["delimiter"], report["source"]["delimiter_from"]) == (d, how)
    assert report["source"]["warnings"] == []
    assert f"csv (delimiter {shown}, {how})".replace("'", "&#39;") in \
        (out / "report.html").read_text()


def test_a_delimiter_leaving_one_column_warns(tmp_path: Path) -> None:
    data = write(tmp_path, "d.csv", b"text;label\nfine;1\nalso fine;x\n")
    text, report = _check(data, tmp_path / "r", "--delimiter", "|")
    warning = ("d.csv: the delimiter '|' leaves the header one column, but ';' splits it "
               "into 2 (text, label): check --delimiter")
    assert f"warning: {warning}" in text
    assert report["source"]["warnings"] == [warning]


def test_a_one_column_csv_does_not_warn(tmp_path: Path) -> None:
    data = write(tmp_path, "d.csv", b"text\nfine\nalso fine\n")
    text, report = _check(data, tmp_path / "r")
    assert report["source"]["warnings"] == [] and "warning:" not in text
    assert report["source"]["delimiter"] == ","


def test_a_header_that_reads_as_a_record_warns(tmp_path: Path) -> None:
    """A file written without a header: its first record becomes the column names (not
    checked); a number or a sentence where a name belongs says so."""
    long = "The first sentence of a corpus written without any header row at all"
    data = write(tmp_path, "d.csv", f"{long},1\nAnother record,0\nA third,1\n".encode())
    text, report = _check(data, tmp_path / "r")
    (warning,) = report["source"]["warnings"]
    assert warning.startswith("d.csv: the header row holds 'The first sentence of a corpus "
                              "written w…', '1', which look like data, not column names")
    assert "its first record is read as the column names and is not checked" in warning
    assert "warning: d.csv: the header row holds" in text
    assert report["source"]["records"] == 2


@pytest.mark.parametrize("header", ["text,label", "text,2019_sales", "text,nan", "id,text"])
def test_ordinary_headers_do_not_warn(tmp_path: Path, header: str) -> None:
    data = write(tmp_path, "d.csv", f"{header}\nfine,1\nalso fine,0\n".encode())
    _, report = _check(data, tmp_path / "r")
    assert report["source"]["warnings"] == []


def test_a_name_repeated_in_the_header_warns(tmp_path: Path) -> None:
    data = write(tmp_path, "d.csv", b"text,text,label\na,b\xe2\x80\x8b,1\nc,d,0\n")
    text, report = _check(data, tmp_path / "r")
    assert report["source"]["warnings"] == [
        "d.csv: the header names 'text' more than once: a repeated name's later columns are "
        "read as 'text_1', … and are not the field the rules name (rename them in the header)"]
    assert "warning: d.csv: the header names 'text' more than once" in " ".join(text.split())
