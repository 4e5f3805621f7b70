"""An output folder on a read-only file system: exit 3 naming the output, not the temporary
file. There, unlinking even a file that is not there fails (EROFS); the cleanup that did so
hid the real message behind the generic one (fix) or stopped the run (check's smoke stage)."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.fix.writers.text import JsonlWriter


def _read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    unlink = Path.unlink

    def refused(self: Path, missing_ok: bool = False) -> None:
        if self.parent == folder:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": f"Zero\u200b {k}"}) + "\n"
                           for k in range(5)))
    return src


def test_fix_into_a_read_only_folder_names_the_output(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ro"
    out.mkdir()

    def refused(self: Any, unit: Any, after: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self.path))

    monkeypatch.setattr(JsonlWriter, "change", refused)
    _read_only(monkeypatch, out)
    result = CliRunner().invoke(main, ["fix", str(_source(tmp_path)), "--out",
                                       str(out / "clean.jsonl"), "--quarantine",
                                       str(tmp_path / "q.jsonl"), "--quiet"])
    assert result.exit_code == 3, result.output
    assert f"cannot write {out / 'clean.jsonl'}: Read-only file system" in result.output
    assert "nothing was put in place" in result.output


def test_a_stale_replay_that_cannot_be_unlinked_does_not_stop_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "report"
    out.mkdir()
    _read_only(monkeypatch, out)
    result = CliRunner().invoke(main, ["check", str(_source(tmp_path)), "--out", str(out),
                                       "--quiet"])
    assert result.exit_code == 1, result.output  # the verdict: hidden characters
    assert (out / "report.json").exists()
