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
    if not control.learned and slow_rate(control):
        return "pass", (f"trained without a fault; at a mean learning rate of "
                        f"{control.lr_mean:.3g} the loss barely moves in a short run even on "
                        f"the control batch ({curve(control)}), so learning was not judged "
                        "(learning_inconclusive)")
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
    if real is not None and not real.learned and not clearly_learned(control):
        # Both barely move (a fine-tuning rate on a tiny random model, say): the runs are too
        # short to tell noisy labels from a slow rate, and a data fault must not be guessed.
        return "pass", (f"trained without a fault; the loss barely falls on the control batch "
                        f"({curve(control)}) either, so whether the sample's labels are "
                        "learnable was not judged (learning_inconclusive)")
    if real is not None and not real.learned:
        return "data_fault", (f"the loss does not fall on the sample ({curve(real)}) while "
                              "it does on the control batch: labels may be noise, or the "
                              "targets unrelated to the inputs")
    if real is None:
        return "pass", "trained without a fault"
    return "pass", f"{real.steps} steps without a fault; loss {curve(real)}"


# A rate real runs use (fine-tuning: 1e-5 to 2e-4) moves a tiny random model too little in a
# few dozen steps to judge learning; below ABSURD_LR no run trains at all (a config mistake).
SLOW_LR, ABSURD_LR = 2e-4, 1e-7
# At such a rate a sample that does not learn is blamed only when the control's loss fell by
# what a default run asks (10%): twice the scaled drop (0.4% at lr 5e-5) is noise there, and
# the built-in control's class-specific words learn faster than any real text. The
# TrainingArguments defaults (5e-5, linear) made a data fault of 3 clean corpora in 5 seeds.
SLOW_CLEAR = 0.1


def slow_rate(run: SmokeRun) -> bool:
    """The run's mean rate is one real runs use, yet too small to judge learning here."""
    return run.lr_mean is not None and ABSURD_LR <= run.lr_mean < SLOW_LR


def clearly_learned(run: SmokeRun) -> bool:
    """The loss fell by at least twice the drop asked of the run (at a fine-tuning rate, by
    ``SLOW_CLEAR`` at least): enough margin that a sample which does not learn under the
    same settings says something about the sample."""
    finite = [x for x in run.loss if x is not None]
    if len(finite) < 4 or finite[0] <= 1e-6:
        return bool(run.learned)
    drop = 1 - (sum(finite[-3:]) / 3) / finite[0]
    asked = 2 * (run.min_drop if run.min_drop is not None else 0.1)
    return drop >= (max(asked, SLOW_CLEAR) if slow_rate(run) else asked)


def curve(run: SmokeRun) -> str:
    """``first → mean of the last three`` finite losses."""
    finite = [x for x in run.loss if x is not None]
    if not finite:
        return "no finite loss"
    return f"{finite[0]:.4g} → {sum(finite[-3:]) / len(finite[-3:]):.4g}"
