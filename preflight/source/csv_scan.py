"""CSV read fast: record boundaries found over whole blocks with numpy, clean stretches of
records parsed by Arrow's CSV reader (every cell a string, typed afterwards as the exact
reader types them).

Per block of bytes (starting at a record boundary): quotes toggle "inside a quoted field";
blocks are cut at line feeds outside quotes. A stretch is clean when every quote is where
the strict ``csv`` module reads it the same way: one outside a field's quotes opens a field
(right after a delimiter, a line feed, the stretch's start, or the first quote of a doubled
pair), one inside closes it or doubles (followed by a delimiter, a line end, another quote
or the end of the file). Arrow then reads the stretch with the header's names; a stretch it
refuses (a row with the wrong number of cells, bytes that are not UTF-8...) is halved at
record ends down to a few records, which the exact reader (``csv.csv_rows``) reads, and
Arrow reads on. From an unclean spot (a stray quote: where the exact reader's record ends
is only known by reading on) the exact reader reads the rest of the file. Rows, cells and
findings are the exact reader's either way (a hypothesis test checks).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

CHUNK_BYTES = 8 << 20  # bytes read at a time (a block grows to hold its first record)
MAX_PENDING = 64 << 20  # a record longer than this is left to the exact reader
EXACT_RECORDS = 64  # a refused stretch is halved down to this many records
_U8 = np.uint8
_QUOTE, _LF, _CR = 0x22, 0x0A, 0x0D


@dataclass
class Clean:
    """``ends``: where each line of the clean stretch ends (past its line feed; the
    stretch is ``data[:end]``, whole records); ``stop``: the exact reader must read on from
    ``end`` (else more bytes are needed)."""

    ends: np.ndarray
    stop: bool

    @property
    def end(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0


def clean_records(data: bytes, delimiter: str, *, eof: bool) -> Clean:
    """The whole clean records at the start of ``data`` (which starts at a record
    boundary); before the end of the file only bytes up to its last line end are judged
    (the record after it is not whole yet)."""
    b = np.frombuffer(data, _U8)
    n = len(b)
    limit = n if eof else int(data.rfind(b"\n")) + 1
    b = b[:limit]
    d = ord(delimiter)
    quotes = np.flatnonzero(b == _QUOTE)
    odd_at = limit  # the first byte that is not clean
    if len(quotes):
        inside = (np.arange(len(quotes)) & 1) == 1  # the quote before it opened a field
        prev = b[np.maximum(quotes - 1, 0)]
        nxt = b[np.minimum(quotes + 1, limit - 1)]
        opens_ok = (quotes == 0) | (prev == d) | (prev == _LF) | (prev == _QUOTE)
        closes_ok = ((nxt == d) | (nxt == _LF) | (nxt == _CR) | (nxt == _QUOTE)
                     | (quotes == limit - 1))
        bad = np.where(inside, ~closes_ok, ~opens_ok)
        if bad.any():
            odd_at = min(odd_at, int(quotes[np.argmax(bad)]))
    # Blocks are cut at line feeds outside quotes (an even number of quotes before them); a
    # bare carriage return also ends a record, for Arrow as for the csv module, inside a block.
    ends = np.flatnonzero(b[:odd_at] == _LF)
    ends = ends[(np.searchsorted(quotes, ends) & 1) == 0] + 1
    if eof and odd_at == limit and len(quotes) % 2 == 0 and n > (ends[-1] if len(ends) else 0):
        ends = np.append(ends, n)  # the last record needs no line end
    return Clean(ends, stop=odd_at < limit)


def read_records(data: bytes, names: list[str], delimiter: str) -> pa.Table | None:
    """Arrow's reading of whole clean records, every cell a string; None when it refuses
    them (a row with the wrong number of cells, invalid UTF-8, a BOM first, which Arrow
    would drop...)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        return pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                           block_size=max(1 << 20, len(data) + 1)),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True,
                                             ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), null_values=[],
                strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
