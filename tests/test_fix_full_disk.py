"""A disk that fills while ``fix`` writes, on every input format: exit 3 with a message that
names the cause (no traceback), nothing at the output names but the earlier run's set, byte
for byte (no staged file, no commit record, no temporary), and no file held open. The disk
fills while the clean output is written (many kept records), while the quarantine is
(many duplicates set aside), or just before the manifest is (the rest filled up); and so on
inputs whose struct field names (Parquet, Arrow, ``datasets``) or chat turn keys (JSON,
JSON Lines) the fix renames, which a full disk had never met."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

import preflight.fix.manifest as manifests
from preflight.source.tracked import hash_file
from tests.outputs import write_shaped
from tests.test_cli import invoke
from tests.test_fix_commit import SHAPES
from tests.test_formats_promises import _open_under

ZW = "\u200b"
PHASES = ["clean", "quarantine", "manifest"]
N = 600  # records of ~300 characters: far more than the disk's 64 KiB, in any format


def _text(k: int) -> str:
    words = random.Random(k).randbytes(150).hex()
    return f"record {k} " + " ".join(words[i:i + 10] for i in range(0, len(words), 10))


def _rows(kind: str, n: int, phase: str, word: str) -> list[dict[str, Any]]:
    """``n`` records of ``kind`` (``flat``; ``struct``: a struct field whose name hides a
    character, one record holding a value under it; ``chat``: a turn key that hides one);
    for the quarantine phase all but the first are copies of it (set aside)."""
    texts = [f"{word} {_text(0 if phase == 'quarantine' else k)}" for k in range(n)]
    if kind == "flat":
        return [{"id": str(k), "text": t} for k, t in enumerate(texts)]
    if kind == "struct":
        rows = [{"text": t, "meta": {f"so{ZW}urce": None, "n": 0}} for t in texts]
        rows[1]["meta"] = {f"so{ZW}urce": "web", "n": 1}
        return rows
    return [{"messages": [{"role": "user", "content": t, f"na{ZW}me": "bob"},
                          {"role": "assistant", "content": "an answer"}]} for t in texts]


CASES = [("flat", shape) for shape in SHAPES] + [
    ("struct", "parquet"), ("struct", "arrow"), ("struct", "dataset"),
    ("chat", "json"), ("chat", "jsonl")]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(("kind", "shape"), CASES)
def test_a_full_disk_leaves_the_earlier_set_and_says_why(
    tmp_path: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch, kind: str, shape: str,
    phase: str,
) -> None:
    name, clean = SHAPES[shape]
    out, q, manifest = small_disk / clean, small_disk / "q.jsonl", small_disk / "fix-manifest.json"
    old = write_shaped(tmp_path / "old" / name, _rows(kind, 6, "clean", "old"))
    first = invoke("fix", old, "--out", out, "--quarantine", q)
    assert first.exit_code == 0, first.output
    earlier = {p.name: hash_file(p) for p in (out, q, manifest)}
    if kind == "struct":  # the renames this test is about happened
        assert json.loads(manifest.read_text())["renamed_fields"][0]["to"] == "source"
    if kind == "chat":
        assert json.loads(manifest.read_text())["renamed_keys"][0]["to"] == "name"

    new = write_shaped(tmp_path / "new" / name,
                       _rows(kind, 6 if phase == "manifest" else N, phase, "new"))
    filler = small_disk / "filler"
    if phase == "manifest":  # clean and quarantine written: the disk fills before the manifest
        made = manifests.manifest

        def then_fill(*args: Any, **kwargs: Any) -> dict[str, Any]:
            done = made(*args, **kwargs)
            with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:
                while True:
                    f.write(b"\0" * 4096)
            return done

        monkeypatch.setattr(manifests, "manifest", then_fill)
    result = invoke("fix", new, "--out", out, "--quarantine", q)
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output
    assert "nothing was put in place" in result.output
    assert "Traceback" not in result.output
    left = {p.name: hash_file(p) for p in small_disk.iterdir() if p != filler}
    assert left == earlier  # no staged file, no commit record, no temporary: the old set
    assert _open_under(small_disk) == []
    if phase == "manifest":
        assert f"cannot write {manifest}: No space left" in " ".join(result.output.split())
        assert filler.exists()  # it was the manifest the disk had no room for
        filler.unlink()
    else:
        with contextlib.suppress(OSError):
            (small_disk / "probe").write_bytes(b"x" * 8192)  # room again: nothing held the space
        assert (small_disk / "probe").stat().st_size == 8192
