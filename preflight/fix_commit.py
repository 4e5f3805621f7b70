"""Putting a fix run's three outputs in place together, and finishing a commit a killed run
left half done.

Three renames (clean output, quarantine, manifest) cannot be one atomic step: a run killed
between two of them left the new clean output beside the old quarantine and manifest of an
earlier run into the same paths. So the complete outputs are first renamed to names that
belong to their final path, not to the process (``.{name}.preflight-staged.tmp``: the sweep
of dead runs' files leaves them be), then a journal is written beside the clean output (the
first pair; written whole under a temporary name, flushed, renamed: that rename is the
commit), listing each staged file and its final path; then the three renames, the manifest
last, and the journal goes. A run killed before the journal leaves the earlier outputs as
they were (its staged files are removed by the next run); one killed after it, the journal:
the next ``fix`` into any of the same outputs finishes the renames (the new outputs,
complete) before anything else and says so, and ``preflight check`` refuses to read an
output a journal beside it names (exit 2). The journal sits beside the clean output, not the
manifest, because that is the file ``check`` reads: with ``--manifest`` in another folder a
journal beside the manifest was never seen, and ``check`` read a new clean output beside the
old manifest (exit 0). A copy of the journal goes beside each output in another folder
(a quarantine elsewhere), written after the commit and removed before the journal, so a
``check`` of that output, or a fix sharing only it, finds the commit too. A journal beside
any output it names, named after it, is read (one beside the manifest: an earlier
release's).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from preflight.errors import ConfigError, OutputError
from preflight.tempfiles import temp_path, write_error

_JOURNAL = ".{name}.preflight-commit.json"
_STAGED = ".{name}.preflight-staged.tmp"


def journal_path(final: Path) -> Path:
    """The commit record of a commit whose first output (the clean one) is ``final``."""
    return final.with_name(_JOURNAL.format(name=final.name))


def staged_path(final: Path) -> Path:
    return final.with_name(_STAGED.format(name=final.name))


def _flush(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _flush_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs a folder
        _flush(folder)


def commit(pairs: list[tuple[Path, Path]]) -> None:
    """Put each written temporary file of ``pairs`` (temporary, final) in place, all or
    (after a kill) none until the next run finishes it; the clean output's pair comes
    first (the journal goes beside it), the manifest's last."""
    staged = []
    for tmp, final in pairs:
        _flush(tmp)
        staged.append((staged_path(final), final))
        os.replace(tmp, staged[-1][0])
    for folder in {final.parent for _, final in pairs}:
        _flush_folder(folder)
    journal, *copies = _records(staged)
    text = json.dumps({"renames": [[str(_absolute(s)), str(_absolute(f))]
                                   for s, f in staged]})
    try:
        _write_record(journal, text)  # the commit
    except BaseException:
        for s, _ in staged:
            with contextlib.suppress(OSError):
                s.unlink(missing_ok=True)
        raise
    for copy in copies:  # for a check of that output; the commit stands without them
        with contextlib.suppress(OSError):
            _write_record(copy, text)
    _finish(journal, staged)


def _records(staged: list[tuple[Path, Path]]) -> list[Path]:
    """Where a commit's record goes: beside its first output (the clean one; written
    first, it is the commit), then a copy beside each output in another folder, so that
    ``check`` of that output (a quarantine elsewhere) and a fix sharing only that output
    find it too."""
    records, folders = [], set()
    for _, final in staged:
        if (folder := _real(final.parent)) not in folders:
            folders.add(folder)
            records.append(journal_path(final))
    return records


def _write_record(record: Path, text: str) -> None:
    written = temp_path(record)
    try:
        written.write_text(text, encoding="utf-8")
        _flush(written)
        os.replace(written, record)
    except BaseException:
        with contextlib.suppress(OSError):
            written.unlink(missing_ok=True)
        raise
    _flush_folder(record.parent)


def _finish(journal: Path, staged: list[tuple[Path, Path]]) -> None:
    """The renames of a commit, then its records: the copies of ``journal`` beside its
    other outputs, ``journal`` itself last."""
    text = journal.read_text(encoding="utf-8")
    for s, final in staged:
        with contextlib.suppress(FileNotFoundError):  # renamed already
            os.replace(s, final)
    for folder in {final.parent for _, final in staged}:
        _flush_folder(folder)
    for record in _records(staged):
        if _real(record) != _real(journal) and _holds(record, text):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(record)
    os.unlink(journal)


def _holds(record: Path, text: str) -> bool:
    """True when ``record`` is a copy of the commit record ``text`` (not another run's)."""
    try:
        return record.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def recover(finals: list[Path], notes: list[str]) -> None:
    """Before a run writes (its outputs claimed, so no live run is committing any of them):
    finish each commit a killed run left that names one of ``finals`` (its journal beside
    its clean output, in one of their folders), and remove staged files no journal names (a
    run killed before its commit). ``notes`` says what was done, and names the staged
    files of other outputs found in those folders that no journal there names: left as
    they are (a journal beside that run's clean output, in another folder, may name them),
    a fix into their outputs removes them."""
    wanted = {_real(f) for f in finals}
    ours = {journal_path(_absolute(f)) for f in finals}
    folders = {_absolute(f).parent for f in finals}
    named: set[str] = set()  # staged files a journal in these folders names
    for journal in _journals(folders):
        if not os.path.lexists(journal):
            continue  # a copy of a record whose commit was finished above
        try:
            staged = _read(journal)
        except ConfigError:
            if journal in ours:  # beside one of this run's outputs, named after it: ours
                raise
            named.add("?")  # it may name any staged file here: none is called left
            continue  # another output's, unreadable: the next fix of its outputs says so
        named |= {_real(s) for s, _ in staged}
        if not wanted & {_real(f) for _, f in staged}:
            continue  # another output's: its own next run finishes it
        try:
            _finish(journal, staged)
        except OSError as e:
            error = write_error(Path(e.filename or journal), e)
            raise OutputError(f"{error}; it was finishing the commit of an earlier fix run "
                              f"that was killed ({journal})") from e
        notes.append(
            "an earlier fix run was killed while putting its outputs in place; its commit "
            f"was finished first ({', '.join(str(f) for _, f in staged)} are that run's, "
            "complete)"
        )
    for final in finals:
        left = staged_path(final)
        if left.exists():
            with contextlib.suppress(OSError):
                left.unlink()
            notes.append(f"{final}: an unfinished output of an earlier fix run that was "
                         "killed before its commit was removed (the earlier outputs stay)")
    if "?" in named:
        return
    for folder in sorted(folders):
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                final = _final_of(entry.name)
                if final is None or _real(Path(entry.path)) in named:
                    continue
                notes.append(f"{entry.path}: an unfinished output of a fix run into "
                             f"{folder / final} that was killed; left as it is (not this "
                             f"run's output): the next fix into {folder / final} removes it")


def _final_of(name: str) -> str | None:
    """The final name a staged file's ``name`` stands for, or None for any other name."""
    head, tail = _STAGED.split("{name}")
    if name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail):
        return name[len(head):-len(tail)]
    return None


def _absolute(path: Path | str) -> Path:
    """``path`` made absolute as the file system reads it: its folder's links and ``..``
    resolved in order (``os.path.abspath`` drops ``link/..`` as text, naming another folder
    than the file's when ``link`` is a symbolic link); its name kept as given."""
    path = Path(path).absolute()
    return Path(os.path.realpath(path.parent)) / path.name


def _real(path: Path) -> str:
    """``path`` with its links resolved: a journal records the absolute paths of the run
    that wrote it, and a later run may reach the same folder through a link."""
    return os.path.realpath(path)


def _journals(folders: set[Path]) -> list[Path]:
    found = []
    for folder in sorted(folders):
        try:
            names = sorted(e.name for e in os.scandir(folder))
        except OSError:
            continue
        found += [folder / n for n in names
                  if n.startswith(".") and n.endswith(".preflight-commit.json")]
    return found


def _read(journal: Path) -> list[tuple[Path, Path]]:
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        pairs = [(Path(s), Path(f)) for s, f in data["renames"]]
        # what a commit writes, nothing else: each staged file beside its final path,
        # the journal beside one of them (the first; an earlier release's: the last) and
        # named after it
        if (not pairs or any(s != staged_path(f) or not f.is_absolute() for s, f in pairs)
                or not any(journal_path(f).name == journal.name
                           and _real(f.parent) == _real(journal.parent) for _, f in pairs)):
            raise ValueError("it is not a commit record preflight wrote")
        return pairs
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{journal} is the commit record of a fix run that was killed, "
                          f"but it cannot be read ({e}); check the outputs it sits beside, "
                          "then remove it") from e


def refuse_pending(files: list[Path]) -> None:
    """A ``ConfigError`` when one of ``files`` (an input about to be read) is an output of
    a fix commit left unfinished: it may not match its quarantine and manifest."""
    journals = _journals({_absolute(f).parent for f in files})
    if not journals:
        return
    wanted = {_real(f) for f in files}
    for journal in journals:
        try:
            finals = [final for _, final in _read(journal)]
        except ConfigError:
            continue  # not readable: the next fix into its outputs says so
        for final in finals:
            if _real(final) in wanted:
                raise ConfigError(
                    f"{final} is an output of a fix run that was killed while putting "
                    f"its outputs in place ({journal} records it): it may not match its "
                    "quarantine and manifest. Run the same preflight fix again (it "
                    "finishes the commit first), then read it"
                )
