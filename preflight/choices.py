"""The names and defaults the command line shows before anything heavy loads: executors,
report formats and their file names, report.md's default size.

``preflight --help`` builds every command's options from these; they live here, free of
third-party imports, so that building the help never loads polars, pydantic or numba.
"""

from __future__ import annotations

EXECUTORS = ("local", "ray")
FORMATS = ("json", "html", "junit", "md")
DEFAULT_FORMATS = ("json", "html")
FILE_NAMES = {"json": "report.json", "html": "report.html", "junit": "report.junit.xml",
              "md": "report.md"}
# The smoke test's replay file in --out (a failing run's minimal batch).
REPLAY_NAME = "smoke-replay.pt"
# Every name a run writes into --out (and removes first, as an earlier run's).
OUT_NAMES = ("findings.parquet", REPLAY_NAME, *FILE_NAMES.values())
MD_MAX_CHARS = 60_000  # GitHub comments hold 65,536
