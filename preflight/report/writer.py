"""Write ``report.json`` atomically (a temporary name, then a rename)."""

from __future__ import annotations

import os
from pathlib import Path

from preflight.report.model import Report


def write_report(report: Report, out_dir: Path) -> Path:
    """Write ``report.json`` into ``out_dir`` and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / "report.json"
    report.outputs["report"] = str(final)
    tmp = out_dir / f".report.json.{os.getpid()}.tmp"
    tmp.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, final)
    return final
