"""Which of torch's size-mismatch warnings mean every output was compared with every target."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn import functional as F

from preflight.errors import ConfigError
from preflight.smoke.broadcast import outer_comparison, refuse_outer_comparison


def _warning(output: tuple[int, ...], target: tuple[int, ...]) -> str:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        F.mse_loss(torch.zeros(output), torch.zeros(target))
    [w] = seen
    return str(w.message)


@pytest.mark.parametrize(
    ("output", "target", "both"),
    [
        ((8, 1), (8,), (8, 8)),
        ((8,), (8, 1), (8, 8)),
        ((3, 1), (8,), (3, 8)),
        ((2, 6, 1), (6,), (2, 6, 6)),
    ],
)
def test_an_outer_comparison_is_named(
    output: tuple[int, ...], target: tuple[int, ...], both: tuple[int, ...]
) -> None:
    said = outer_comparison(_warning(output, target))
    assert said is not None
    assert f"outputs {output} with targets {target}: torch broadcast them to {both}" in said


@pytest.mark.parametrize(("output", "target"), [((8, 5), (8, 1)), ((8, 5), (5,)), ((1,), (8,))])
def test_a_target_broadcast_along_the_outputs_is_not(
    output: tuple[int, ...], target: tuple[int, ...]
) -> None:
    assert outer_comparison(_warning(output, target)) is None


def test_other_warnings_still_reach_the_callers_filters() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with refuse_outer_comparison(True):
            warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]
    with (
        pytest.raises(ConfigError, match="every output against every target"),
        refuse_outer_comparison(True),
    ):
        F.mse_loss(torch.zeros(8, 1), torch.zeros(8))


def test_a_warning_the_caller_ignores_by_module_stays_ignored() -> None:
    # re-raised from a recording it was judged as coming from no module (a user's
    # filterwarnings("ignore", module="transformers") no longer applied)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module=__name__)
        with refuse_outer_comparison(True):
            warnings.warn("noise the caller silenced", UserWarning, stacklevel=1)
    assert seen == []


def test_a_warning_before_the_loss_raises_still_shows() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="boom"), refuse_outer_comparison(True):
            warnings.warn("explains the failure", UserWarning, stacklevel=1)
            raise RuntimeError("boom")
    assert [str(w.message) for w in seen] == ["explains the failure"]


def test_a_harmless_size_warning_still_meets_the_callers_filters() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("ignore")
        with refuse_outer_comparison(True):
            F.mse_loss(torch.zeros(8, 5), torch.zeros(8, 1))
    assert seen == []
