"""The near-duplicate kernels stay compiled across runs when preflight is installed where the
user cannot write (a system site-packages, a read-only image): numba caches them in the
user's cache folder instead, and the second run loads them instead of compiling (issue 17,
item 3). The signal is numba's own per-kernel statistics, not a clock."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import json, sys
from preflight import minhash, run_preflight
rules = {"rules": [{"id": "near", "check": "near_duplicate"}], "fields": {"text": "text"}}
report = run_preflight(sys.argv[1], rules, smoke=False)
kernels = minhash.kernels()
print(json.dumps({
    "module": minhash.__file__,
    "violations": report.rule("near").violations,
    "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels.values()),
    "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels.values()),
    "cache": sorted({k.stats.cache_path for k in kernels.values()}),
}))
"""


def _chmod_tree(top: Path, *, writable: bool) -> None:
    for path in [top, *top.rglob("*")]:
        mode = path.stat().st_mode
        mode = mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP
                                                             | stat.S_IWOTH)
        path.chmod(mode)


@pytest.fixture
def read_only_install(tmp_path: Path) -> Iterator[Path]:
    """preflight copied as a wheel lays it out (presets inside), every file read-only."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "preflight", site / "preflight",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", site / "preflight" / "rules")
    _chmod_tree(site, writable=False)
    try:
        yield site
    finally:
        _chmod_tree(site, writable=True)  # so that pytest can remove it


def _command() -> list[str]:
    """Python as an ordinary user: root ignores file modes, so as root it runs without the
    capabilities that override them (setpriv)."""
    if os.geteuid() != 0:
        return [sys.executable]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a read-only folder stays writable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", sys.executable]


def test_kernels_are_cached_in_the_user_cache_when_the_install_is_read_only(
        tmp_path: Path, read_only_install: Path) -> None:
    data = tmp_path / "d.jsonl"
    base = "the quick brown fox jumps over the lazy dog near the quiet river bank today"
    texts = [f"{base} record {i}" for i in range(20)] + [f"{base} record 3 again"]
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    home, cache = tmp_path / "home", tmp_path / "xdg-cache"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env.update(PYTHONPATH=str(read_only_install), HOME=str(home), XDG_CACHE_HOME=str(cache),
               PYTHONDONTWRITEBYTECODE="1")
    probe = subprocess.run([*_command(), "-c", "open('probe', 'w')"],
                           cwd=read_only_install / "preflight", env=env, capture_output=True,
                           check=False)
    assert probe.returncode != 0, "the install folder is writable: the test proves nothing"

    runs = []
    for _ in range(2):
        proc = subprocess.run([*_command(), "-c", RUN, str(data)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.splitlines()[-1]))
    first, second = runs
    assert first["module"].startswith(str(read_only_install))  # the copy ran, not the tree
    assert first["violations"] == second["violations"] >= 1  # the near copy was found
    assert first["misses"] > 0 and first["hits"] == 0  # compiled ...
    assert second["hits"] > 0 and second["misses"] == 0  # ... then loaded, not compiled
    assert first["cache"] == second["cache"]
    assert all(Path(c).is_relative_to(cache) for c in first["cache"]), first["cache"]
    assert any(cache.rglob("*.nbi")) and any(cache.rglob("*.nbc"))
    assert not any(read_only_install.rglob("__pycache__"))


def test_numba_cache_dir_wins_when_set(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(chosen)}
    # Where each kernel caches is fixed when it is set up; nothing needs compiling to see it.
    script = ("import json; from preflight import minhash; "
              "print(json.dumps(sorted({k.stats.cache_path "
              "for k in minhash.kernels().values()})))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(proc.stdout)
    assert paths and all(Path(p).is_relative_to(chosen) for p in paths), paths


def test_no_writable_cache_folder_compiles_instead_of_failing(tmp_path: Path,
                                                              read_only_install: Path) -> None:
    nowhere = tmp_path / "read-only-home"
    nowhere.mkdir()
    nowhere.chmod(0o555)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env.update(PYTHONPATH=str(read_only_install), HOME=str(nowhere),
               XDG_CACHE_HOME=str(nowhere / "cache"), PYTHONDONTWRITEBYTECODE="1")
    script = ("import json; import numpy as np; from preflight import minhash; "
              "k = minhash.kernels(); "
              "print(json.dumps({'paths': sorted({str(d.stats.cache_path) for d in k.values()}),"
              " 'mix': int(minhash.fmix64(np.uint64(1)))}))")
    proc = subprocess.run([*_command(), "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    nowhere.chmod(0o755)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert found["paths"] == ["None"]  # no cache, and no "cannot cache function" error
    assert found["mix"] > 0  # a kernel still compiles and runs
