"""The Ray executor against real Ray (``ray.init(num_cpus=2)``): on every sample corpus, on
shards with overlap, outliers and near-duplicates, and through the CLI, a Ray run gives the
local run's findings; the smoke test samples the same rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from click.testing import CliRunner  # noqa: E402

from preflight import run_preflight  # noqa: E402
from preflight.cli import main  # noqa: E402
from preflight.executor import driver, pieces  # noqa: E402
from preflight.executor.launch import WORKER_ENV  # noqa: E402
from preflight.source import open_source  # noqa: E402
from tests.executor.cases import (  # noqa: E402
    CORPORA,
    malformed_shard_case,
    malformed_start_case,
    same_findings,
    sample_case,
    shards_case,
    tokens_case,
)


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray for the module: two workers, as the issue asks."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": WORKER_ENV})
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut the small test files into several pieces, so rows must be renumbered."""
    monkeypatch.setattr(pieces, "PIECE_BYTES", 8_000)


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_sample_corpus_on_ray_gives_the_local_findings(corpus: str, tmp_path: Path) -> None:
    path, rules = sample_case(corpus)
    assert len(pieces.plan(open_source(path))) > 1
    local = run_preflight(path, rules, tmp_path / "local", smoke=False)
    on_ray = run_preflight(path, rules, tmp_path / "ray", smoke=False, executor="ray")
    same_findings(local, on_ray, tmp_path / "local", tmp_path / "ray")
    assert "ray:scan" in on_ray.timings and "ray:scan" not in local.timings


def test_shards_with_overlap_outliers_and_near_duplicates(tmp_path: Path) -> None:
    path, rules = shards_case(tmp_path)
    local = run_preflight(path, rules, tmp_path / "local", smoke=False)
    on_ray = run_preflight(path, rules, tmp_path / "ray", smoke=False, executor="ray")
    found = {r.id: r.violations for r in local.rules}
    assert found["near"] and found["dupes"] and found["overlap"] and found["score"]
    same_findings(local, on_ray, tmp_path / "local", tmp_path / "ray")
    assert on_ray.source.fingerprint["bytes"] == local.source.fingerprint["bytes"]


def test_token_lengths_with_a_tokenizer(tmp_path: Path) -> None:
    """The bytes-per-token calibration is the driver's (the first batch's), on every worker."""
    path, rules = tokens_case(tmp_path)
    local = run_preflight(path, rules, tmp_path / "local", smoke=False)
    on_ray = run_preflight(path, rules, tmp_path / "ray", smoke=False, executor="ray")
    assert local.rule("tok").stats["bytes_per_token"]
    same_findings(local, on_ray, tmp_path / "local", tmp_path / "ray")


def test_smoke_sample_with_a_shard_of_malformed_lines(tmp_path: Path) -> None:
    path, rules = malformed_shard_case(tmp_path)
    local = run_preflight(path, rules, tmp_path / "local", smoke=True)
    on_ray = run_preflight(path, rules, tmp_path / "ray", smoke=True, executor="ray")
    assert local.smoke is not None and on_ray.smoke is not None
    assert (on_ray.smoke.sample_rows, on_ray.smoke.flagged_in_sample) == (
        local.smoke.sample_rows, local.smoke.flagged_in_sample)


def test_smoke_sample_is_the_local_one(tmp_path: Path) -> None:
    """Flagged rows held while scanning and those found at the end (duplicates, fetched
    from the pieces that hold them) make the same sample."""
    path, rules = sample_case("pretrain")
    local = run_preflight(path, rules, tmp_path / "local", smoke=True)
    on_ray = run_preflight(path, rules, tmp_path / "ray", smoke=True, executor="ray")
    assert local.smoke is not None and on_ray.smoke is not None
    assert on_ray.smoke.sample_rows == local.smoke.sample_rows
    assert on_ray.smoke.flagged_in_sample == local.smoke.flagged_in_sample
    assert on_ray.smoke.verdict == local.smoke.verdict
    assert "ray:fetch" in on_ray.timings  # duplicates flagged at the end were fetched


def test_cli_check_on_ray(tmp_path: Path) -> None:
    path, _ = sample_case("pretrain")
    result = CliRunner().invoke(main, ["check", str(path), "--preset", "pretrain-text",
                                       "--no-smoke", "--executor", "ray",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output  # the sample's planted faults fail the gate
    assert (tmp_path / "out" / "findings.parquet").is_file()
    assert "near-dupes" in result.output


def test_relative_paths_reach_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """Data and eval file named relative to the driver's folder: workers run elsewhere."""
    import json

    texts = [f"record number {i} says something rather plain about rivers" for i in range(40)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"text": texts[7]}) + "\n")
    monkeypatch.chdir(tmp_path)
    rules = {"eval": "eval.jsonl", "rules": [{"id": "overlap", "check": "overlap"}]}
    local = run_preflight("data.jsonl", rules, "local", smoke=False)
    on_ray = run_preflight("data.jsonl", rules, "ray", smoke=False, executor="ray")
    assert local.rule("overlap").violations >= 1
    same_findings(local, on_ray, tmp_path / "local", tmp_path / "ray")


def test_an_unreadable_shard_is_an_input_error_as_locally(tmp_path: Path) -> None:
    """A worker's InputError reaches the caller as itself (exit 3), not as Ray's wrapper."""
    from preflight import InputError

    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"text": "fine"}\n')  # the driver reads this one first
    (folder / "b.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read") as local:
        run_preflight(folder, smoke=False)
    with pytest.raises(InputError, match="cannot read") as on_ray:
        run_preflight(folder, smoke=False, executor="ray")
    assert "b.jsonl.gz" in str(local.value) and "b.jsonl.gz" in str(on_ray.value)


def test_shards_that_start_with_malformed_lines_and_another_shape(tmp_path: Path) -> None:
    # Fields and each shard's shape come from its first records; the chat shard is
    # another shape (mixed_shards) on Ray as locally.
    path = malformed_start_case(tmp_path, 3, chat=True)
    local = run_preflight(path, None, tmp_path / "local", smoke=False)
    on_ray = run_preflight(path, None, tmp_path / "ray", smoke=False, executor="ray")
    same_findings(local, on_ray, tmp_path / "local", tmp_path / "ray")
    found = {r.id: r.violations for r in on_ray.rules}
    assert found["hidden-chars"] == 2 and found["malformed"] == 9
    assert "mixed_shards" in (tmp_path / "ray" / "report.json").read_text()


@pytest.mark.parametrize("stage", ["count", "scan", "revisit"])
@pytest.mark.parametrize("change", ["append", "rewrite"])
def test_a_file_that_changes_while_ray_reads_it_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str, change: str) -> None:
    """As with the pool (``pieces.unchanged``): a file written after the plan cut it (lines
    appended, an earlier line made longer), before the count tasks, before the scan or
    before the revisit, is exit 3 naming it, not a report of misnumbered rows or of the
    planned bytes with the new lines unread. Written from the driver's hooks, not raced."""
    from preflight import InputError

    path = tmp_path / "data.jsonl"
    lines = [json.dumps({"text": f"line {i} " + "word " * (i % 13)}) for i in range(1_200)]
    path.write_text("\n".join(lines) + "\n")
    size = path.stat().st_size

    def write() -> None:
        if change == "append":
            with path.open("a") as f:
                f.write(json.dumps({"text": "late \u200b"}) + "\n")
        else:
            lines[10] = json.dumps({"text": "longer " * 500})
            path.write_text("\n".join(lines) + "\n")

    reached: list[str] = []
    hooks = {"count": (pieces, "plan"), "scan": (driver, "start"),
             "revisit": (driver, "revisit_plans")}

    def hooked(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            out = real(*args, **kwargs)
            reached.append(name)
            if name == stage:  # planned (counted, scanned): the writer strikes
                write()
            return out
        return call

    for name, (module, attr) in hooks.items():
        monkeypatch.setattr(module, attr, hooked(name, getattr(module, attr)))
    with pytest.raises(InputError, match="changed while it was read") as caught:
        run_preflight(path, None, tmp_path / "ray", smoke=False, executor="ray")
    assert str(path) in str(caught.value)
    assert f"({size} bytes when the run began, {path.stat().st_size} now)" in str(caught.value)
    # Refused at the first check after the write: no later stage ran.
    assert reached == list(hooks)[:list(hooks).index(stage) + 1]
    assert not (tmp_path / "ray" / "report.json").exists()
