"""Dictionary columns into an Arrow IPC file: one dictionary per column for the whole file.

An Arrow IPC file (unlike a stream or Parquet) holds a single dictionary per dictionary
column for all its batches. The clean output is written batch by batch, and a batch whose
text ``fix`` changed gets a new dictionary (as does every batch of an IPC stream input that
replaces its dictionaries), so writing the batches as they come fails. Instead they go to an
unnamed temporary IPC stream, which allows a new dictionary per batch, while the union of
each column's dictionary values is kept in first-seen order (about the size of the input's
own dictionary, which reading it already holds); ``finish`` then writes every batch into the
file with its indices pointed into that union. Dictionaries nested in a list or struct are
not handled here (the writer's error says to write JSON Lines or Parquet).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from preflight.errors import ConfigError


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The names of ``schema``'s top-level dictionary columns."""
    return [f.name for f in schema if pa.types.is_dictionary(f.type)]


class DictionarySpill:
    """Batches for an Arrow IPC file whose dictionary columns may change between batches;
    with no ``path`` (a dry run) only the unions are kept, for the same refusals."""

    def __init__(self, schema: pa.Schema, path: Path | None) -> None:
        self.schema, self.path = schema, path
        self._names = dictionary_columns(schema)
        self._values: dict[str, pa.Array] = {}
        self._spill: Any = None if path is None else tempfile.TemporaryFile(  # noqa: SIM115
            prefix=f"preflight-fix-{os.getpid()}-")
        self._sink = None if path is None else pa.ipc.new_stream(self._spill, schema)

    def write(self, table: pa.Table) -> None:
        for name in self._names:
            for chunk in table.column(name).chunks:
                self._add(name, chunk.dictionary)
        if self._sink is not None:
            self._sink.write_table(table)

    def _add(self, name: str, dictionary: pa.Array) -> None:
        known = self._values.get(name)
        if known is None:
            self._values[name] = dictionary.unique()
        elif not (len(dictionary) <= len(known) and dictionary.equals(known[:len(dictionary)])):
            new = dictionary.filter(pc.invert(pc.is_in(dictionary, value_set=known)))
            if len(new):
                self._values[name] = pa.concat_arrays([known, new.unique()])

    def finish(self) -> None:
        """Write the file (nothing for a dry run), after refusing a union that the column's
        index type cannot address."""
        for name, values in self._values.items():
            index = self.schema.field(name).type.index_type
            most = 2 ** (index.bit_width - (1 if pa.types.is_signed_integer(index) else 0)) - 1
            if len(values) - 1 > most:
                raise ConfigError(
                    f"column {name!r}: the clean output needs {len(values):,} dictionary "
                    f"entries (one dictionary for the whole Arrow file), more than its "
                    f"{index} indices address; "
                    "write Parquet or JSON Lines: --format parquet")
        if self.path is None:
            return
        assert self._sink is not None
        self._sink.close()
        self._spill.seek(0)
        # The file opened here, not by the writer, so that it is closed even when the
        # writer's own close fails (a full disk): its space is freed with the temporary name.
        with pa.OSFile(str(self.path), "wb") as file, pa.ipc.new_file(file, self.schema) as out:
            for batch in pa.ipc.open_stream(self._spill):
                out.write_batch(self._repointed(batch))
        self.discard()

    def _repointed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = list(batch.columns)
        for name in self._names:
            k = batch.schema.get_field_index(name)
            column, kind = columns[k], self.schema.field(name).type
            where = pc.index_in(column.dictionary, value_set=self._values[name])
            indices = where.take(column.indices).cast(kind.index_type)
            columns[k] = pa.DictionaryArray.from_arrays(indices, self._values[name],
                                                        ordered=kind.ordered)
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def discard(self) -> None:
        if self._spill is not None:
            with contextlib.suppress(OSError):
                self._spill.close()
