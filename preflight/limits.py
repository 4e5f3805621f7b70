"""The ranges a rules file's numbers must fall in, shared by ``preflight.config`` and the checks'
``Params`` models.

A rules file is input too: a shingle size of 10^9 or a seed past 64 bits must be a config
error with the key that is wrong, not 15 GB of memory or an "internal error". The bounds are
generous (far past any real setting) and stated in each field's description. Numbers are
strict (pydantic's ``StrictInt``/``StrictFloat``): ``true`` is not ``1`` and ``"5"`` is
not ``5``.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
# Seeds that numpy's RandomState (datasketch's permutations) accepts.
SEED32_MAX = 2**32 - 1
# Tokens in a context window, a token limit or a reserve: past every model today.
MAX_TOKENS = 100_000_000
MAX_CLASSES = 1_000_000
MAX_VOCAB = 16_777_216  # 2^24
# Words or characters per MinHash shingle.
MAX_SHINGLE = 64
# Characters of a document (exact_duplicate's minimum length).
MAX_CHARS = 1_000_000_000
