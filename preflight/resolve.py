"""The rules as the gate runs them, and the files they name.

``gate_rules`` adds the implicit rules (``malformed`` first, ``vocab`` last when the model
is known); ``rules_for`` adds, once the fields are known, the rules the default rule set
infers from them. ``with_model_folder``, ``rules_tokenizer`` and ``rules_eval_path`` read
what the rules point at (a model folder, a tokenizer, an eval file), tried as given and
beside the rules file: a problem there is a config error, before any data is read.
"""

from __future__ import annotations

from typing import Any

from preflight.config import Fields, Rule, RuleSet
from preflight.defaults import applicable, inferred_rules
from preflight.hf_folder import folder_of, is_hf_spec, read_facts
from preflight.infer import quoted_names
from preflight.paths import find_beside, rules_base
from preflight.tokenizer.counter import TokenCounter
from preflight.tokenizer.load import load_tokenizer

IMPLICIT_MALFORMED = Rule(id="malformed", check="malformed", severity="error")
IMPLICIT_VOCAB = Rule(id="vocab", check="vocab", severity="error")


def gate_rules(rules: RuleSet) -> list[Rule]:
    """The rules as the gate runs them: with an implicit `malformed` rule first when none is
    listed, since unreadable lines never pass, and an implicit `vocab` rule last when the
    model is known (an ``hf:`` folder, or ``model.vocab_size`` with a tokenizer) and none is
    listed, since an id past the embedding kills the run."""
    listed = rules.rules  # a rule listed but not enabled is not replaced by an implicit one
    out = [r for r in listed if r.enabled]
    if not any(r.check == "malformed" for r in listed):
        out.insert(0, IMPLICIT_MALFORMED)
    known = is_hf_spec(rules.smoke.model) or (rules.model.vocab_size and rules.model.tokenizer)
    if known and not any(r.check == "vocab" for r in listed):
        taken = {r.id for r in listed}
        rule = IMPLICIT_VOCAB
        if rule.id in taken:
            rule = rule.model_copy(update={"id": "model-vocab"})
        out.append(rule)
    return out


def rules_for(rules: RuleSet, fields: Fields, *, strings: bool = False) -> list[Rule]:
    """Every rule the gate runs once the fields are known: ``gate_rules`` and, for the
    default rule set, the rules the fields call for (``preflight.defaults``); ``strings``:
    see ``resolved``."""
    return resolved(rules, gate_rules(rules), fields, strings=strings)


def resolved(rules: RuleSet, rule_list: list[Rule], fields: Fields, *,
             strings: bool = False) -> list[Rule]:
    """``rule_list`` (``gate_rules``) as it applies to ``fields`` (for the default rule set,
    without its text checks when the data has no text, but with the character checks when
    it holds other ``strings``), then the rules the default rule set infers from the
    fields."""
    return [*applicable(rules, rule_list, fields, strings=strings)[0],
            *inferred_rules(rules, fields)]


def role_of(rule: Rule, fields: Fields) -> str:
    """What in the data called for an inferred ``rule``, for the note that says it was added."""
    declared = fields.declared()
    # Only the roles whose fields the rule's check reads: `numeric` never reads the label.
    roles = {"label_range": ("label",), "chat_format": ("messages",),
             "numeric": ("numeric", "target", "features")}.get(
        rule.check, ("messages", "label", "numeric", "target", "features"))
    for role in roles:
        if role in declared:
            names = quoted_names(declared[role])
            return f"a {role} field ({names})" if role != "numeric" else f"numbers in {names}"
    return "the fields it needs"


def with_model_folder(rules: RuleSet) -> tuple[RuleSet, list[str]]:
    """The rules with what an ``hf:``/``hf-config:`` model folder (``smoke.model``) tells the
    gate, read from its files without building the model: ``model.tokenizer`` (its
    tokenizer) and ``model.vocab_size`` (its embedding rows), each only where the rules
    leave it unset; and notes saying what was read."""
    spec = rules.smoke.model
    if not is_hf_spec(spec):
        return rules, []
    assert spec is not None
    base = rules_base(rules)
    folder = folder_of(spec, base=base)
    facts = read_facts(folder)
    update: dict[str, Any] = {}
    if rules.model.tokenizer is None and facts.tokenizer is not None:
        update["tokenizer"] = str(facts.tokenizer)
    if rules.model.vocab_size is None and facts.vocab_size is not None:
        update["vocab_size"] = facts.vocab_size
    if not update:
        return rules, []
    read = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                     for k, v in update.items())
    model = rules.model.model_copy(update=update)
    return rules.model_copy(update={"model": model}), [f"model facts from {spec}: {read}"]


def rules_tokenizer(rules: RuleSet) -> TokenCounter | None:
    """Load the tokenizer the rules name (relative paths also tried beside the rules file)."""
    if not rules.model.tokenizer:
        return None
    base = rules_base(rules)
    return load_tokenizer(rules.model.tokenizer, base=base)


def rules_eval_path(rules: RuleSet) -> str | None:
    """The eval file the rules name, tried as given and beside the rules file."""
    if not rules.eval:
        return None
    base = rules_base(rules)
    return str(find_beside(rules.eval, base, what="eval file"))
