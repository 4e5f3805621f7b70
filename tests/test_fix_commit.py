"""A fix run's three outputs (clean, quarantine, manifest) are put in place together: a run
killed at any step of that leaves the earlier complete set, or a journal with which the next
run finishes the new complete set (and which ``check`` refuses to read past). Found by a
hostile review: a kill between the renames left the new clean output beside the quarantine
and manifest of the earlier run into the same paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from preflight.fix_commit import journal_path, recover, staged_path
from preflight.source.tracked import hash_file
from tests.outputs import write_shaped
from tests.test_cli import invoke

# Runs the CLI with fix_commit's os.replace / os.unlink counted: before call number N the
# process dies at once (SIGKILL-like: no cleanup, no finally blocks).
_KILL_AT = r"""
import os, sys
import preflight.fix_commit as fc
n, calls = int(sys.argv[1]), [0]
class Killing:
    def __getattr__(self, name):
        return getattr(os, name)
    def _step(self):
        if calls[0] == n:
            os._exit(137)
        calls[0] += 1
    def replace(self, a, b):
        self._step(); os.replace(a, b)
    def unlink(self, p):
        self._step(); os.unlink(p)
fc.os = Killing()
sys.argv = ["preflight", *sys.argv[2:]]
from preflight.entry import run
run()
"""
STEPS = 8  # 3 files staged, the journal (the commit), 3 renames into place, journal removed


# Every input format fix reads, with the clean output's name for it: its own format where it
# writes one (CSV, Parquet, Arrow), else JSON Lines; a shard folder of Parquet and a
# ``datasets`` folder (Arrow) keep theirs.
SHAPES = {
    "jsonl": ("d.jsonl", "clean.jsonl"),
    "json": ("d.json", "clean.jsonl"),
    "csv": ("d.csv", "clean.csv"),
    "parquet": ("d.parquet", "clean.parquet"),
    "arrow": ("d.arrow", "clean.arrow"),
    "shards": ("shards", "clean.parquet"),
    "dataset": ("dataset", "clean.arrow"),
}


def fix(data: Path, out: Path, q: Path, kill_at: int | None = None,
        manifest: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = ["fix", str(data), "--out", str(out), "--quarantine", str(q), "--no-progress",
            "--workers", "1", *(["--manifest", str(manifest)] if manifest else [])]
    if kill_at is None:
        cmd = [sys.executable, "-m", "preflight", *args]
    else:
        cmd = [sys.executable, "-c", _KILL_AT, str(kill_at), *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def data(tmp_path: Path, word: str, shape: str = "d.jsonl") -> Path:
    """Six records (a hidden character to strip, a duplicate to set aside) in ``shape``
    (``write_shaped``), in a folder named ``word``, which the manifest's input path names."""
    rows = [{"text": f"{word} one\u200btwo"}, {"text": f"{word} three"},
            {"text": f"{word} three"}, {"text": f"{word} four"},
            {"text": f"{word} five"}, {"text": f"{word} six"}]
    return write_shaped(tmp_path / word / shape, rows)


def the_set(out: Path, q: Path, manifest: Path | None = None) -> str:
    """Which run's input the outputs are of, after checking they are one run's set."""
    manifest = json.loads((manifest or out.with_name("fix-manifest.json")).read_text())
    assert manifest["clean"]["xxh3_128"] == hash_file(out), "clean is not the manifest's"
    assert manifest["quarantine"]["xxh3_128"] == hash_file(q), "quarantine is not the manifest's"
    return Path(manifest["input"]["path"]).parent.name


def hashes(*finals: Path) -> list[str]:
    """The outputs' bytes, as hashes; a manifest's ``notes`` (what a run found a killed
    one left) left out."""
    found = []
    for f in finals:
        if f.name.endswith(".json"):
            found.append(json.dumps({k: v for k, v in json.loads(f.read_text()).items()
                                     if k != "notes"}, sort_keys=True))
        else:
            found.append(hash_file(f))
    return found


def check(path: Path, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preflight", "check", str(path), "--no-smoke",
         "--out", str(report), "--no-progress"],
        capture_output=True, text=True, check=False,
    )


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kill_at", range(STEPS))
def test_a_kill_at_any_step_of_the_commit_leaves_one_runs_set(
    tmp_path: Path, shape: str, kill_at: int
) -> None:
    name, clean = SHAPES[shape]
    old, new = data(tmp_path, "old", name), data(tmp_path, "new", name)
    out, q = tmp_path / "o" / clean, tmp_path / "o" / "q.jsonl"
    manifest = out.with_name("fix-manifest.json")
    first = invoke("fix", old, "--out", out, "--quarantine", q)
    assert first.exit_code == 0, first.output
    old_set = hashes(out, q, manifest)
    killed = fix(new, out, q, kill_at=kill_at)
    assert killed.returncode == 137, killed.stderr
    journal = journal_path(out)
    assert journal.exists() == (kill_at >= 4)  # the commit is the journal's rename (step 3)
    read = check(out, tmp_path / "report")
    if journal.exists():  # committed: a reader of the clean output is stopped
        assert read.returncode == 2, read.stderr
        assert "killed while putting its outputs in place" in read.stderr
        assert "Traceback" not in read.stderr
    else:  # not committed: the earlier set, byte for byte, reads as it did
        assert hashes(out, q, manifest) == old_set
        assert read.returncode in (0, 1), read.stderr
    notes: list[str] = []
    recover([out, q, manifest], notes)  # the next run's first step
    assert the_set(out, q) == ("new" if kill_at >= 4 else "old")
    if kill_at < 4:
        assert hashes(out, q, manifest) == old_set
    recovered = hashes(out, q, manifest)
    assert not journal.exists()
    again = invoke("fix", new, "--out", out, "--quarantine", q)
    assert again.exit_code == 0, again.output
    assert the_set(out, q) == "new"
    if kill_at >= 4:  # the finished commit is the complete set a whole run writes
        assert recovered == hashes(out, q, manifest)
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [out.name, q.name, "fix-manifest.json"])  # the killed run's files are swept


def test_the_next_run_finishes_a_killed_commit_and_says_so(tmp_path: Path) -> None:
    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    assert fix(old, out, q).returncode == 0
    assert fix(new, out, q, kill_at=5).returncode == 137  # the clean output in place only
    manifest = json.loads(out.with_name("fix-manifest.json").read_text())
    assert manifest["input"]["path"] == str(old)  # the old manifest beside the new output
    again = fix(old, out, q)
    assert again.returncode == 0, again.stderr
    assert "its commit was finished first" in again.stderr
    assert the_set(out, q) == "old"


def test_a_commit_record_that_cannot_be_written_leaves_the_earlier_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The outputs fit, the journal does not (a full disk): the staged outputs go again and
    # the earlier set stays whole, with nothing of this run left beside it.
    import errno

    import preflight.fix_commit as fc
    from preflight import FixOptions, OutputError, run_preflight

    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    assert fix(old, out, q).returncode == 0
    flush = fc._flush

    def full(path: Path) -> None:
        if "preflight-commit" in Path(path).name:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        flush(path)

    monkeypatch.setattr(fc, "_flush", full)
    with pytest.raises(OutputError, match="No space left on device"):
        run_preflight(new, smoke=False, fix=FixOptions(out=out, quarantine=q))
    assert the_set(out, q) == "old"
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [out.name, q.name, "fix-manifest.json"])


def test_a_fix_with_another_manifest_finishes_a_killed_commit_of_its_output(
    tmp_path: Path,
) -> None:
    # The journal sits beside the killed run's manifest; a next run into the same --out
    # with its own --manifest left it, and the journal's staged files could later be put
    # over that run's outputs (and check refused the clean output for good).
    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    assert fix(old, out, q).returncode == 0
    assert fix(new, out, q, kill_at=5).returncode == 137
    other = tmp_path / "m" / "manifest.json"
    again = subprocess.run(
        [sys.executable, "-m", "preflight", "fix", str(old), "--out", str(out),
         "--quarantine", str(q), "--manifest", str(other), "--no-progress"],
        capture_output=True, text=True, check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "its commit was finished first" in again.stderr
    assert not journal_path(out).exists()
    manifest = json.loads(other.read_text())
    assert manifest["clean"]["xxh3_128"] == hash_file(out)
    assert manifest["input"]["path"] == str(old)
    read = subprocess.run(
        [sys.executable, "-m", "preflight", "check", str(out), "--no-smoke",
         "--out", str(tmp_path / "report"), "--no-progress"],
        capture_output=True, text=True, check=False,
    )
    assert read.returncode in (0, 1), read.stderr


def test_a_commit_record_naming_other_renames_is_refused(tmp_path: Path) -> None:
    # A journal is trusted only for what a commit writes: a staged file beside its final
    # path. One naming another file would have moved it over an output (or anywhere).
    src = data(tmp_path, "in")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    out.parent.mkdir()
    elsewhere = tmp_path / "secret.txt"
    elsewhere.write_text("not an output")
    journal = journal_path(out)
    journal.write_text(json.dumps({"renames": [[str(elsewhere), str(out)]]}))
    again = fix(src, out, q)
    assert again.returncode == 2, again.stderr
    assert "not a commit record preflight wrote" in again.stderr
    assert elsewhere.read_text() == "not an output" and not out.exists()


def test_a_killed_commit_reached_through_a_linked_folder_is_finished_and_refused(
        tmp_path: Path) -> None:
    """The journal records the killed run's absolute paths; a check or fix reaching the
    same folder through a symbolic link read the half-committed output (exit 0), and fix
    called the journal "not a commit record preflight wrote" (remove it, it said)."""
    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    (tmp_path / "link").symlink_to(tmp_path / "o")
    via_out, via_q = tmp_path / "link" / "clean.jsonl", tmp_path / "link" / "q.jsonl"
    assert fix(old, out, q).returncode == 0
    assert fix(new, out, q, kill_at=5).returncode == 137
    read = subprocess.run([sys.executable, "-m", "preflight", "check", str(via_out),
                           "--no-smoke", "--no-progress", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, check=False)
    assert read.returncode == 2 and "killed while putting its outputs" in read.stderr
    again = fix(old, via_out, via_q)
    assert again.returncode == 0, again.stderr
    assert "its commit was finished first" in again.stderr
    assert the_set(out, q) == "old"
    assert not journal_path(out).exists()


def test_an_unreadable_commit_record_of_another_manifest_blocks_no_other_fix(
        tmp_path: Path) -> None:
    """A damaged record beside another manifest in the folder stopped every fix into that
    folder (exit 2, "cannot be read"); one beside this run's manifest still does."""
    new = data(tmp_path, "new")
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    out.parent.mkdir()
    other = out.parent / ".other.json.preflight-commit.json"
    other.write_text("garbage")
    done = fix(new, out, q)
    assert done.returncode == 0, done.stderr
    assert the_set(out, q) == "new" and other.exists()
    for beside in (out, out.with_name("fix-manifest.json")):  # an earlier release's: manifest
        journal_path(beside).write_text("garbage")
        refused = fix(new, out, q)
        assert refused.returncode == 2 and "cannot be read" in refused.stderr
        journal_path(beside).unlink()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_check_refuses_a_half_committed_output_whose_manifest_is_elsewhere(
        tmp_path: Path, shape: str) -> None:
    """The commit record sat beside the manifest and ``check`` looked for one beside its
    input only: with ``--manifest`` in another folder, a run killed between the renames
    left a new clean output beside the old manifest, which ``check`` read (exit 0). The
    record now sits beside the clean output."""
    name, clean = SHAPES[shape]
    old, new = data(tmp_path, "old", name), data(tmp_path, "new", name)
    out, q = tmp_path / "o" / clean, tmp_path / "o" / "q.jsonl"
    manifest = tmp_path / "m" / "manifest.json"
    assert invoke("fix", old, "--out", out, "--quarantine", q,
                  "--manifest", manifest).exit_code == 0
    killed = fix(new, out, q, kill_at=5, manifest=manifest)  # the clean output in place only
    assert killed.returncode == 137, killed.stderr
    assert json.loads(manifest.read_text())["input"]["path"] == str(old)
    read = check(out, tmp_path / "report")
    assert read.returncode == 2, read.stderr
    assert "killed while putting its outputs in place" in read.stderr
    again = invoke("fix", old, "--out", out, "--quarantine", q, "--manifest", manifest)
    assert again.exit_code == 0, again.output
    assert "its commit was finished first" in again.output
    assert the_set(out, q, manifest) == "old"
    assert check(out, tmp_path / "report").returncode in (0, 1)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_staged_files_of_a_killed_run_are_removed_or_named_by_the_next_fix(
        tmp_path: Path, shape: str) -> None:
    """Killed with all three outputs staged and no commit record: the next fix into the
    same clean output and quarantine removes their staged files; with its own
    ``--manifest`` the killed run's staged manifest was left without a word (it may be
    named by a record beside that run's clean output elsewhere, so it is not removed):
    the next fix names it in a note."""
    name, clean = SHAPES[shape]
    old, new = data(tmp_path, "old", name), data(tmp_path, "new", name)
    out, q = tmp_path / "o" / clean, tmp_path / "o" / "q.jsonl"
    assert invoke("fix", old, "--out", out, "--quarantine", q).exit_code == 0
    killed = fix(new, out, q, kill_at=3)  # all staged, the commit record not written
    assert killed.returncode == 137, killed.stderr
    left = staged_path(out.with_name("fix-manifest.json"))
    assert left.exists() and staged_path(out).exists() and staged_path(q).exists()
    again = invoke("fix", new, "--out", out, "--quarantine", q,
                   "--manifest", tmp_path / "m" / "manifest.json")
    assert again.exit_code == 0, again.output
    assert the_set(out, q, tmp_path / "m" / "manifest.json") == "new"
    assert not staged_path(out).exists() and not staged_path(q).exists()
    assert f"{left}: an unfinished output of a fix run" in " ".join(again.output.split())
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [out.name, q.name, "fix-manifest.json", left.name])
    assert invoke("fix", new, "--out", out, "--quarantine", q).exit_code == 0
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [out.name, q.name, "fix-manifest.json"])  # a fix into it removes it


def test_a_killed_commit_is_found_beside_a_quarantine_in_another_folder(
        tmp_path: Path) -> None:
    """The record sat beside the clean output only: with the quarantine in another folder,
    ``check`` of the quarantine read a new one beside the old manifest (exit 0), and a fix
    sharing only the quarantine took the committed run's staged quarantine for an
    uncommitted one and removed it (the set, finished later, mixed two runs)."""
    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    out, q = tmp_path / "a" / "clean.jsonl", tmp_path / "b" / "q.jsonl"
    assert fix(old, out, q).returncode == 0
    # staged 3, the record (the commit), its copy beside q, then killed before the renames
    assert fix(new, out, q, kill_at=5).returncode == 137
    assert journal_path(out).exists() and journal_path(q).exists()
    read = check(q, tmp_path / "report")
    assert read.returncode == 2, read.stderr
    assert "killed while putting its outputs in place" in read.stderr
    other = tmp_path / "c" / "clean.jsonl"
    shared = fix(old, other, q)  # a fix sharing only the quarantine finishes the commit
    assert shared.returncode == 0, shared.stderr
    assert "its commit was finished first" in shared.stderr
    assert "killed before its commit was removed" not in shared.stderr
    manifest = json.loads(out.with_name("fix-manifest.json").read_text())
    assert manifest["input"]["path"] == str(new)  # the killed run's set, complete
    assert manifest["clean"]["xxh3_128"] == hash_file(out)
    assert not journal_path(out).exists() and not journal_path(q).exists()
    assert check(out, tmp_path / "report").returncode in (0, 1)


def test_an_output_named_through_a_link_and_dotdot_is_refused_and_finished(
        tmp_path: Path) -> None:
    """``--quarantine lnk/../q.jsonl`` (``lnk`` a link to a folder elsewhere): the commit
    record named ``q.jsonl`` beside ``lnk`` (``..`` dropped as text), not where it is; a run
    killed between the renames left the new clean output beside the old quarantine, which
    ``check`` read (exit 0), and the next fix "finished" the commit without it (the old
    quarantine beside the new clean output and manifest)."""
    old, new = data(tmp_path, "old"), data(tmp_path, "new")
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "x" / "y")
    out, m = tmp_path / "a" / "c.jsonl", tmp_path / "m" / "x.json"
    q = tmp_path / "lnk" / ".." / "q.jsonl"  # x/q.jsonl
    assert fix(old, out, q, manifest=m).returncode == 0
    assert (tmp_path / "x" / "q.jsonl").exists()
    # staged 3, the record and its 2 copies, the clean output renamed, then killed
    assert fix(new, out, q, kill_at=7, manifest=m).returncode == 137
    read = check(q, tmp_path / "report")
    assert read.returncode == 2, read.stderr
    assert "killed while putting its outputs in place" in read.stderr
    notes: list[str] = []
    recover([q], notes)  # a fix sharing only the quarantine finishes the commit
    assert any("its commit was finished first" in n for n in notes), notes
    assert the_set(out, tmp_path / "x" / "q.jsonl", m) == "new"
    assert not [p for p in tmp_path.rglob(".*") if "-staged" in p.name or "-commit" in p.name]
