"""The table formats' writer: Parquet or Arrow IPC.

From Arrow input (Parquet, Arrow IPC) the input's schema is kept exactly (types,
dictionaries, metadata): untouched rows are taken as Arrow values and changed cells replaced
in their own type. From JSON or CSV input the records are typed once the whole output is
known: chunks of records are spilled to an unnamed temporary file and written in the schema
unified over all of them. A record that cannot be held so (a number past 64 bits, types that
share no column) is refused with a message that says to write JSON Lines.

Writing nowhere (a dry run) takes the same steps into ``pa.MockOutputStream`` and keeps only
the chunks' schemas, not the records: memory stays bounded and nothing is written. When the
chunks were typed alike, each went to the writer in that schema, as the real run writes them;
otherwise ``retype`` holds the unified schema and the caller sends the units again to a
writer given it, which conforms each chunk as it is typed (as the real run does when reading
the spill back).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from preflight.errors import ConfigError
from preflight.fix.units import Input, Unit
from preflight.fix.writers.base import Writer
from preflight.fix.writers.dictionaries import DictionarySpill, dictionary_columns
from preflight.fix.writers.renames import Mend, renamed_schema, renamed_table
from preflight.record_batches import clashing_field, records_table, replace_lone_surrogates

_CHUNK = 65_536
# A JSON escape of a high or low surrogate: only lines holding one may hold a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
# A number no 64-bit column holds as written has 19 digits in a row (an integer past 64
# bits; a float past its range, or below it, with no exponent) or an exponent: with every
# digit read as 0, its text holds "0" * 19, "0e" or "0E" (faster to find than by a regex).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"0" * 9)


class ArrowWriter(Writer):
    """Parquet or Arrow IPC; the input's schema when the input is Arrow."""

    def __init__(self, path: Path | None, found: Input, kind: str, *,
                 schema: pa.Schema | None = None, rename: Mend | None = None) -> None:
        """``schema``: (writing nowhere, from JSON or CSV) the one the records are written
        in, learnt by an earlier writer's ``retype``. ``rename``: how the fix mends a
        struct field's name (Arrow in: ``renames``)."""
        super().__init__(path, found)
        self.kind = kind
        if found.syntax == "arrow" and found.schema is None:
            raise ConfigError(found.schema_error or "the input has no Arrow schema")
        self._schema = found.schema if found.syntax == "arrow" else schema
        self._named: pa.Schema | None = None  # the schema written, names mended
        if found.syntax == "arrow" and rename is not None:
            assert found.schema is not None
            named, self.renamed = renamed_schema(found.schema, rename)
            if named is not found.schema:
                self._named = named
        self._given = schema is not None
        self._failed: ConfigError | None = None  # writing nowhere: see _write_now
        self._table: pa.RecordBatch | None = None
        self._take: list[int] = []
        self._edits: dict[tuple[int, str], Any] = {}
        self._rows: list[dict[str, Any]] = []
        self._spill: Any = None  # chunks of records from JSON/CSV, typed at the end
        self._chunks: list[pa.Schema] = []
        self._out: Any = None
        self._file: Any = None  # what _out writes to, closed by this writer
        self._dictionaries: DictionarySpill | None = None  # Arrow out, dictionary columns

    def keep(self, unit: Unit) -> None:
        if unit.syntax == "arrow":
            self._arrow(unit)
        else:
            self._record(unit, unit.record())

    def change(self, unit: Unit, after: dict[str, Any]) -> None:
        if unit.syntax != "arrow":
            self._record(unit, after)
            return
        before = unit.record()
        assert before is not None
        self._arrow(unit)
        for name, value in after.items():
            if before.get(name) != value:
                self._edits[(len(self._take) - 1, name)] = value

    # -- Arrow in, Arrow out: values and schema as read
    def _arrow(self, unit: Unit) -> None:
        if unit.table is not self._table:
            self._flush_arrow()
            self._table = unit.table
        self._take.append(unit.index)

    def _flush_arrow(self) -> None:
        if self._table is None or not self._take:
            self._take, self._edits = [], {}
            return
        taken = _take(self._table, pa.array(self._take, type=pa.int64()))
        columns = dict(zip(taken.schema.names, taken.columns, strict=True))
        for name in {name for _, name in self._edits}:
            values = columns[name].to_pylist()
            for (k, n), value in self._edits.items():
                if n == name:
                    values[k] = value
            columns[name] = pa.array(values, type=columns[name].type)
        table = pa.Table.from_batches([pa.RecordBatch.from_arrays(
            list(columns.values()), schema=taken.schema)])
        self._write(table)
        self._take, self._edits = [], {}

    def _write(self, table: pa.Table) -> None:
        assert self._schema is not None
        if table.schema != self._schema:
            table = _conform(table, self._schema)
        schema = self._schema
        if self._named is not None:
            table, schema = renamed_table(table, self._named), self._named
        try:
            if self._dictionaries is None and self.kind == "arrow" and dictionary_columns(
                    schema):
                self._dictionaries = DictionarySpill(schema, self.path)
            if self._dictionaries is not None:
                self._dictionaries.write(table)
                return
            if self._out is None:
                # The file is opened here, not by the writer: a writer that fails to close
                # (its footer finds the disk full) leaves the file it opened open, holding a
                # deleted file's space for as long as the process lives.
                self._file = (pa.MockOutputStream() if self.path is None
                              else pa.OSFile(str(self.path), "wb"))
                self._out = (pq.ParquetWriter(self._file, schema)
                             if self.kind == "parquet"
                             else pa.ipc.new_file(self._file, schema))
            self._out.write_table(table)
        except pa.ArrowException as e:
            raise ConfigError(f"the records cannot be written as {self.kind} ({e}); "
                              "write JSON Lines: --format jsonl") from e

    # -- JSON or CSV in: records typed once the whole output is known
    def _record(self, unit: Unit, record: dict[str, Any] | None) -> None:
        assert record is not None
        if unit.syntax == "json":
            self._exact_numbers(unit)
            self._no_lone_surrogates(unit, record)
        self._rows.append(record)
        if len(self._rows) >= _CHUNK:
            self._spill_rows()

    def _no_lone_surrogates(self, unit: Unit, record: dict[str, Any]) -> None:
        """A lone surrogate (``"\\ud800"`` in JSON) is text no UTF-8 column holds: refuse,
        naming the row, rather than change it on the way (the ``encoding`` check flags it
        and its fix quarantines the record)."""
        if unit.raw is not None and _SURROGATE_ESCAPE.search(unit.raw) is None:
            return
        if replace_lone_surrogates(record)[1]:
            where = f"row {unit.row}" + (f" of {unit.file}" if unit.file else "")
            name = {"parquet": "Parquet", "arrow": "Arrow"}.get(self.kind, self.kind)
            raise ConfigError(f"{where} holds a lone surrogate (a \\ud800-style escape), "
                              f"which {name}'s UTF-8 strings cannot hold; add the `encoding` "
                              "check to the rules (its fix quarantines such records), or "
                              "write JSON Lines: --format jsonl")

    def _exact_numbers(self, unit: Unit) -> None:
        """A number a 64-bit column cannot hold as written (``1e400``, an integer past 64
        bits) would be changed on the way: refuse instead."""
        def refuse(text: str) -> None:
            where = f"row {unit.row}" + (f" of {unit.file}" if unit.file else "")
            raise ConfigError(f"{where}: the number {text[:40]} does not fit a 64-bit "
                              f"{self.kind} column as written; write JSON Lines: "
                              "--format jsonl (or --out with .jsonl)")

        def exact_float(text: str) -> float:
            value = float(text)
            mantissa = text.lower().split("e")[0]
            if math.isinf(value) or (value == 0 and any(c in mantissa for c in "123456789")):
                refuse(text)  # past the range, or below it (1e-400 would read as 0.0)
            return value

        def exact_int(text: str) -> int:
            value = int(text)
            if not -(2**63) <= value < 2**63:
                refuse(text)
            return value

        assert unit.raw is not None
        zeros = unit.raw.translate(_DIGITS_AS_ZERO)
        if b"0" * 19 in zeros or b"0e" in zeros or b"0E" in zeros:
            json.loads(unit.raw, parse_float=exact_float, parse_int=exact_int)

    def _spill_rows(self) -> None:
        if not self._rows:
            return
        # Columns from every record's keys (a field the first record lacks is kept, null
        # where absent); a field whose values cannot share one Arrow type is refused.
        table = records_table(self._rows)
        if table is None:
            field = clashing_field(self._rows)
            named = f"field {field!r}: " if field is not None else "a field's "
            raise ConfigError(f"the records cannot be one {self.kind} table ({named}"
                              "values have types that cannot share a column, a number past "
                              "64 bits, or nesting Arrow cannot hold); write JSON Lines: "
                              "--format jsonl")
        if self._spill is None:
            # Unnamed: nothing is left behind, whatever happens to the process. Writing
            # nowhere, the chunks are serialised as when spilled (what Arrow cannot write
            # fails alike), and not kept.
            self._spill = (pa.MockOutputStream() if self.path is None else
                           tempfile.TemporaryFile(  # noqa: SIM115 - closed in close/discard
                               prefix=f"preflight-fix-{os.getpid()}-"))
        try:
            sink = pa.ipc.new_stream(self._spill, table.schema)
            sink.write_table(table)
            sink.close()
        except pa.ArrowException as e:  # e.g. nesting deeper than Arrow writes
            raise ConfigError(f"the records cannot be one {self.kind} table ({e}); "
                              "write JSON Lines: --format jsonl") from e
        self._chunks.append(table.schema)
        self._rows = []
        if self.path is None:
            self._write_now(table)

    def _write_now(self, table: pa.Table) -> None:
        """Writing nowhere: the chunk goes to the writer now if it is typed as the records
        will be written (as given, or as the first chunk was). A failure counts only if no
        chunk was typed otherwise: it waits for ``close``, where the real run writes."""
        if self._given:
            self._write(table)
            return
        if self._schema is None:
            self._schema = table.schema
        if table.schema == self._schema and self._failed is None:
            try:
                self._write(table)
            except ConfigError as e:
                self._failed = e

    def _close_records(self) -> None:
        self._spill_rows()
        if not self._chunks:
            self._schema = pa.schema([])
            self._write(pa.table({}))
            return
        if self.path is None:
            self._close_nowhere()
            return
        try:
            self._schema = self._unified()
            self._spill.seek(0)
            for _ in self._chunks:
                self._write(pa.ipc.open_stream(self._spill).read_all())
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise ConfigError(f"the records cannot be one {self.kind} table ({e}); "
                              "write JSON Lines: --format jsonl") from e
        finally:
            self._spill.close()

    def _close_nowhere(self) -> None:
        """Unify the chunks' schemas as ``_close_records`` does; if a chunk was typed
        otherwise, ``retype`` asks for the records again in the unified schema."""
        if self._given:
            return
        unified = self._unified()
        if any(schema != unified for schema in self._chunks):
            self.retype = unified
        elif self._failed is not None:
            raise self._failed

    def _unified(self) -> pa.Schema:
        """The schema every chunk's records are written in."""
        try:
            return pa.unify_schemas(self._chunks, promote_options="permissive")
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise ConfigError(f"the records cannot be one {self.kind} table ({e}); "
                              "write JSON Lines: --format jsonl") from e

    def close(self) -> None:
        try:
            self._finish()
        except BaseException:
            self.discard()  # a full disk: the file is let go of, not left open
            raise

    def _finish(self) -> None:
        if self.found.syntax == "arrow":
            self._flush_arrow()
            if self._out is None and self._dictionaries is None:
                self._write(self._schema.empty_table())  # type: ignore[union-attr]
        else:
            self._close_records()
        if self._dictionaries is not None:
            try:
                self._dictionaries.finish()
            except pa.ArrowException as e:
                raise ConfigError(f"the records cannot be written as {self.kind} ({e}); "
                                  "write JSON Lines: --format jsonl") from e
        if self._out is not None:  # None: written nowhere, a retype after a failed chunk
            self._out.close()
            self._file.close()

    def discard(self) -> None:
        if self._dictionaries is not None:
            self._dictionaries.discard()
        for handle in (self._out, self._file, self._spill):
            if handle is not None:
                with contextlib.suppress(OSError, pa.ArrowException):
                    handle.close()


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``: its columns in the schema's order, a column it lacks as
    nulls, then cast (shards or chunks whose columns differ)."""
    columns = [table.column(f.name) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    try:
        return pa.Table.from_arrays(columns, names=schema.names).cast(schema)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise ConfigError(f"the records cannot be one table of schema {schema} ({e}); "
                          "write JSON Lines: --format jsonl") from e


def _take(batch: pa.RecordBatch, index: pa.Array) -> pa.RecordBatch:
    """``batch.take(index)``; columns whose type Arrow cannot take from (string_view…) go
    through their plain type and back."""
    try:
        return batch.take(index)
    except pa.ArrowNotImplementedError:
        columns = []
        for column in batch.columns:
            try:
                columns.append(column.take(index))
            except pa.ArrowNotImplementedError as e:
                if pa.types.is_run_end_encoded(column.type):
                    values = pc.run_end_decode(column).take(index)
                    columns.append(pc.run_end_encode(
                        values, run_end_type=column.type.run_end_type))
                    continue
                plain = pa.large_string() if pa.types.is_string_view(column.type) else (
                    pa.large_binary() if pa.types.is_binary_view(column.type) else None)
                if plain is None:
                    raise ConfigError(f"a {column.type} column cannot be copied row by row "
                                      "by this pyarrow; write JSON Lines: --format jsonl"
                                      ) from e
                columns.append(column.cast(plain).take(index).cast(column.type))
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
