"""Reading a Hugging Face model folder offline: the ``hf:``/``hf-config:`` spec, its config
with the task's head, the class for the task, and the model built from the config or loaded
with its weights.

Loading runs no code from the folder and reaches no network: ``trust_remote_code=False``,
``local_files_only=True`` with ``HF_HUB_OFFLINE`` set, safetensors first and a pickled
``.bin`` only through ``torch.load(weights_only=True)``. ``transformers`` is imported here
only (the ``[hf]`` extra).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from preflight.errors import ConfigError
from preflight.hf_folder import folder_of
from preflight.text import first_line

EXTRA = "pip install 'dataset-preflight[hf]'"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class Folder:
    """A parsed ``hf:``/``hf-config:`` spec: the folder and whether its weights load."""

    spec: str
    path: Path
    weights: bool

    @property
    def resolved(self) -> str:
        """The spec with the folder made absolute (what a replay file records)."""
        return f"{'hf:' if self.weights else 'hf-config:'}{self.path}"


def parse(spec: str, *, base: Path | None = None) -> Folder:
    """The folder ``spec`` names, checked: a folder, with ``config.json``, and for ``hf:``
    with a weights file. Each problem is a ``ConfigError`` that says what to do."""
    weights = spec.startswith("hf:")
    raw = spec.split(":", 1)[1]
    path = folder_of(spec, base=base)
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model {spec!r}: {path} has no config.json; save the model with "
                          "model.save_pretrained(DIR) (or config.save_pretrained(DIR) for "
                          "hf-config:)")
    if weights and not any((path / name).is_file() for name in WEIGHT_FILES):
        raise ConfigError(f"--model {spec!r}: {path} has no weights ({', '.join(WEIGHT_FILES)}); "
                          f"use hf-config:{raw} to test the architecture with random weights")
    return Folder(spec=spec, path=path.resolve(), weights=weights)


def transformers_module() -> Any:
    """``transformers``, or a ``ConfigError`` naming the extra that installs it."""
    try:
        import transformers
    except ImportError as e:
        raise ConfigError(f"--model hf:/hf-config: needs transformers, which is not "
                          f"installed: {EXTRA}") from e
    return transformers


def load_config(folder: Folder, *, task: str | None, num_labels: int) -> Any:
    """The folder's config, offline, with the head the task needs."""
    tf = transformers_module()
    with _quiet(tf):
        try:
            config = tf.AutoConfig.from_pretrained(str(folder.path), local_files_only=True,
                                                   trust_remote_code=False)
        except Exception as e:
            raise ConfigError(
                f"--model {folder.spec!r}: cannot read {folder.path / 'config.json'}: "
                f"{first_line(e)} (an unknown model_type, or one that needs the folder's own "
                "code, which preflight never runs: trust_remote_code is off)") from e
    if task in ("classification", "regression"):
        config.num_labels = 1 if task == "regression" else num_labels
        config.problem_type = ("regression" if task == "regression"
                               else "single_label_classification")
    return config


def from_config(tf: Any, config: Any, task: str, *, spec: str = "") -> nn.Module:
    """The task's class built from ``config`` at random init (on the ``meta`` device under
    ``with torch.device("meta")``); a ``ConfigError`` when the class cannot be built."""
    cls = _class(tf, task)
    with _quiet(tf):
        try:
            return cls.from_config(config, trust_remote_code=False, dtype=torch.float32)
        except Exception as e:
            raise ConfigError(_no_class(spec, config, cls, task, e)) from e


def load_model(folder: Folder, config: Any, task: str) -> tuple[nn.Module, set[str]]:
    """The model: its weights from the folder (``hf:``) or random init (``hf-config:``);
    with the names of the weights the folder did not hold (a new head)."""
    tf = transformers_module()
    if not folder.weights:
        return from_config(tf, config, task, spec=folder.spec), set()
    cls = _class(tf, task)
    with _quiet(tf):
        try:
            model, info = cls.from_pretrained(
                str(folder.path), config=config, local_files_only=True,
                trust_remote_code=False, use_safetensors=None, weights_only=True,
                dtype=torch.float32, ignore_mismatched_sizes=True, output_loading_info=True)
        except ValueError as e:
            if "Unrecognized configuration class" in str(e):
                raise ConfigError(_no_class(folder.spec, config, cls, task, e)) from e
            raise ConfigError(_unloadable(folder, e)) from e
        except Exception as e:  # an UnpicklingError: a .bin that is more than tensors
            raise ConfigError(_unloadable(folder, e)) from e
    head, body = _mismatched(info.get("mismatched_keys") or (), config, task)
    if body:
        name, saved, wanted = body[0]
        raise ConfigError(
            f"--model {folder.spec!r}: the weights in {folder.path} do not fit its "
            f"config.json: {len(body)} tensor(s) of another shape, first {name} "
            f"({_shape(saved)} saved, {_shape(wanted)} by the config); from_pretrained "
            "would refuse them. Save the config and the weights together (save_pretrained), "
            "or use hf-config: for the architecture alone")
    return model, set(info.get("missing_keys") or ()) | head


def _mismatched(keys: Any, config: Any, task: str) -> tuple[set[str], list[tuple[str, Any, Any]]]:
    """The weights whose saved shape differs from the model's: a classification head sized
    for another number of labels (started at random, as fine-tuning does with
    ``ignore_mismatched_sizes``), and the rest (config and weights disagree: an error)."""
    head: set[str] = set()
    body: list[tuple[str, Any, Any]] = []
    for key in keys:
        if not isinstance(key, tuple) or len(key) < 3:
            body.append((str(key[0] if isinstance(key, tuple) else key), None, None))
            continue
        name, saved, wanted = str(key[0]), key[1], key[2]
        if (task in ("classification", "regression") and len(wanted)
                and wanted[0] == config.num_labels):
            head.add(name)
        else:
            body.append((name, saved, wanted))
    return head, sorted(body)


def _shape(shape: Any) -> str:
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _unloadable(folder: Folder, e: Exception) -> str:
    return (f"--model {folder.spec!r}: cannot load the weights in {folder.path}: "
            f"{type(e).__name__}: {first_line(e)} (preflight loads safetensors, or a .bin "
            "only with torch.load(weights_only=True), which refuses pickled code; convert "
            "it with model.save_pretrained(DIR, safe_serialization=True))")


def _no_class(spec: str, config: Any, cls: Any, task: str, e: Exception) -> str:
    return (f"--model {spec!r}: {arch(config)} cannot be built as {cls.__name__} "
            f"(the {task} task): {first_line(e)}")


def _class(tf: Any, task: str) -> Any:
    if task in ("lm", "chat"):
        return tf.AutoModelForCausalLM
    return tf.AutoModelForSequenceClassification


def arch(config: Any) -> str:
    """The architecture's name for messages (``GPT2LMHeadModel``), else the config's class."""
    names = getattr(config, "architectures", None) or [type(config).__name__]
    return str(names[0])


@contextlib.contextmanager
def _quiet(tf: Any) -> Iterator[None]:
    """Offline (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``) with transformers' progress
    bars and info logs off (only the CLI writes to the console); all restored after."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(dict.fromkeys(saved, "1"))
    logging = tf.utils.logging
    verbosity = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
