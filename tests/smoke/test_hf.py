"""`--model hf:DIR` / `hf-config:DIR`: a transformers folder trains in the smoke test with no
code to write — offline, safely, shrunk for a structural test, refused when it cannot fit."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from preflight.config import Fields, ModelFacts
from preflight.errors import ConfigError
from preflight.smoke import hf, hf_load, hf_memory, replay
from preflight.smoke.encode import IGNORE, Encoder
from preflight.smoke.hf_model import HFCollate
from preflight.smoke.hf_shrink import shrink_config
from preflight.tokenizer import load_tokenizer
from tests.smoke import hf_folders
from tests.smoke.conftest import codes, finding, flat, gate, invoke, sentence, smoke_of, write_jsonl

pytest.importorskip("transformers")

SMOKE = {"samples": 40, "max_length": 32, "steps": 12}
TOPICS = (("goal", "match", "team", "score"), ("vote", "law", "party", "senate"),
          ("cell", "gene", "virus", "protein"), ("stock", "bank", "price", "market"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The folders every test shares (built once: a model folder takes a second to save)."""
    base = tmp_path_factory.mktemp("hf")
    return {
        "gpt2": hf_folders.gpt2_folder(base / "gpt2"),
        "gpt2-big": hf_folders.gpt2_folder(base / "gpt2-big", layers=4, width=128, heads=4,
                                           weights=False),
        "bert": hf_folders.bert_folder(base / "bert"),
        "added": hf_folders.gpt2_folder(base / "added", added=["<|sep|>"], vocab=1000),
    }


def lm_records(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"id": f"t{i}", "text": sentence(rng)} for i in range(n)]


def cls_records(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"id": f"c{i}", "text": " ".join(rng.choice(TOPICS[i % 4]) for _ in range(10)),
             "label": i % 4} for i in range(n)]


def lm_rules(model: str, **smoke: Any) -> dict[str, Any]:
    return {"task": "lm", "fields": {"text": "text", "id": "id"},
            "smoke": {**SMOKE, "model": model, **smoke},
            "rules": [{"id": "schema", "check": "schema"}]}


def cls_rules(model: str, **smoke: Any) -> dict[str, Any]:
    return {"task": "classification", "fields": {"text": "text", "label": "label", "id": "id"},
            "model": {"num_classes": 4}, "smoke": {**SMOKE, "model": model, **smoke},
            "rules": [{"id": "schema", "check": "schema"}]}


# --- clean data passes: a causal LM and a sequence classifier, weights or config only ---------


@pytest.mark.parametrize("prefix", ["hf:", "hf-config:"])
def test_a_gpt2_folder_passes_clean_text(tmp_path: Path, folders: dict[str, Path],
                                         prefix: str) -> None:
    smoke = smoke_of(gate(tmp_path, lm_records(40), lm_rules(f"{prefix}{folders['gpt2']}")))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.model == f"{prefix}{folders['gpt2']}"
    assert smoke.control is not None and smoke.control.learned
    assert smoke.real is not None and smoke.real.learned
    # a healthy model raises no fp16 alarm: nothing a share of which would flush to zero
    assert smoke.activations
    assert "fp16_underflow_risk" not in [f.code for f in smoke.findings]


@pytest.mark.parametrize("prefix", ["hf:", "hf-config:"])
def test_a_bert_classifier_folder_passes_clean_labels(tmp_path: Path, folders: dict[str, Path],
                                                      prefix: str) -> None:
    smoke = smoke_of(gate(tmp_path, cls_records(40), cls_rules(f"{prefix}{folders['bert']}")))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.real is not None and smoke.real.learned
    assert "fp16_underflow_risk" not in [f.code for f in smoke.findings]


def test_a_gpt2_folder_regresses_with_one_output(tmp_path: Path,
                                                 folders: dict[str, Path]) -> None:
    """regression: AutoModelForSequenceClassification with num_labels=1 (GPT-2 gets a pad
    id to find each row's last token), float targets on their own scale."""
    rng = random.Random(1)
    records = []
    for i in range(40):
        n = rng.randint(3, 12)
        records.append({"id": f"r{i}", "text": " ".join(["word"] * n), "y": 1000.0 + 3 * n})
    rules = {"task": "regression", "fields": {"text": "text", "target": "y", "id": "id"},
             "smoke": {**SMOKE, "model": f"hf-config:{folders['gpt2']}"},
             "rules": [{"id": "schema", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason


def test_the_cli_takes_the_folder_as_model(tmp_path: Path, folders: dict[str, Path]) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", lm_records(30))
    result = invoke("smoke", data, "--model", f"hf-config:{folders['gpt2']}", "--out",
                    tmp_path / "out", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "hf-config:" in flat(result.output)


# --- data faults are found on an HF model too -------------------------------------------------


def test_a_label_past_the_classes_is_a_data_fault(tmp_path: Path,
                                                  folders: dict[str, Path]) -> None:
    records = cls_records(40)
    records[7]["label"] = 9
    smoke = smoke_of(gate(tmp_path, records, cls_rules(f"hf:{folders['bert']}")))
    assert smoke.verdict == "data_fault", smoke.reason
    assert finding(smoke, "label_out_of_range").rows == [7]


def test_an_added_token_the_embedding_lacks_names_the_rows_and_replays(
        tmp_path: Path, folders: dict[str, Path]) -> None:
    """The tokenizer has `<|sep|>` at id 1000, the model 1000 embedding rows: the rows using
    it are a data fault on the CPU (never a device-side assert), and the replay file reruns
    from the folder with no --model (a folder runs no code)."""
    records = lm_records(40)
    for i in (3, 11):
        records[i]["text"] = "<|sep|> " + records[i]["text"]
    smoke = smoke_of(gate(tmp_path, records, lm_rules(f"hf:{folders['added']}")))
    assert smoke.verdict == "data_fault", smoke.reason
    assert finding(smoke, "token_id_out_of_range").rows == [3, 11]
    assert "outside [0, 1000)" in smoke.reason
    assert smoke.replay is not None
    again = replay(smoke.replay)
    assert again.verdict == "data_fault", again.reason
    assert again.model == f"hf:{folders['added'].resolve()}"


# --- the collate ---------------------------------------------------------------------------


def _encoder(folder: Path, task: str, fields: Fields, max_length: int = 32) -> Encoder:
    return Encoder(task, fields, ModelFacts(), load_tokenizer(str(folder)),
                   max_length=max_length)


def test_the_collate_pads_with_the_pad_id_and_ignores_padding_in_the_labels(
        folders: dict[str, Path]) -> None:
    encoder = _encoder(folders["gpt2"], "lm", Fields(text="text"))
    collate = HFCollate(encoder, pad=7, max_length=32)
    inputs, labels = collate([{"text": "a b"}, {"text": "a much longer text of words here"}])
    short = int(inputs["attention_mask"][0].sum())
    assert short < inputs["input_ids"].shape[1]
    assert inputs["input_ids"][0, short:].eq(7).all()
    assert labels[0, short:].eq(IGNORE).all()
    assert labels[0, :short].tolist() == inputs["input_ids"][0, :short].tolist()
    assert inputs["attention_mask"][1].all()


def test_the_collate_truncates_to_max_length(folders: dict[str, Path]) -> None:
    encoder = _encoder(folders["gpt2"], "lm", Fields(text="text"), max_length=8)
    inputs, labels = HFCollate(encoder, pad=0, max_length=8)([{"text": "word " * 50}])
    assert inputs["input_ids"].shape == (1, 8) and labels.shape == (1, 8)


def test_the_chat_collate_trains_on_assistant_tokens_only(folders: dict[str, Path]) -> None:
    encoder = _encoder(folders["gpt2"], "chat", Fields(messages="messages"), max_length=64)
    row = {"messages": [{"role": "user", "content": "hello there"},
                        {"role": "assistant", "content": "general kenobi"}]}
    inputs, labels = HFCollate(encoder, pad=0, max_length=64)([row])
    ids, kept = inputs["input_ids"][0].tolist(), labels[0].tolist()
    counted = [i for i, t in enumerate(kept) if t != IGNORE]
    assert counted and all(kept[i] == ids[i] for i in counted)
    tok = hf_folders.tokenizer()
    assert "general kenobi" in tok.decode([ids[i] for i in counted])
    assert "hello" not in tok.decode([ids[i] for i in counted])


def test_a_chat_corpus_passes_on_a_gpt2_folder(tmp_path: Path,
                                               folders: dict[str, Path]) -> None:
    rng = random.Random(2)
    records = [{"id": f"m{i}", "messages": [{"role": "user", "content": sentence(rng)},
                                            {"role": "assistant", "content": sentence(rng)}]}
               for i in range(30)]
    rules = {"task": "chat", "fields": {"messages": "messages", "id": "id"},
             "smoke": {**SMOKE, "max_length": 64, "model": f"hf:{folders['gpt2']}"},
             "rules": [{"id": "schema", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason


# --- shrink --------------------------------------------------------------------------------


def test_shrink_keeps_the_class_and_vocabulary_at_two_layers() -> None:
    from transformers import BertConfig, GPT2Config, LlamaConfig

    gpt2 = shrink_config(GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257,
                                       eos_token_id=50256))
    assert (gpt2.n_layer, gpt2.n_embd, gpt2.vocab_size, gpt2.eos_token_id) == (2, 64, 50257,
                                                                              50256)
    assert gpt2.n_embd % gpt2.n_head == 0
    bert = shrink_config(BertConfig(num_hidden_layers=12, hidden_size=768,
                                       num_attention_heads=12, intermediate_size=3072))
    assert (bert.num_hidden_layers, bert.hidden_size, bert.intermediate_size) == (2, 64, 256)
    assert bert.hidden_size % bert.num_attention_heads == 0
    llama = shrink_config(LlamaConfig(num_hidden_layers=32, hidden_size=4096,
                                         num_attention_heads=32, num_key_value_heads=8,
                                         intermediate_size=11008, vocab_size=32000))
    assert llama.num_hidden_layers == 2 and llama.vocab_size == 32000
    assert llama.num_attention_heads % llama.num_key_value_heads == 0
    assert llama.head_dim * llama.num_attention_heads == llama.hidden_size


def test_hf_config_trains_the_shrunk_model_unless_shrink_is_off(
        tmp_path: Path, folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = hf_load.from_config

    def spy(tf: Any, config: Any, task: str, *, spec: str = "") -> Any:
        model = real(tf, config, task, spec=spec)
        if next(model.parameters()).device.type != "meta":
            built.append(config.n_layer)
            assert config.vocab_size == 1000
        return model

    monkeypatch.setattr(hf_load, "from_config", spy)
    spec = f"hf-config:{folders['gpt2-big']}"
    smoke = smoke_of(gate(tmp_path, lm_records(30), lm_rules(spec), out="a"))
    assert built == [2]
    assert "shrunk to 2 layers, width 64 (from 4 layers, width 128)" in finding(
        smoke, "hf_shrunk").detail
    smoke = smoke_of(gate(tmp_path, lm_records(30), lm_rules(spec, shrink=False), out="b"))
    assert built == [2, 4]
    assert "hf_shrunk" not in codes(smoke)


# --- refused, with exit 2 and a message that says what to do --------------------------------


def _exit_2(tmp_path: Path, spec: str) -> str:
    data = write_jsonl(tmp_path / "d.jsonl", lm_records(10))
    result = invoke("check", data, "--model", spec, "--out", tmp_path / "out", "--no-progress")
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out" / "report.json").exists()  # no verdict, no report
    return flat(result.output)


def test_a_missing_folder_is_exit_2(tmp_path: Path) -> None:
    assert "model folder not found" in _exit_2(tmp_path, f"hf:{tmp_path / 'nowhere'}")


def test_a_folder_without_config_json_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in _exit_2(tmp_path, f"hf-config:{tmp_path / 'empty'}")


def test_an_unknown_architecture_is_exit_2(tmp_path: Path) -> None:
    folder = hf_folders.unknown_architecture(tmp_path / "odd")
    out = _exit_2(tmp_path, f"hf-config:{folder}")
    assert "cannot read" in out and "no-such-model" in out and "trust_remote_code" in out


def test_hf_without_weights_points_at_hf_config(tmp_path: Path,
                                                folders: dict[str, Path]) -> None:
    out = _exit_2(tmp_path, f"hf:{folders['gpt2-big']}")
    assert "has no weights" in out and f"hf-config:{folders['gpt2-big']}" in out


def test_an_encoder_only_architecture_cannot_be_a_causal_lm(tmp_path: Path) -> None:
    from transformers import DistilBertConfig

    DistilBertConfig(n_layers=1, dim=16, n_heads=2, hidden_dim=32).save_pretrained(
        tmp_path / "distil")
    out = _exit_2(tmp_path, f"hf-config:{tmp_path / 'distil'}")
    assert "holds no tokenizer" in out  # before the data is read
    hf_folders.tokenizer().save_pretrained(tmp_path / "distil")
    out = _exit_2(tmp_path, f"hf-config:{tmp_path / 'distil'}")
    assert "DistilBertConfig cannot be built as AutoModelForCausalLM (the lm task)" in out


def test_a_model_too_big_for_memory_is_refused_before_allocation(
        tmp_path: Path, folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf_memory, "free_memory", lambda device: 2**20)
    monkeypatch.setattr(hf, "load_model", lambda *a, **k: pytest.fail("allocated the model"))
    with pytest.raises(ConfigError, match=r"parameters; training it needs about .* but 1\.0 "
                                          r"MiB is free"):
        gate(tmp_path, lm_records(10), lm_rules(f"hf:{folders['gpt2']}"))


def test_without_transformers_the_error_names_the_extra(
        tmp_path: Path, folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` fails
    with pytest.raises(ConfigError, match=r"pip install 'dataset-preflight\[hf\]'"):
        gate(tmp_path, lm_records(10), lm_rules(f"hf:{folders['gpt2']}"))


def test_a_pickle_in_a_bin_file_runs_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    folder = hf_folders.malicious_bin(tmp_path / "evil", marker)
    with pytest.raises(ConfigError, match="weights_only=True"):
        gate(tmp_path, lm_records(10), lm_rules(f"hf:{folder}", max_length=8))
    assert not marker.exists()


def test_a_plain_bin_state_dict_loads(tmp_path: Path, folders: dict[str, Path]) -> None:
    """A .bin of tensors only loads through weights_only=True: the weights are the saved
    ones, not a random init."""
    from safetensors.torch import load_file

    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((folders["gpt2"] / name).read_bytes())
    state = load_file(str(folders["gpt2"] / "model.safetensors"))
    torch.save(state, folder / "pytorch_model.bin")
    config = hf_load.load_config(hf_load.parse(f"hf:{folder}"), task="lm", num_labels=2)
    model, missing = hf_load.load_model(hf_load.parse(f"hf:{folder}"), config, "lm")
    assert torch.equal(model.state_dict()["transformer.wte.weight"],
                       state["transformer.wte.weight"])
    assert not missing


def test_loading_is_offline_and_the_environment_restored_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    with hf_load._quiet(hf_load.transformers_module()):
        assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0"


def test_validate_does_not_call_a_model_folder_code(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text('smoke: {model: "hf:./my-model"}\nrules: [{id: s, check: schema}]\n')
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 0, result.output
    assert "names code to run" not in flat(result.output)


def test_weights_of_another_shape_than_the_config_are_exit_2(tmp_path: Path,
                                                             folders: dict[str, Path]) -> None:
    """config.json edited after the weights were saved: from_pretrained would refuse the
    folder, so the smoke test must not train a random model under its name and pass."""
    import json
    import shutil

    folder = shutil.copytree(folders["gpt2"], tmp_path / "wider")
    config = json.loads((folder / "config.json").read_text())
    config["n_embd"] *= 2
    (folder / "config.json").write_text(json.dumps(config))
    out = _exit_2(tmp_path, f"hf:{folder}")
    assert "do not fit its config.json" in out and "saved" in out and "by the config" in out
    assert "out" not in {p.name for p in tmp_path.iterdir()} or not any(
        (tmp_path / "out").iterdir())  # nothing half-written


def test_a_head_sized_for_other_labels_starts_at_random(tmp_path: Path,
                                                        folders: dict[str, Path]) -> None:
    """Fine-tuning a 4-label classifier folder on 3 classes re-initialises only the head."""
    records = [dict(r, label=r["label"] % 3) for r in cls_records(40)]
    rules = cls_rules(f"hf:{folders['bert']}")
    rules["model"] = {"num_classes": 3}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason
    detail = finding(smoke, "hf_weights_initialised").detail
    assert "classifier.weight" in detail and "bert.encoder" not in detail
