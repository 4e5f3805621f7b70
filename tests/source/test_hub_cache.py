"""Hub names read from the local caches, offline (issue 16, item 4): a tokenizer from the hub
cache (``models--org--name/snapshots/<rev>``), a dataset from the ``datasets`` cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.errors import ConfigError, InputError
from preflight.source import open_source
from preflight.tokenizer import load_tokenizer
from tests.source.helpers import malformed, rows, values
from tests.tokenizers import build_bpe

TEXTS = ["first text", "sec\u200bond text", "third text", "fourth text"]


def cache_dataset(cache: Path, repo_id: str, texts: list[str], *, split: str = "train") -> Path:
    """Write ``texts`` into the datasets cache as ``load_dataset(repo_id)`` leaves them
    (``<org>___<name>/default/<version>/<hash>/<name>-<split>.arrow``), by running datasets'
    own JSON builder and moving its output into the hub dataset's place."""
    from datasets.packaged_modules.json.json import Json

    org, name = repo_id.split("/")
    src = cache.parent / f"{name}-{split}.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    builder = Json(cache_dir=str(cache / "build"), dataset_name=name, hash="abc123",
                   data_files={split: str(src)})
    builder.download_and_prepare()
    built = Path(builder.cache_dir)
    target = cache / f"{org}___{name}" / "default" / built.parts[-2] / built.parts[-1]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(built), target)
    shutil.rmtree(cache / "build")
    return target


def cache_tokenizer(hub: Path, repo_id: str, tmp: Path, *, revision: str = "0123abcd") -> Path:
    """A tokenizer.json in the hub cache layout: refs/main -> snapshots/<revision>/."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    shutil.copy(build_bpe(tmp / "built"), snapshot / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    return cache


def test_hub_dataset_is_read_from_the_datasets_cache(datasets_cache: Path) -> None:
    cache_dataset(datasets_cache, "acme/my_set", TEXTS)
    batches = list(open_source("acme/my_set").batches())
    assert values(batches, "text") == TEXTS
    assert rows(batches) == [0, 1, 2, 3] and malformed(batches) == []


def test_datasets_itself_reads_the_cache_the_test_writes(datasets_cache: Path,
                                                         tmp_path: Path) -> None:
    # The layout is datasets' own: load_dataset finds it offline, with the same rows.
    cache_dataset(datasets_cache, "acme/my_set", TEXTS)
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(datasets_cache)}
    code = ("import datasets, json; "
            "print(json.dumps(list(datasets.load_dataset('acme/my_set', split='train')['text'])))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == TEXTS


def test_check_a_cached_hub_dataset_from_the_cli(datasets_cache: Path, tmp_path: Path) -> None:
    cache_dataset(datasets_cache, "acme/my_set", TEXTS)
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", "acme/my_set", "--no-smoke", "--out", str(out)])
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["source"]["path"] == "acme/my_set" and report["source"]["records"] == 4
    hidden = next(r for r in report["rules"] if r["check"] == "invisible_unicode")
    assert [e["row"] for e in hidden["examples"]] == [1]


def test_split_is_chosen_by_name(datasets_cache: Path) -> None:
    cache_dataset(datasets_cache, "acme/two", ["train text"], split="train")
    with pytest.raises(InputError, match=r"has no split 'dev'; it has train"):
        open_source("acme/two:dev")
    assert values(list(open_source("acme/two:train").batches()), "text") == ["train text"]


def test_hub_dataset_not_cached_says_how_to_cache_it(datasets_cache: Path,
                                                     tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "acme/absent", "--no-smoke",
                                       "--out", str(tmp_path / "r")])
    assert result.exit_code == 3
    message = " ".join(result.output.split())
    assert (f"acme/absent: no such file or folder, and no dataset of that name in the datasets "
            f"cache ({datasets_cache}); preflight never downloads: on a machine with network "
            "run python -c \"import datasets; datasets.load_dataset('acme/absent')\"") in message


def test_a_missing_file_is_not_taken_for_a_hub_name(datasets_cache: Path,
                                                    tmp_path: Path) -> None:
    with pytest.raises(InputError, match="input not found"):
        open_source(tmp_path / "data.jsonl")


def test_tokenizer_name_is_resolved_from_the_hub_cache(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "home" / "hub"
    snapshot = cache_tokenizer(hub, "acme/tok", tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    counter = load_tokenizer("acme/tok")
    assert counter.name == str(snapshot / "tokenizer.json") and counter.exact
    # the cache comes before a path of the same name
    (tmp_path / "acme" / "tok").mkdir(parents=True)
    assert load_tokenizer("acme/tok").name == str(snapshot / "tokenizer.json")


def test_check_with_a_cached_tokenizer_counts_exactly(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    cache_tokenizer(hub, "acme/tok", tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:1] + TEXTS[2:]))
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", str(data), "--no-smoke", "--out", str(out),
                                       "--tokenizer", "acme/tok", "--context-window", "64"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    stats = next(r for r in report["rules"] if r["check"] == "token_length")["stats"]
    assert "models--acme--tok" in stats["tokenizer"] and stats["estimated"] is False


def test_tokenizer_not_cached_says_how_to_cache_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_tokenizer("acme/absent")
    assert str(info.value) == (
        f"tokenizer 'acme/absent' is not in the Hugging Face cache ({tmp_path / 'hub'}), and "
        "preflight never downloads: on a machine with network run `hf download acme/absent` "
        "(or AutoTokenizer.from_pretrained('acme/absent')), then copy the cache here or point "
        "HF_HOME / HF_HUB_CACHE at it; nor is acme/absent a file or folder here")
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n')
    result = CliRunner().invoke(main, ["check", str(data), "--no-smoke", "--tokenizer",
                                       "acme/absent", "--context-window", "8"])
    assert result.exit_code == 2 and "hf download acme/absent" in result.output


def test_a_tokenizer_path_still_works_when_the_cache_lacks_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    path = build_bpe(tmp_path / "local")
    assert load_tokenizer(str(path)).name == str(path)
