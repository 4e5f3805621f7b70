"""The framework adapters load their framework only when used, and say which extra to
install when it is missing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from preflight import ConfigError


def test_importing_the_watch_imports_no_training_framework() -> None:
    code = ("import sys, preflight.watch; "
            "print(sorted({'transformers', 'lightning', 'pytorch_lightning', 'accelerate'}"
            " & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("lightning") is not None
                    or importlib.util.find_spec("pytorch_lightning") is not None,
                    reason="lightning is installed here")
def test_without_lightning_the_error_names_the_extra() -> None:
    sys.modules.pop("preflight.watch.lightning", None)
    with pytest.raises(ConfigError, match=r"dataset-preflight\[lightning\]"):
        importlib.import_module("preflight.watch.lightning")
