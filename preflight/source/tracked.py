"""Opening input files: decompression, and hashing the bytes as they are read."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any, BinaryIO

import xxhash
import zstandard

from preflight.errors import InputError


class Tracked(io.RawIOBase):
    """A raw file that hashes what is read from it and knows how far it has got."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.hash = xxhash.xxh3_128()
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        if n:
            self.hash.update(memoryview(buffer)[:n])
            self.pos += n
        return n or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


class Prefixed(io.RawIOBase):
    """A binary stream that yields ``head`` first, then the rest of ``stream`` (a reader
    that read ahead hands back what it did not use). Closing it leaves ``stream`` open."""

    def __init__(self, head: bytes, stream: Any) -> None:
        super().__init__()
        if isinstance(stream, Prefixed):  # one level, however often it is wrapped
            head, stream = head + stream._head, stream._stream
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._stream.read(size)
        cut = len(self._head) if size is None or size < 0 else size
        out, self._head = self._head[:cut], self._head[cut:]
        return out

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Zstd(io.RawIOBase):
    """Zstandard frames, one after another; a file cut off inside a frame is an error
    (the stock stream reader just stops early, which would lose records silently)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._pending = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._in_frame:
                    raise ValueError("the zstd stream ends inside a frame (truncated file?)")
                return 0
            while chunk:
                self._in_frame = True
                self._pending += self._obj.decompress(chunk)
                if not self._obj.eof:
                    break
                chunk = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                self._in_frame = False
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def open_stream(path: Path) -> tuple[BinaryIO, Tracked]:
    """Open ``path`` for reading, decompressing .gz/.zst; also return the tracked raw file
    (its ``pos`` is the progress in file bytes, its ``hash`` the fingerprint)."""
    try:
        raw = Tracked(open(path, "rb"))  # noqa: SIM115 - closed by the caller
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror}") from e
    buffered = io.BufferedReader(raw, buffer_size=1 << 20)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.GzipFile(fileobj=buffered), raw  # type: ignore[return-value]
    if suffix in (".zst", ".zstd"):
        return io.BufferedReader(_Zstd(buffered), buffer_size=1 << 20), raw
    return buffered, raw


class _Range(io.RawIOBase):
    """At most ``size`` bytes of a file, from where it stands."""

    def __init__(self, raw: BinaryIO, size: int) -> None:
        self._raw = raw
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        n = self._raw.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_range(path: Path, start: int, end: int) -> tuple[BinaryIO, Tracked]:
    """Open the bytes ``[start, end)`` of an uncompressed file, tracked like ``open_stream``."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror}") from e
    f.seek(start)
    raw = Tracked(_Range(f, end - start))  # type: ignore[arg-type]
    return io.BufferedReader(raw, buffer_size=1 << 20), raw  # type: ignore[return-value]


def hash_file(path: Path) -> str:
    """xxh3-128 of a whole file, streamed."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def note_file(state: dict[str, Any], path: Path, digest: str, size: int) -> None:
    """Record one file's hash in the shared reading state."""
    state.setdefault("hashes", []).append((path.name, digest, size))
    state["bytes"] = state.get("bytes", 0) + size


def file_fingerprint(state: dict[str, Any]) -> dict[str, Any]:
    """Combine the per-file hashes into the source's fingerprint."""
    hashes = state.get("hashes", [])
    combined = xxhash.xxh3_128()
    for name, digest, size in hashes:
        combined.update(f"{name}\0{digest}\0{size}\n".encode("utf-8", "surrogateescape"))
    return {
        "xxh3_128": combined.hexdigest(),
        "bytes": state.get("bytes", 0),
        "files": [{"name": n, "xxh3_128": d, "bytes": s} for n, d, s in hashes],
    }
