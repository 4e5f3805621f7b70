"""Pre-tokenized data with no rules file: token ids were read as numeric features, and a
packed corpus (every record 128 ids of a Zipf-like vocabulary) failed the default gate on
every record ("outlier ... per position"), with the smoke test's byte-sized vocabulary
calling every id past 255 a data fault. Now ``input_ids`` and per-token labels are
inferred by name and checked by ``label_range`` (negative ids, floats, the ignore index),
and the tokenizer's other outputs are not judged as data."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight import run_preflight


def _zipf_ids(rng: random.Random, n: int) -> list[int]:
    return [int(50_000 * rng.random() ** 4) for _ in range(n)]


def _tokenized(n: int = 150) -> list[dict]:
    rng = random.Random(3)
    rows = []
    for i in range(n):
        ids = _zipf_ids(rng, 24 + i % 17)
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids),
                     "labels": [t if rng.random() > 0.3 else -100 for t in ids]})
    return rows


def _write(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".parquet":
        table = pa.table({k: pa.array([r[k] for r in rows], pa.list_(pa.int32()))
                          for k in rows[0]})
        pq.write_table(table, path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_packed_corpus_passes_the_default_gate(tmp_path: Path, suffix: str) -> None:
    rng = random.Random(0)
    rows = [{"input_ids": _zipf_ids(rng, 128)} for _ in range(300)]
    report = run_preflight(_write(tmp_path / f"packed{suffix}", rows), smoke=False,
                           out=tmp_path / "r")
    assert report.rules_file.fields == {"input_ids": "input_ids"}
    assert "numeric" not in report.rules_file.fields
    assert [r.id for r in report.rules] == ["malformed", "schema", "labels"]
    assert report.verdict == "pass", report.reasons
    assert ("token ids past the model's vocabulary: needs --set model.vocab_size=N"
            in report.rules_file.not_checked)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_tokenizer_outputs_are_inferred_and_their_faults_found(tmp_path: Path,
                                                               suffix: str) -> None:
    rows = _tokenized()
    rows[7]["input_ids"][3] = -5
    rows[9]["labels"][2] = -7
    report = run_preflight(_write(tmp_path / f"tok{suffix}", rows), smoke=False,
                           out=tmp_path / "r")
    fields = report.rules_file.fields
    assert (fields["input_ids"], fields["token_labels"]) == ("input_ids", "labels")
    assert "attention_mask" not in json.dumps(fields)  # a tokenizer output, not data
    assert "'attention_mask'" in report.rules_file.inferred["input_ids"]
    frame = report.findings()
    found = sorted(zip(frame["row"], frame["code"], strict=True))
    assert found == [(7, "token_id_out_of_range"), (9, "token_label_out_of_range")]


def test_a_float_among_token_ids_is_a_finding_not_a_feature(tmp_path: Path) -> None:
    rows = _tokenized()
    rows[5]["input_ids"][0] = 1.5  # the column reads as floats: still token ids by name
    report = run_preflight(_write(tmp_path / "tok.jsonl", rows), smoke=False,
                           out=tmp_path / "r")
    assert report.rules_file.fields["input_ids"] == "input_ids"
    frame = report.findings()
    assert list(zip(frame["row"], frame["code"], strict=True)) == [
        (5, "token_ids_wrong_type")]


def test_ner_tags_are_token_labels(tmp_path: Path) -> None:
    rows = [{"tokens": ["EU", "rejects", "German", "call"], "ner_tags": [3, 0, 7, 0]}
            for _ in range(40)]
    rows[4]["ner_tags"][1] = -1
    report = run_preflight(_write(tmp_path / "ner.jsonl", rows), smoke=False,
                           out=tmp_path / "r")
    assert report.rules_file.fields["token_labels"] == "ner_tags"
    frame = report.findings()
    assert list(zip(frame["row"], frame["code"], strict=True)) == [
        (4, "token_label_out_of_range")]


def test_a_scalar_class_label_named_labels_stays_a_class_label(tmp_path: Path) -> None:
    rows = [{"text": f"sentence {i}", "labels": i % 3} for i in range(30)]
    report = run_preflight(_write(tmp_path / "cls.jsonl", rows), smoke=False,
                           out=tmp_path / "r")
    assert report.rules_file.fields["label"] == "labels"
    assert "token_labels" not in report.rules_file.fields


def test_the_smoke_test_sizes_token_ids_it_has_no_vocabulary_for(tmp_path: Path) -> None:
    # With no model.vocab_size, ids past 255 (the built-in byte vocabulary) are not a data
    # fault: the largest id seen bounds them, as a tokenizer's output would be.
    rng = random.Random(1)
    rows = [{"input_ids": _zipf_ids(rng, 32)} for _ in range(120)]
    report = run_preflight(_write(tmp_path / "packed.jsonl", rows), smoke=True,
                           out=tmp_path / "r")
    assert report.smoke is not None
    assert report.smoke.verdict == "pass", report.smoke.reason


@pytest.mark.parametrize("field", ["input_ids", "labels"])
@pytest.mark.parametrize("odd", ["7", 7, [[1, 2], [3]], True])
def test_one_odd_record_does_not_make_token_lists_features(tmp_path: Path, field: str,
                                                          odd: object) -> None:
    # A string inside one record's ids (or a number or nested lists instead of its list)
    # mixes the column's JSON types: the lists were then read as numeric features, judged
    # per position (outliers in most records), and the negative id went unreported.
    rows = _tokenized()
    rows[7]["input_ids"][3] = -5
    if isinstance(odd, str | bool):
        rows[11][field][0] = odd
    else:
        rows[11][field] = odd
    report = run_preflight(_write(tmp_path / "tok.jsonl", rows), smoke=False,
                           out=tmp_path / "r")
    fields = report.rules_file.fields
    assert (fields["input_ids"], fields["token_labels"]) == ("input_ids", "labels")
    assert "numeric" not in fields
    frame = report.findings()
    code = "token_ids_wrong_type" if field == "input_ids" else "token_labels_wrong_type"
    found = sorted(zip(frame["row"], frame["code"], strict=True))
    assert (7, "token_id_out_of_range") in found
    assert (11, code) in found
    assert {c for _, c in found} <= {"token_id_out_of_range", code,
                                     "token_labels_length_mismatch"}


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_fixed_length_token_lists_are_read_as_lists(tmp_path: Path, suffix: str) -> None:
    # datasets' Sequence(Value("int32"), length=N) is an Arrow fixed_size_list: every
    # record was "expected a list of integers, got a list", and fix quarantined them all.
    rows = [{"input_ids": ids, "labels": [t if t % 3 else -100 for t in ids]}
            for ids in (_zipf_ids(random.Random(i), 16) for i in range(60))]
    rows[7]["input_ids"][3] = -5
    table = pa.table({k: pa.array([r[k] for r in rows], pa.list_(pa.int32(), 16))
                      for k in rows[0]})
    path = tmp_path / f"packed{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, path)
    else:
        import pyarrow.feather as pf

        pf.write_feather(table, path)
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    frame = report.findings()
    assert list(zip(frame["row"], frame["code"], strict=True)) == [
        (7, "token_id_out_of_range")]


def test_a_declared_vocabulary_is_not_listed_as_not_checked(tmp_path: Path) -> None:
    # --set model.vocab_size=N bounded the ids, yet the report still said they were not
    # checked against the vocabulary and to pass that very option.
    from click.testing import CliRunner

    from preflight.cli import main

    rows = _tokenized()
    rows[3]["input_ids"][0] = 60_000
    path = _write(tmp_path / "tok.jsonl", rows)
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r"), "--set", "model.vocab_size=50000"])
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    [labels] = [r for r in report["rules"] if r["id"] == "labels"]
    assert labels["codes"] == {"token_id_out_of_range": 1}
    assert not any("vocab_size" in what for what in report["rules_file"]["not_checked"])


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_id_no_vocabulary_reaches_is_found_with_no_vocab_size(tmp_path: Path,
                                                                  suffix: str) -> None:
    # A corrupted id of 10**12 passed the gate (only negatives were out of range with no
    # vocabulary size) and the smoke test (its model sizes ids by the largest seen).
    rows = _tokenized()
    rows[5]["input_ids"][1] = 10**12
    rows[8]["labels"][0] = 2**31
    rows[11]["input_ids"][0] = 2**31 - 1  # int32's largest: kept
    if suffix == ".parquet":  # int32 cannot hold the planted ids
        table = pa.table({k: pa.array([r[k] for r in rows], pa.list_(pa.int64()))
                          for k in rows[0]})
        pq.write_table(table, tmp_path / "tok.parquet")
        path = tmp_path / "tok.parquet"
    else:
        path = _write(tmp_path / "tok.jsonl", rows)
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    frame = report.findings()
    found = sorted(zip(frame["row"], frame["code"], frame["detail"], strict=True))
    assert [(row, code) for row, code, _ in found] == [
        (5, "token_id_out_of_range"), (8, "token_label_out_of_range")]
    assert "1000000000000 outside [0, 2^31), past any vocabulary" in found[0][2]
    assert report.verdict == "fail"
