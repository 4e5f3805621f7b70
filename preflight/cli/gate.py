"""``preflight check`` and ``preflight smoke``: run the gate on DATA, write the report, print
the summary and exit on the verdict (``smoke --replay`` reruns a saved smoke batch)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from preflight.cli.console import ProgressBar, err_console, out_console
from preflight.cli.exits import guarded, stdout_may_close
from preflight.cli.options import (
    INPUT,
    PATH,
    SPEC,
    delimiter_option,
    executor_options,
    field_options,
    no_stdin_outputs,
    report_file_options,
    rule_set,
    workers_option,
)

if TYPE_CHECKING:
    from preflight.config import RuleSet


@click.command()
@click.argument("data", type=INPUT)
@click.option("--rules", "rules_file", type=PATH, help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file (see `preflight rules list`).")
@click.option("--out", type=PATH, default=Path("preflight-report"),
              show_default=True, help="Folder for report.json and findings.parquet.")
@click.option("--limit", type=click.IntRange(min=1), help="Check only the first N records.")
@click.option("--strict", is_flag=True, help="Fail the gate on failed warn rules too.")
@click.option("--show-text", is_flag=True, help="Put raw text in examples (redacted by default).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Write report.json to stdout as well.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--context-window", type=click.IntRange(min=1),
              help="Model context length in tokens (adds a token_length rule if none).")
@click.option("--tokenizer", help="tokenizer.json, a tokenizer folder, a Hugging Face name in "
              "the local cache (org/name), or tiktoken:NAME.")
@click.option("--num-classes", type=click.IntRange(min=1),
              help="Number of classes (adds a label_range rule if none).")
@click.option("--eval", "eval_path", type=PATH,
              help="Eval file: flag train records found in it (adds an overlap rule if none).")
@click.option("--set", "sets", multiple=True, metavar="RULE_ID.PARAM=VALUE",
              help="Set a rule parameter, e.g. --set exact-dupes.max_fraction=0.01, a smoke "
                   "setting, e.g. --set smoke.steps=50, or a field, e.g. --set "
                   "fields.text=body (repeatable).")
@field_options
@delimiter_option
@click.option("--only", multiple=True, metavar="ID[,ID]",
              help="Run only these rules (ids as in the report; repeatable).")
@click.option("--skip", multiple=True, metavar="ID[,ID]",
              help="Do not run these rules (as `enabled: false` in a rules file).")
@report_file_options
@executor_options
@click.option("--no-smoke", is_flag=True, help="Skip the smoke test (no torch import).")
@click.option("--model", "model_spec", type=SPEC, metavar="SPEC",
              help="Smoke-test your model: hf:DIR / hf-config:DIR (a transformers folder), "
                   "package.module:build or file.py:build.")
@click.option("--checkpoint", type=PATH,
              help="Weights the smoke test starts from (.safetensors or a state dict).")
@click.option("--training-args", "training_args", type=PATH,
              help="A transformers TrainingArguments JSON/YAML file: the smoke runs use its "
                   "optimizer, lr, schedule, warm-up, clipping, accumulation and precision "
                   "(smoke: keys in the rules win).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def check(data: Path, rules_file: Path | None, preset: str | None, out: Path,
          limit: int | None, strict: bool, show_text: bool, quiet: bool, as_json: bool,
          no_progress: bool, context_window: int | None, tokenizer: str | None,
          num_classes: int | None, eval_path: Path | None, sets: tuple[str, ...],
          delimiter: str | None, only: tuple[str, ...], skip: tuple[str, ...],
          formats: str, md_max_chars: int, executor: str, address: str | None,
          workers: int | None, no_smoke: bool, model_spec: str | None, checkpoint: Path | None,
          training_args: Path | None, fields: dict[str, str | None], debug: bool) -> None:
    """Check DATA (a file, a folder of shards, a datasets folder, a hub dataset name in the
    local cache, or - for JSON Lines on stdin) against the rules, then run the smoke test
    (a short training run on a sample) unless --no-smoke."""
    from preflight.executor.launch import warm_for

    # Before the imports below: the two run side by side.
    warm_for(data, workers, executor, rules=(rules_file, preset, eval_path))
    from preflight.hf_folder import is_hf_spec
    from preflight.report.writer import parse_formats
    from preflight.select import parse_ids, select_rules

    no_stdin_outputs(out=(out, "folder"))
    # An hf: folder also tells the gate its tokenizer and embedding size (the vocab check).
    if no_smoke and (checkpoint or training_args
                     or (model_spec and not is_hf_spec(model_spec))):
        raise click.UsageError("--checkpoint, --training-args and a --model other than hf:DIR "
                               "are for the smoke test; drop --no-smoke or them")
    rules = rule_set(rules_file, preset, context_window=context_window, tokenizer=tokenizer,
                     num_classes=num_classes, eval_path=eval_path, sets=sets,
                     model_spec=model_spec, checkpoint=checkpoint, training_args=training_args,
                     fields=fields, quiet=quiet)
    rules = select_rules(rules, only=parse_ids(only, "--only"),
                         skip=parse_ids(skip, "--skip"))
    _gate(data, rules, out, smoke=False if no_smoke else None, limit=limit, strict=strict,
          show_text=show_text, quiet=quiet, as_json=as_json, no_progress=no_progress,
          formats=parse_formats(formats), md_max_chars=md_max_chars, executor=executor,
          address=address, delimiter=delimiter, workers=workers)


@click.command()
@click.argument("data", type=INPUT, required=False)
@click.option("--rules", "rules_file", type=PATH, help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file.")
@click.option("--out", type=PATH, default=Path("preflight-report"),
              show_default=True, help="Folder for report.json and the replay file.")
@click.option("--model", "model_spec", type=SPEC, metavar="SPEC",
              help="Your model: hf:DIR / hf-config:DIR (a transformers folder), "
                   "package.module:build or file.py:build (default: built-in). "
                   "With --replay: the model to rerun it with (a replay of your model runs "
                   "only with it).")
@click.option("--checkpoint", type=PATH,
              help="Weights to start from (.safetensors or a torch state dict).")
@click.option("--training-args", "training_args", type=PATH,
              help="A transformers TrainingArguments JSON/YAML file: the smoke runs use its "
                   "optimizer, lr, schedule, warm-up, clipping, accumulation and precision "
                   "(smoke: keys in the rules win).")
@click.option("--replay", "replay_path", type=PATH,
              help="Rerun a replay file written by an earlier smoke test (no DATA needed; "
                   "a replay of your own model needs --model SPEC to run its code).")
@click.option("--limit", type=click.IntRange(min=1), help="Read only the first N records.")
@click.option("--tokenizer", help="tokenizer.json, a tokenizer folder, a Hugging Face name in "
              "the local cache (org/name), or tiktoken:NAME.")
@click.option("--num-classes", type=click.IntRange(min=1), help="Number of classes.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="e.g. --set smoke.steps=50 --set smoke.lr=0.001 (repeatable).")
@field_options
@report_file_options
@workers_option
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Write report.json to stdout as well.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def smoke(data: Path | None, rules_file: Path | None, preset: str | None, out: Path,
          model_spec: str | None, checkpoint: Path | None, training_args: Path | None,
          replay_path: Path | None,
          limit: int | None, tokenizer: str | None, num_classes: int | None,
          sets: tuple[str, ...], formats: str, md_max_chars: int, workers: int | None,
          quiet: bool, as_json: bool, no_progress: bool, fields: dict[str, str | None],
          debug: bool) -> None:
    """Smoke-test DATA: run the rules' checks (to know the flagged rows), then train a tiny
    model (or yours) on a sample and tell a data fault from a code fault."""
    from preflight.report.console import render_smoke
    from preflight.report.writer import parse_formats

    if replay_path is not None:
        given = [name for name, value in (("DATA", data), ("--rules", rules_file),
                                          ("--preset", preset), ("--checkpoint", checkpoint),
                                          ("--training-args", training_args),
                                          ("--set", sets), ("--limit", limit),
                                          ("--tokenizer", tokenizer),
                                          ("--num-classes", num_classes),
                                          ("--workers", workers),
                                          ("a --*-field option", any(fields.values())))
                 if value]
        if given:
            raise click.UsageError(f"--replay reruns the saved batch, weights and settings "
                                   f"(with --model: on that model); {', '.join(given)} "
                                   "cannot apply")
        from preflight.smoke import replay

        result = replay(replay_path, model=model_spec)
        with stdout_may_close():
            if as_json:
                click.echo(result.model_dump_json(indent=2))
            if not quiet:
                render_smoke(result, err_console() if as_json else out_console())
        sys.exit(1 if result.failed else 0)
    if data is None:
        raise click.UsageError("give DATA, or --replay FILE")
    from preflight.executor.launch import warm_for

    warm_for(data, workers, "local", rules=(rules_file, preset, None))
    no_stdin_outputs(out=(out, "folder"))
    rules = rule_set(rules_file, preset, tokenizer=tokenizer, num_classes=num_classes, sets=sets,
                     model_spec=model_spec, checkpoint=checkpoint, training_args=training_args,
                     fields=fields, quiet=quiet)
    _gate(data, rules, out, smoke=True, limit=limit, strict=False, show_text=False,
          quiet=quiet, as_json=as_json, no_progress=no_progress,
          formats=parse_formats(formats), md_max_chars=md_max_chars, workers=workers)


def _gate(data: Path, rules: RuleSet, out: Path, *, smoke: bool | None, limit: int | None,
          strict: bool, show_text: bool, quiet: bool, as_json: bool, no_progress: bool,
          formats: tuple[str, ...], md_max_chars: int, executor: str = "local",
          address: str | None = None, delimiter: str | None = None,
          workers: int | None = None) -> None:
    from preflight import run_preflight
    from preflight.report.console import render_console

    show_bar = not (quiet or no_progress) and err_console().is_terminal
    with ProgressBar(show_bar) as update:
        report = run_preflight(data, rules, out, limit=limit, strict=strict,
                               show_text=show_text, progress=update, smoke=smoke,
                               formats=formats, md_max_chars=md_max_chars, executor=executor,
                               address=address, delimiter=delimiter, workers=workers)
    with stdout_may_close():  # `| head` must not turn a verdict into another exit code
        if as_json:
            click.echo(report.model_dump_json(indent=2))
        if not quiet:
            render_console(report, err_console() if as_json else out_console())
    sys.exit(0 if report.passed else 1)
