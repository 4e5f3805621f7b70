"""Sources: every input format becomes a stream of bounded ``Batch``es with row numbers.

``open_source(obj)`` picks the reader: a file by its suffix (``.jsonl``/``.ndjson`` — also
``.gz``/``.zst`` —, ``.json``, ``.csv``/``.tsv``, ``.parquet``, ``.arrow``/``.feather``), a
folder of shards of one format, a folder written by ``datasets``' ``save_to_disk``, a hub
dataset name found in the local ``datasets`` cache (``hub``), a ``datasets.Dataset`` object,
or a DataFrame, Arrow table or list of dicts (``memory``); ``-`` (standard input) is
spooled to a file first (``stdin``). A new format is one function ``(path, file_index,
label, state) -> Iterator[Batch]`` added to ``READERS``.

Every input is read more than once (the smoke sample and near-duplicate confirmation read
it again), so only regular files are read: a named pipe or a device is refused (exit 3)
rather than opened twice or read forever. In a folder of shards, what is not read is
listed in ``Source.skipped`` with the reason (sub-folders, names starting with ``.`` or
``_``, files of no known format), and in a ``save_to_disk`` folder, data files that its
``state.json`` does not list; a broken or looping symbolic link, or a shard that
``state.json`` lists but the folder lacks, is an ``InputError``.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from preflight.batch import Batch
from preflight.errors import InputError
from preflight.source import arrow, csv, jsonarray, jsonl
from preflight.source.bom import refuse_wide_text
from preflight.source.magic import holds_other
from preflight.source.names import data_inside, format_of, recompress
from preflight.source.tracked import file_fingerprint

Reader = Callable[[Path, int, "str | None", dict[str, Any]], Iterator[Batch]]
READERS: dict[str, Reader] = {
    "jsonl": jsonl.read_jsonl,
    "json": jsonarray.read_json,
    "csv": csv.read_csv,
    "parquet": arrow.read_parquet,
    "arrow": arrow.read_ipc,
}
# What a reader raises on a file it cannot read (an InputError for the user).
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, zstandard.ZstdError)


@dataclass
class Source:
    """A readable input: its format, files, and how to read them in batches."""

    format: str
    path: str
    files: list[Path] = field(default_factory=list)
    total: int = 0
    unit: str = "bytes"
    global_rows: bool = False
    delimiter: str | None = None  # CSV: forced by the caller (else sniffed per file)
    # CSV, once read: (file name, delimiter used, how it was chosen) per file
    dialects: list[tuple[str, str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # about how the input was read
    # entries of a folder of shards that were not read: (name, why)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    _batches: Callable[[], Iterator[Batch]] | None = None
    _fingerprint: dict[str, Any] = field(default_factory=dict)

    def batches(self) -> Iterator[Batch]:
        """Yield the source's batches in order; records carry their row numbers."""
        assert self._batches is not None
        yield from self._batches()

    def file_label(self, index: int) -> str | None:
        """The ``file`` value findings carry for file ``index`` (None for a single file)."""
        if self.global_rows or len(self.files) <= 1:
            return None
        return str(self.files[index].relative_to(self.path))

    def fingerprint(self) -> dict[str, Any]:
        """A hash of the bytes read (xxh3-128 over each file in order) and their size."""
        return dict(self._fingerprint)


def open_source(obj: Any, *, delimiter: str | None = None) -> Source:
    """Open a path (file or folder), a hub dataset name in the local ``datasets`` cache, a
    ``datasets.Dataset``, a polars or pandas DataFrame, a pyarrow Table or a list of dicts
    as a Source. ``delimiter`` forces a CSV input's delimiter (other formats ignore it)."""
    if not isinstance(obj, str | Path):
        if hasattr(obj, "with_format") and hasattr(obj, "iter"):
            return _dataset_object(obj)
        from preflight.source.memory import in_memory

        return in_memory(obj)
    path = Path(obj)
    if not _exists(path):
        from preflight.source.hub import hub_dataset

        if (cached := hub_dataset(str(obj))) is not None:
            return cached
    source = _open_path(path)
    source.delimiter = delimiter
    return source


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _open_path(path: Path) -> Source:
    st = _stat(path)
    if stat.S_ISDIR(st.st_mode):
        try:
            saved = (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
            split = (path / "dataset_dict.json").is_file()
            splits = sorted(p.name for p in path.iterdir() if p.is_dir()) if split else []
        except OSError as e:
            raise InputError(f"cannot read the folder {path}: {e.strerror}") from e
        if saved:
            return _saved_dataset(path)
        if split:
            # The split a model trains on comes first in the example, the others named.
            first = "train" if "train" in splits or not splits else splits[0]
            listed = f" (splits: {', '.join(splits)})" if len(splits) > 1 else ""
            raise InputError(
                f"{path} holds a DatasetDict{listed}; point preflight at one split, e.g. "
                f"{path / first}"
            )
        return _folder(path)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path} is {_kind(st.st_mode)}, not a regular file; preflight reads "
                         "its input more than once: save it to a file and check that")
    fmt = format_of(path)
    if fmt is None:
        raise InputError(
            f"cannot tell the format of {path.name} from its name; supported: "
            ".jsonl/.ndjson (also .gz/.zst), .json, .csv/.tsv, .parquet, "
            ".arrow/.feather/.arrows, "
            f"a folder of shards, or a datasets save_to_disk folder{recompress(path)}"
        )
    return _files(fmt, path, [path])


def _stat(path: Path) -> os.stat_result:
    """``path``'s status (links followed); an ``InputError`` naming what is wrong."""
    try:
        return path.stat()
    except OSError as e:
        if path.is_symlink():
            if e.errno == errno.ELOOP:
                raise InputError(f"{path} is a symbolic link that loops; fix or remove it") from e
            if e.errno == errno.ENOENT:
                raise InputError(f"{path} is a broken symbolic link (its target "
                                 f"{os.readlink(path)} does not exist); fix or remove it") from e
        if e.errno == errno.ENOENT:
            raise InputError(f"input not found: {path}{_relative(path)}") from e
        raise InputError(f"cannot read {path}: {e.strerror}") from e


def _relative(path: Path) -> str:
    """Where a relative path was looked for: a pipeline's worker (Airflow, Dagster) runs in
    a working directory of its own, not the one the DAG was written in."""
    if path.is_absolute():
        return ""
    try:
        return f" (relative to the working directory {Path.cwd()})"
    except OSError:  # the working directory was removed
        return " (relative to a working directory that no longer exists)"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file or folder"


def _folder(path: Path) -> Source:
    try:
        entries = sorted(path.iterdir())
    except OSError as e:
        raise InputError(f"cannot list the folder {path}: {e.strerror}") from e
    by_format: dict[str, list[Path]] = {}
    skipped: list[tuple[str, str]] = []
    for p in entries:
        if p.name.startswith((".", "_")):
            skipped.append((p.name, f"the name starts with {p.name[0]!r} (hidden or "
                                    "metadata, skipped by convention)"))
            continue
        st = _stat(p)
        fmt = format_of(p)
        if stat.S_ISDIR(st.st_mode) and (inside := data_inside(p)):  # it would go unchecked
            raise InputError(
                f"{p} is a sub-folder holding data ({inside}); only the files directly inside "
                f"{path} are read: check {p} on its own, or move its files up beside the others")
        if stat.S_ISDIR(st.st_mode):
            skipped.append((p.name, "a sub-folder (only the files directly inside are read)"))
        elif not stat.S_ISREG(st.st_mode):
            if fmt is not None:
                raise InputError(f"{p} is {_kind(st.st_mode)}, not a regular file; preflight "
                                 "reads its input more than once: replace it with a file")
            skipped.append((p.name, f"{_kind(st.st_mode)}, not a regular file"))
        elif fmt is None and (why := recompress(p, shard=True)):  # data that would go unchecked
            raise InputError(f"{p} is a data file preflight cannot read{why}")
        elif fmt is None:
            skipped.append((p.name, "not a data file (its name says no supported format)"))
        else:
            by_format.setdefault(fmt, []).append(p)
    if not by_format:
        seen = "; ".join(f"{name}: {why}" for name, why in skipped[:5])
        more = f" (skipped {seen}{' …' if len(skipped) > 5 else ''})" if skipped else ""
        raise InputError(f"{path} holds no data files (.jsonl, .json, .csv, .parquet, "
                         f".arrow){more}")
    meta = {p.name for p in by_format.get("json", [])}
    if set(by_format) == {"arrow", "json"} and meta <= _DATASET_META:
        # save_to_disk's folder that lost one of its two metadata files: not "mixed formats"
        lacks = " and ".join(sorted(_DATASET_META - meta))
        raise InputError(
            f"{path} looks like a datasets save_to_disk folder, but it has no {lacks}: save "
            "the dataset again (dataset.save_to_disk), or move "
            f"{' and '.join(sorted(meta))} out of it to check its .arrow files as shards")
    if len(by_format) > 1:
        kinds = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_format.items()))
        raise InputError(f"{path} mixes formats ({kinds})"
                         + (_misnamed_shards(by_format) or "; point preflight at one format"))
    ((fmt, files),) = by_format.items()
    source = _files(fmt, path, files)
    source.skipped = skipped
    return source


_NAMES = {"jsonl": "JSON Lines", "json": "JSON", "csv": "CSV", "parquet": "Parquet",
          "arrow": "Arrow"}


def _misnamed_shards(by_format: dict[str, list[Path]]) -> str:
    """Shards whose bytes say another format than their suffix (a Parquet shard renamed
    ``.jsonl``), each with the ``mv`` that names it as what it holds; "" when none is."""
    wrong = [(p, fmt, *other) for fmt, files in sorted(by_format.items()) for p in files
             if (other := holds_other(p, fmt)) is not None]
    said = "; ".join(f"{p} holds {what} data, not {_NAMES[fmt]} as its suffix says: rename "
                     f"it, e.g. mv {shlex.quote(str(p))} "
                     f"{shlex.quote(str(p.with_suffix(suffix)))}"
                     for p, fmt, what, suffix in wrong[:3])
    return f": {said}{' (and more)' if len(wrong) > 3 else ''}" if wrong else ""


def _files(fmt: str, root: Path, files: list[Path]) -> Source:
    refuse_wide_text(files)  # UTF-16 read as UTF-8: every line malformed, no word of why
    if fmt in ("parquet", "arrow"):
        _refuse_undecodable_names(files, _NAMES[fmt])
    reader = READERS[fmt]
    source = Source(format=fmt, path=str(root), files=files)
    source.total = sum(p.stat().st_size for p in files)

    def batches() -> Iterator[Batch]:
        state: dict[str, Any] = {"hashes": [], "bytes": 0, "delimiter": source.delimiter,
                                 "dialects": [], "warnings": []}
        # filled as the files are read (a --limit run may not read them all)
        source.dialects, source.warnings = state["dialects"], state["warnings"]
        for index, p in enumerate(files):
            label = source.file_label(index)
            try:
                yield from reader(p, index, label, state)
            except InputError:
                raise
            except READ_ERRORS as e:
                raise InputError(f"cannot read {p}: {_said(e)}") from e
        source._fingerprint = file_fingerprint(state)

    source._batches = batches
    return source


# The files ``save_to_disk`` writes beside the shards that ``state.json`` lists.
_DATASET_META = frozenset({"state.json", "dataset_info.json"})


def _saved_dataset(path: Path) -> Source:
    files = _listed_shards(path)
    source = shard_source(files, path=str(path))
    try:
        entries = sorted(path.iterdir())
    except OSError as e:
        raise InputError(f"cannot list the folder {path}: {e.strerror}") from e
    listed = set(files)
    source.skipped = [(p.name, "not listed in state.json") for p in entries
                      if p not in listed and p.name not in _DATASET_META
                      and format_of(p) is not None]
    return source


def _refuse_undecodable_names(files: list[Path], what: str) -> None:
    """Exit 3 naming the first of ``files`` whose path is not valid UTF-8 (a byte the
    file system holds that no character stands for, shown escaped as ``\\udcff``): Arrow
    opens a file by a UTF-8 path only, and said only "'utf-8' codec can't encode
    character '\\udcff'"."""
    for p in files:
        try:
            str(p).encode("utf-8")
        except UnicodeEncodeError:
            try:
                p.name.encode("utf-8")
                where = "a folder's name holds a byte that is not UTF-8: rename the folder"
            except UnicodeEncodeError:
                named = p.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                where = ("its name holds a byte that is not UTF-8: rename the file (e.g. to "
                         f"{named.replace(chr(0xFFFD), '_')})")
            raise InputError(f"cannot read {p}: {what} files are opened by a UTF-8 path "
                             f"only, and {where}") from None


def shard_source(files: list[Path], *, path: str) -> Source:
    """The ``datasets`` Arrow shards ``files`` as one Source, rows numbered across them."""
    _refuse_undecodable_names(files, "Arrow")
    source = Source(format="datasets", path=path, files=files, global_rows=True)
    source.total = sum(_stat(p).st_size for p in files)

    def batches() -> Iterator[Batch]:
        st: dict[str, Any] = {"hashes": [], "bytes": 0, "row": 0}
        for index, p in enumerate(files):
            try:
                yield from arrow.read_ipc(p, index, None, st)
            except InputError:
                raise
            except READ_ERRORS as e:
                raise InputError(f"cannot read {p}: {_said(e)}") from e
        source._fingerprint = file_fingerprint(st)

    source._batches = batches
    return source


def _listed_shards(path: Path) -> list[Path]:
    """The shards a ``save_to_disk`` folder's ``state.json`` lists, each checked to be a
    regular file in the folder (``InputError`` naming the one that is not)."""
    state_path = path / "state.json"
    try:
        state = json.loads(state_path.read_bytes())
    except OSError as e:
        raise InputError(f"cannot read {state_path}: {e.strerror}") from e
    except ValueError as e:  # not JSON, not UTF-8
        raise InputError(f"{state_path} is not valid JSON ({e}); save the dataset again with "
                         "save_to_disk") from e
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(f, dict) and isinstance(f.get("filename"), str) for f in entries
    ):
        raise InputError(f"{state_path} does not list its data files as datasets writes them "
                         '("_data_files": [{"filename": ...}, ...]); save the dataset again')
    names = [f["filename"] for f in entries]
    if not names:
        raise InputError(f"{state_path} lists no data files")
    files = []
    for name in names:
        if Path(name).name != name or name in (".", ".."):
            raise InputError(f"{state_path} lists {name!r}, which is not a file name in "
                             f"{path}; save the dataset again")
        shard = path / name
        try:
            st = shard.stat()
        except FileNotFoundError as e:
            raise InputError(f"{state_path} lists {name}, which is missing from {path}; "
                             "restore it, or save the dataset again") from e
        except OSError as e:
            raise InputError(f"cannot read {shard}: {e.strerror}") from e
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{shard} is {_kind(st.st_mode)}, not a regular file; preflight "
                             "reads its input more than once: replace it with a file")
        files.append(shard)
    return files


def _dataset_object(ds: Any) -> Source:
    name = type(ds).__name__  # Dataset, or a streamed IterableDataset (no num_rows)
    source = Source(format="datasets.Dataset", path=f"<{name} {getattr(ds, '_fingerprint', '')}>",
                    total=getattr(ds, "num_rows", None), unit="records", global_rows=True)

    def batches() -> Iterator[Batch]:
        row = 0
        for table in ds.with_format("arrow").iter(batch_size=arrow.BATCH_ROWS):
            batch = arrow.table_to_batch(table, row, 0, None)
            batch.progress = table.num_rows
            row += table.num_rows
            yield batch
        source._fingerprint = {"datasets_fingerprint": getattr(ds, "_fingerprint", None),
                               "records": row}

    source._batches = batches
    return source


def _said(error: BaseException) -> str:
    """A read error as the message says it: a compressed stream that ends early (gzip's
    ``EOFError``) is named a truncated file, as a zstd one is."""
    if isinstance(error, EOFError) and "truncated" not in str(error):
        return f"{error} (truncated file?)"
    return str(error)
