"""How the pool's workers start: forked by a fork server that imported the checks once, or
spawned where this process's own code already runs a fork server of its own; either way
with one thread per library and without running the caller's script again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from preflight.executor import launch

ROOT = Path(__file__).resolve().parents[2]

# A caller's script with no ``if __name__ == "__main__"`` guard: each run of its body adds
# a line to RUNS; it asks two workers for their pid, parent pid and thread settings.
SCRIPT = """
import json, os, sys
from pathlib import Path

import pytest
with open(sys.argv[1], "a") as f:
    f.write("ran\\n")
if sys.argv[3] == "own-server":  # this script's code starts a fork server of its own
    import multiprocessing.forkserver
    multiprocessing.forkserver.set_forkserver_preload([])
    multiprocessing.forkserver.ensure_running()
from preflight.executor import launch, pool
keys = sorted(launch.WORKER_ENV)
with pool.Pool(2) as workers:
    seen = list(workers.ordered([(os.getpid, ())] * 2 + [(os.getppid, ())] * 2
                                + [(os.getenv, (key,)) for key in keys]))
Path(sys.argv[2]).write_text(json.dumps({"me": os.getpid(), "seen": seen}))
"""


def _run(tmp_path: Path, mode: str) -> tuple[list[str], dict]:
    script, runs, out = tmp_path / "caller.py", tmp_path / "runs.txt", tmp_path / "out.json"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(script), str(runs), str(out), mode], env=env,
                   check=True, timeout=300, cwd=tmp_path)
    return runs.read_text().splitlines(), json.loads(out.read_text())


def test_workers_forked_by_the_server_run_the_script_once(tmp_path: Path) -> None:
    runs, got = _run(tmp_path, "plain")
    assert runs == ["ran"]  # the workers did not run the caller's script
    pids, parents, env = got["seen"][:2], got["seen"][2:4], got["seen"][4:]
    assert got["me"] not in pids
    # Forked by the fork server (a child of this process), not by this process itself.
    assert got["me"] not in parents
    assert env == [launch.WORKER_ENV[k] for k in sorted(launch.WORKER_ENV)]


def test_a_fork_server_of_the_callers_own_means_spawned_workers(tmp_path: Path) -> None:
    """That server has neither the checks imported nor the workers' variables: the pool
    spawns its workers instead, which still get one thread per library."""
    runs, got = _run(tmp_path, "own-server")
    assert runs == ["ran"]
    parents, env = got["seen"][2:4], got["seen"][4:]
    assert parents == [got["me"], got["me"]]  # spawned by this process
    assert env == [launch.WORKER_ENV[k] for k in sorted(launch.WORKER_ENV)]


def test_workers_take_the_variables_of_each_pools_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork server outlives a pool; a later pool's workers still see the variables
    this process has when that pool starts (a tokenizer's cache folder, say)."""
    from preflight.executor import pool

    with pool.Pool(1) as first:  # the fork server runs from here on, if not already
        list(first.ordered([(os.getpid, ())]))
    monkeypatch.setenv("PREFLIGHT_TEST_MARK", "set after the server started")
    monkeypatch.delenv("HOME", raising=False)
    with pool.Pool(1) as second:
        seen = list(second.ordered([(os.getenv, ("PREFLIGHT_TEST_MARK",)),
                                    (os.getenv, ("HOME",))]))
    assert seen == ["set after the server started", None]


# A Ctrl-C at the terminal reaches every process of the group: here the fork server, in the
# middle of its imports (a module of ``preload`` that waits to be interrupted there).
INTERRUPTED = """
import os, signal, sys, time
from pathlib import Path

from preflight.executor import pool
import multiprocessing.forkserver as forkserver

with pool.Pool(1, preload=("slow_import",)) as workers:
    server = forkserver._forkserver._forkserver_pid
    while not Path("importing").exists():
        time.sleep(0.05)
    os.kill(server, signal.SIGINT)
    Path("interrupted").touch()
    print(list(workers.ordered([(os.getpid, ())])) != [])
"""
SLOW_IMPORT = """
import time
from pathlib import Path

Path("importing").touch()
for _ in range(600):  # until the test's process has sent SIGINT, and a moment more
    if Path("interrupted").exists():
        time.sleep(0.3)
        break
    time.sleep(0.05)
"""


def _run_caller(tmp_path: Path, caller: str, module: str, source: str
                ) -> subprocess.CompletedProcess[str]:
    """Run ``caller`` as a script in ``tmp_path``, beside the module it imports."""
    (tmp_path / "caller.py").write_text(caller)
    (tmp_path / f"{module}.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run([sys.executable, "caller.py"], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)


def test_ctrl_c_while_the_fork_server_imports_prints_no_traceback(tmp_path: Path) -> None:
    done = _run_caller(tmp_path, INTERRUPTED, "slow_import", SLOW_IMPORT)
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.returncode == 0 and done.stdout.strip() == "True"  # the server lived on


# numba makes a lock of the default start method's kind on its first parallel kernel, in
# each worker; a worker ended by Ctrl-C must not leave it to the resource tracker, which
# would warn of "leaked semaphore objects" as the run exits.
LOCKING = """
import multiprocessing
import time


def hold() -> None:
    lock = multiprocessing.get_context().RLock()  # as numba.np.ufunc.parallel does
    with lock:
        time.sleep(600)
"""
HOLDING = """
import os, signal, threading

import locking
from preflight.executor import pool

threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    with pool.Pool(1) as workers:
        list(workers.ordered([(locking.hold, ())]))
except KeyboardInterrupt:
    print("interrupted")
"""


def test_a_worker_ended_by_ctrl_c_leaves_no_semaphore_behind(tmp_path: Path) -> None:
    done = _run_caller(tmp_path, HOLDING, "locking", LOCKING)
    assert done.stdout.strip() == "interrupted"
    assert "leaked" not in done.stderr and "Traceback" not in done.stderr, done.stderr


# A driver killed outright (SIGTERM from a scheduler, SIGKILL from the out-of-memory killer)
# ends nothing itself: its workers, idle or busy, must notice and leave.
KILLED = """
import os, signal, sys, time

from preflight.executor import pool

workers = pool.Pool(2)
list(workers.ordered([(time.sleep, (0.5,))] * 2))  # both started
with open(sys.argv[1], "w") as f:
    f.write(" ".join(str(p.pid) for p in workers.processes))
workers._submit(time.sleep, (600,))  # one busy, one idle
time.sleep(0.5)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_leave_when_the_driver_is_killed(tmp_path: Path) -> None:
    (tmp_path / "caller.py").write_text(KILLED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "err.txt", "w") as err:  # not a pipe: a worker left would hold it
        done = subprocess.run([sys.executable, "caller.py", "pids.txt"], env=env,
                              timeout=300, cwd=tmp_path, stderr=err)
    assert done.returncode == -9, (tmp_path / "err.txt").read_text()
    pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
    assert len(pids) == 2
    try:
        waited = 0.0
        while any(_running(p) for p in pids) and waited < 30:
            time.sleep(0.1)
            waited += 0.1
        assert not any(_running(p) for p in pids)
    finally:  # what this test started, if it failed
        for pid in pids:
            if _running(pid):
                os.kill(pid, 9)


def test_the_command_line_starts_the_server_before_its_own_imports(tmp_path: Path) -> None:
    """``launch.warm_for`` (called first by check, smoke and fix) starts the fork server
    without importing polars here, and the pool's workers are then forked by that server."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n' * 10)
    script = f"""
import json, multiprocessing.forkserver as forkserver, os, sys
from preflight.executor import launch
launch.POOL_MIN_BYTES = 0
launch.warm_for({str(data)!r}, 2, "local")
server = forkserver._forkserver._forkserver_pid
light = "polars" not in sys.modules and "pyarrow" not in sys.modules
from preflight.executor import pool
with pool.Pool(2) as workers:
    parents = list(workers.ordered([(os.getppid, ())] * 2))
print(json.dumps({{"server": server, "light": light, "parents": parents}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, check=True)
    got = json.loads(done.stdout)
    assert got["server"] is not None and got["light"]
    assert got["parents"] == [got["server"]] * 2


@pytest.mark.parametrize("data,workers,executor,cores,expect", [
    ("big", 2, "local", 2, True),  # asked for, input large enough for a pool
    ("big", 2, "local", 1, False),  # one usable core: the run clips --workers to 1
    ("small", 2, "local", 2, False),  # below POOL_MIN_BYTES: the pool is not used
    ("big", 1, "local", 8, False),
    ("big", 2, "ray", 8, False),
    ("-", 2, "local", 8, False),  # standard input: its size is known once spooled
    ("missing", 2, "local", 8, False),  # a hub dataset name, not a local path
    ("folder", 2, "local", 2, True),  # a folder's files together
    # bytes the source does not read: a sub-folder's files, hidden and "_" names
    ("nested", 2, "local", 2, False),
    ("big", None, "local", 4, True),  # not asked: a pool per core, from 4 cores
    ("big", None, "local", 3, False),
    ("small", None, "local", 8, False),
])
def test_warm_for_starts_the_server_only_for_a_run_that_uses_the_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: str, workers: int | None,
        executor: str, cores: int, expect: bool) -> None:
    from preflight import cores as core_count

    (tmp_path / "big").write_bytes(b"x" * 2_000)
    (tmp_path / "small").write_bytes(b"x" * 500)
    (tmp_path / "folder").mkdir()
    (tmp_path / "nested" / "sub").mkdir(parents=True)
    for k in range(3):
        (tmp_path / "folder" / f"part-{k}.jsonl").write_bytes(b"x" * 400)
        (tmp_path / "nested" / "sub" / f"part-{k}.jsonl").write_bytes(b"x" * 400)
    (tmp_path / "nested" / "part.jsonl").write_bytes(b"x" * 400)
    (tmp_path / "nested" / ".cache").write_bytes(b"x" * 2_000)
    (tmp_path / "nested" / "_meta.jsonl").write_bytes(b"x" * 2_000)
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 1_000)
    monkeypatch.setattr(launch, "AUTO_POOL_BYTES", 1_000)
    monkeypatch.setattr(core_count, "available_cores", lambda: cores)
    started: list[bool] = []
    monkeypatch.setattr(launch, "warm", lambda preload=(): started.append(True))
    path = data if data == "-" else tmp_path / data
    launch.warm_for(path, workers, executor)
    assert started == ([True] if expect else [])


@pytest.mark.parametrize("near", [True, False], ids=["near-duplicates", "default"])
def test_the_early_server_imports_numba_for_rules_that_need_it(tmp_path: Path,
                                                               near: bool) -> None:
    """Started before the rules are loaded, the server imports numba when the rules file
    names a MinHash check, so its workers have it already (each imported it otherwise)."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n' * 10)
    rules = tmp_path / "r.yaml"
    check = "near_duplicate" if near else "exact_duplicate"
    rules.write_text(f"rules:\n  - {{id: d, check: {check}}}\n")
    script = f"""
import json, sys
from pathlib import Path
from preflight.executor import launch
launch.POOL_MIN_BYTES = 0
launch.warm_for({str(data)!r}, 2, "local", rules=(Path({str(rules)!r}), None, None))
from preflight.executor import pool
with pool.Pool(2) as workers:
    has = list(workers.ordered([(eval, ("'numba' in __import__('sys').modules",))] * 2))
print(json.dumps({{"workers": has, "here": "numba" in sys.modules}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, check=True)
    got = json.loads(done.stdout)
    assert got["workers"] == [near, near]
    assert got["here"] is False  # the command's own process did not import it for them


def test_may_need_numba_reads_the_rules_the_run_will_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    near = tmp_path / "near.yaml"
    near.write_text("rules:\n  - {id: n, check: near_duplicate}\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("rules:\n  - {id: e, check: exact_duplicate}\n")
    assert launch.may_need_numba(near, None, None)
    assert not launch.may_need_numba(plain, None, None)
    assert not launch.may_need_numba(tmp_path / "missing.yaml", None, None)
    assert launch.may_need_numba(plain, None, tmp_path / "eval.jsonl")  # --eval: overlap
    assert launch.may_need_numba(None, "pretrain-text", None)  # its near-dupes rule
    assert not launch.may_need_numba(None, "default", None)
    assert not launch.may_need_numba(None, None, None)  # nothing found here: the default
    (tmp_path / "pyproject.toml").write_text(
        "[tool.preflight]\nrules = [{id = 'o', check = 'overlap'}]\n")
    assert launch.may_need_numba(None, None, None)  # found in the working directory


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd (as <(cmd) gives)")
def test_may_need_numba_leaves_a_piped_rules_file_to_the_loader() -> None:
    """``--rules <(envsubst < r.yaml)``: the guess must not read the pipe, or the loader
    finds it empty (it read the rules as 'the rules file is empty', exit 2)."""
    from preflight.config import load_rules

    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"rules:\n  - {id: n, check: near_duplicate}\n")
        os.close(write_end)
        piped = Path(f"/dev/fd/{read_end}")
        assert not launch.may_need_numba(piped, None, None)  # a pipe is not looked into
        assert [rule.id for rule in load_rules(piped).rules] == ["n"]
    finally:
        os.close(read_end)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_may_need_numba_does_not_wait_for_a_fifo_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO with no writer, named by --rules or found as preflight.yaml: opening it would
    block for ever (the loader waits a bounded time and says so)."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "r.yaml")
    os.mkfifo(tmp_path / "preflight.yaml")
    answers: list[bool] = []
    guess = threading.Thread(target=lambda: answers.extend(
        [launch.may_need_numba(tmp_path / "r.yaml", None, None),
         launch.may_need_numba(None, None, None)]), daemon=True)
    guess.start()
    guess.join(120)  # a bound against a hang, not a timing assertion
    assert answers == [False, False]
