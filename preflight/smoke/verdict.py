"""Whose fault: a pure function of the control run, the real run and the rows the encoder
could not train on, so the attribution is tested without training anything."""

from __future__ import annotations

from dataclasses import dataclass

from preflight.report.model import SmokeRun


@dataclass(frozen=True)
class Blocked:
    """The first sampled row no model can train on (and how many there are)."""

    row: int
    code: str
    detail: str
    count: int


def attribute(control: SmokeRun, real: SmokeRun | None,
              blocked: Blocked | None) -> tuple[str, str]:
    """The smoke verdict and its one-line reason.

    The control run is judged first and always: it fails, or its loss does not fall when
    overfitting -> code fault (broken even on good data), whatever the sample shows (the
    caller still lists the sample's data faults as findings). Only with a healthy control:
    rows that cannot be encoded or a failure on the real sample only -> data fault; a loss
    that falls on control but not on the sample -> data fault (labels may be noise)."""
    if control.failure:
        return "code_fault", ("training fails on the control batch (in spec by construction): "
                              f"{control.failure}")
    if not control.learned:
        return "code_fault", (f"the loss does not fall even on the control batch "
                              f"({curve(control)}): the model, loss, optimizer or learning "
                              "rate cannot learn")
    if blocked is not None:
        return "data_fault", (f"{blocked.count} sampled row(s) cannot be trained on; row "
                              f"{blocked.row}: {blocked.detail} ({blocked.code})")
    if real is not None and real.failure:
        return "data_fault", ("training fails on the sample but not on the control batch: "
                              f"{real.failure}")
    if real is not None and not real.learned:
        return "data_fault", (f"the loss does not fall on the sample ({curve(real)}) while "
                              "it does on the control batch: labels may be noise, or the "
                              "targets unrelated to the inputs")
    if real is None:
        return "pass", "trained without a fault"
    return "pass", f"{real.steps} steps without a fault; loss {curve(real)}"


def curve(run: SmokeRun) -> str:
    """``first → mean of the last three`` finite losses."""
    finite = [x for x in run.loss if x is not None]
    if not finite:
        return "no finite loss"
    return f"{finite[0]:.4g} → {sum(finite[-3:]) / len(finite[-3:]):.4g}"
