"""A ``fix`` that mends strings nested in objects and lists keeps the writers' promises: a
full disk leaves nothing at the output names and no file held open (exit 3), and a killed
run leaves only temporaries that the next run sweeps, which then writes every record with
its nested strings mended and its schema kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.outputs import kill_mid_write, read_records, write_records
from tests.test_formats_promises import _invoke, _open_under

ZW = "\u200b"


def _rows(n: int) -> list[dict[str, Any]]:
    """Records whose hidden characters sit only in nested strings: an object's field and a
    list of objects' field, every 7th record."""
    return [
        {
            "id": k,
            "text": f"Plain text number {k} with nothing hidden in it.",
            "meta": {"title": f"Ti{ZW}tle {k}" if k % 7 == 0 else f"Title {k}", "n": k},
            "answers": [{"text": f"an{ZW}swer {k}" if k % 7 == 0 else f"answer {k}"}],
        }
        for k in range(n)
    ]


@pytest.mark.parametrize(("source", "out"), [("jsonl", "clean.jsonl"),
                                             ("parquet", "clean.parquet"),
                                             ("parquet", "clean.arrow"),
                                             ("jsonl", "clean.parquet")])
@pytest.mark.parametrize("text", [[], ["--text-field", "meta.title"]])
def test_a_full_disk_while_mending_nested_strings_leaves_nothing(
    tmp_path: Path, small_disk: Path, source: str, out: str, text: list[str]
) -> None:
    # also with the nested string as the text field (``data.text``), mended by the text rules
    data = write_records(tmp_path / f"d.{source}", _rows(20_000))
    result = _invoke("fix", data, *text, "--out", small_disk / out, "--quarantine",
                     small_disk / "q.jsonl")
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output
    assert list(small_disk.iterdir()) == []
    assert _open_under(small_disk) == []


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_killed_fix_of_nested_strings_is_swept_and_redone(tmp_path: Path,
                                                            suffix: str) -> None:
    n = 150_000
    src = write_records(tmp_path / f"in{suffix}", _rows(n))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "preflight", "fix", str(src), "--out",
            str(out / f"c{suffix}"), "--quarantine", str(out / "q.jsonl"), "--quiet"]
    kill_mid_write(args, out)
    assert not (out / f"c{suffix}").exists()  # never a half-written file at the final name
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"c{suffix}", "fix-manifest.json", "q.jsonl"])
    fixed = read_records(out / f"c{suffix}")
    assert [r["id"] for r in fixed] == list(range(n))
    assert fixed[7]["meta"] == {"title": "Title 7", "n": 7}
    assert fixed[14]["answers"] == [{"text": "answer 14"}]
    assert not any(ZW in json.dumps(r, ensure_ascii=False) for r in fixed)
    if suffix == ".parquet":
        assert pq.read_schema(out / f"c{suffix}").field("meta").type == pa.struct(
            [("title", pa.string()), ("n", pa.int64())])
