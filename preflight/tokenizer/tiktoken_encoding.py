"""tiktoken encodings (``tiktoken:NAME``), read from tiktoken's local cache and never
downloaded. tiktoken is imported only when such an encoding is loaded.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator

import numpy as np

from preflight.cores import available_cores
from preflight.errors import ConfigError
from preflight.token_pieces import PieceCounter
from preflight.tokenizer.bounds import TIKTOKEN_SPACE_SPLITTING
from preflight.tokenizer.counter import TokenCounter


class _NotCached(Exception):
    """tiktoken asked for a URL: the encoding's file is not in its local cache."""


_tiktoken_lock = threading.Lock()


@contextlib.contextmanager
def _tiktoken_offline() -> Iterator[None]:
    """Let tiktoken read its cache and local files, never a URL: its ``read_file`` is the
    one place it fetches (``requests.get`` for http(s), ``blobfile`` for other schemes)."""
    import tiktoken.load

    fetch = tiktoken.load.read_file

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _NotCached(blobpath)
        return fetch(blobpath)

    with _tiktoken_lock:
        tiktoken.load.read_file = read_file
        try:
            yield
        finally:
            tiktoken.load.read_file = fetch


def tiktoken_counter(name: str) -> TokenCounter:
    try:
        import tiktoken
    except ImportError as e:
        raise ConfigError("tiktoken:NAME needs tiktoken: pip install tiktoken") from e
    try:
        with _tiktoken_offline():
            enc = tiktoken.get_encoding(name)
    except _NotCached as e:
        raise ConfigError(
            f"tiktoken encoding {name!r} is not cached on this machine, and preflight works "
            "offline (it never downloads): copy tiktoken's cache from a machine where "
            f"tiktoken.get_encoding({name!r}) has run and point TIKTOKEN_CACHE_DIR at it, or "
            "give the model's tokenizer.json instead"
        ) from e
    except Exception as e:
        raise ConfigError(
            f"tiktoken encoding {name!r} is not available offline ({type(e).__name__}: {e}); "
            "put it in tiktoken's cache (TIKTOKEN_CACHE_DIR) or use a tokenizer.json"
        ) from e
    # Its batch API runs a thread per core: the cores this process may use, one in a pool
    # worker (RAYON_NUM_THREADS there, as for the tokenizers library).
    threads = int(os.environ.get("RAYON_NUM_THREADS") or 0) or available_cores()

    def encode(texts: list[str], add_special_tokens: bool) -> list[int]:
        return [len(x) for x in enc.encode_ordinary_batch(texts, num_threads=threads)]

    def prefix(text: str, k: int) -> str:
        return enc.decode_bytes(enc.encode_ordinary(text)[:k]).decode("utf-8", "ignore")

    def ids(texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        return enc.encode_ordinary_batch(texts, num_threads=threads)

    def count_words(words: list[str]) -> np.ndarray:
        return np.fromiter((len(x) for x in enc.encode_ordinary_batch(words, num_threads=threads)),
                           np.int64, len(words))

    splits = getattr(enc, "_pat_str", None) in TIKTOKEN_SPACE_SPLITTING
    longest = max((len(b) for b in enc.token_byte_values()), default=1)
    # Ordinary encoding never yields a special token: the largest id below them all.
    specials = {enc.encode_single_token(t) for t in enc.special_tokens_set}
    base_max = enc.max_token_value
    while base_max in specials:
        base_max -= 1
    return TokenCounter(name=f"tiktoken:{name}", family="tiktoken", encode=encode,
                        byte_bound=True, longest_token_bytes=math.ceil(longest), prefix=prefix,
                        ids=ids, vocab_size=enc.n_vocab, base_max_id=base_max,
                        pieces=PieceCounter(count_words) if splits else None,
                        token_text=lambda i: enc.decode_single_token_bytes(i).decode(
                            "utf-8", "backslashreplace"))
