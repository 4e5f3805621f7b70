"""Shared seam for the report tests: small JSONL corpora with faults planted at known rows, the
rules that catch them, gate runs on them (module-scoped: each run once per module), and a
strict little HTML tree built with ``html.parser``."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from preflight import run_preflight
from preflight.cli import main
from preflight.report.model import Report

HERE = Path(__file__).parent
JUNIT_XSD = HERE / "junit.xsd"
ALL_FORMATS = ("json", "html", "junit", "md")
FILES = {"json": "report.json", "html": "report.html", "junit": "report.junit.xml",
         "md": "report.md"}

WORDS = tuple(str.split(
    "river stone light garden winter morning quiet market bridge window letter orange paper "
    "music silver forest harbor engine candle valley old young bright heavy slow sudden warm "
    "walks carries finds opens watches builds remembers follows sings paints near under "
    "across behind beside a the every some one this that her his their our"
))
SECRET = "Zanzibarquux"  # planted beside the zero-width space; must never leave the data
XSS = "<script>alert(1)</script>"
CONTEXT_WINDOW = 128
CUT_NOTE = "_… cut to the length limit; see report.html for the rest._"
NUM_CLASSES = 4  # the corpus uses 0..2: class 3 is absent in the failing run

# Rows of the failing classification corpus, and what is planted there.
ROW_ZWSP = 3  # SECRET + U+200B
ROW_LONG = 5  # far beyond the context window
ROWS_EXACT = (7, 8, 9)  # three identical texts
ROWS_NEAR = (10, 11)  # 11 is 10 with its last word changed
ROW_OUTLIER = 12  # score 1e6
ROW_BAD_LABEL = 13  # label 7, outside [0, 4)
ROW_NAN = 14  # score NaN (a Python NaN literal on the line)
ROW_BIG_TARGET = 17  # regression target 1e30 in the smoke corpus


@dataclass
class Run:
    """A gate run: its report and the folder its files went to."""

    report: Report
    out: Path
    data: Path

    def path(self, fmt: str) -> Path:
        return self.out / FILES[fmt]

    def text(self, fmt: str) -> str:
        return self.path(fmt).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ data


def write_jsonl(path: Path, records: list[dict[str, Any]],
                raw: dict[int, str] | None = None) -> Path:
    """Write ``records`` as JSON Lines; ``raw`` replaces whole lines (for NaN literals)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    for row, line in (raw or {}).items():
        lines[row] = line
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_rules(path: Path, rules: dict[str, Any]) -> Path:
    """A rules dict as a rules file (JSON is valid YAML)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rules, indent=2), encoding="utf-8")
    return path


def sentence(rng: random.Random) -> str:
    """One made-up sentence of 6 to 14 words."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."


def classification_records(n: int = 60, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` clean rows ``{id, text, label, score}``: labels 0..2, scores in [1, 2]."""
    rng = random.Random(seed)
    return [{"id": f"r{i}", "text": f"{sentence(rng)} {sentence(rng)}", "label": i % 3,
             "score": round(rng.uniform(1.0, 2.0), 3)} for i in range(n)]


def classification_rules(*, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One rule per plotted check (duplicates as warnings), over ``classification_records``."""
    return {
        "task": "classification",
        "fields": {"text": "text", "id": "id", "label": "label", "numeric": "score"},
        "model": {"context_window": CONTEXT_WINDOW, "num_classes": NUM_CLASSES},
        "rules": [
            {"id": "hidden", "check": "invisible_unicode"},
            {"id": "tokens", "check": "token_length"},
            {"id": "dupes", "check": "exact_duplicate", "severity": "warn",
             "max_fraction": 0.05},
            {"id": "near", "check": "near_duplicate", "severity": "warn", "max_fraction": 0.05},
            {"id": "scores", "check": "numeric"},
            {"id": "labels", "check": "label_range"},
            *(extra or []),
        ],
    }


def passing_case() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Clean rows, num_classes 3, one duplicate pair (within the allowed share)."""
    records = classification_records()
    records[21]["text"] = records[20]["text"]
    rules = classification_rules()
    rules["model"] = {"context_window": CONTEXT_WINDOW, "num_classes": 3}
    return records, rules


def failing_case() -> tuple[list[dict[str, Any]], dict[int, str], dict[str, Any]]:
    """The rows above with their faults planted, the NaN line, and rules with the duplicate
    warnings at zero tolerance plus a rule that cannot run (an overlap with no eval file)."""
    rng = random.Random(7)
    records = classification_records()
    records[ROW_ZWSP]["text"] = f"{SECRET}\u200b {sentence(rng)}"
    records[ROW_LONG]["text"] = " ".join(sentence(rng) for _ in range(60))
    copy = " ".join(sentence(rng) for _ in range(2))
    for row in ROWS_EXACT:
        records[row]["text"] = copy
    base = " ".join(rng.choice(WORDS) for _ in range(24))
    records[ROWS_NEAR[0]]["text"] = base + " harbor"
    records[ROWS_NEAR[1]]["text"] = base + " candle"
    records[ROW_OUTLIER]["score"] = 1e6
    records[ROW_BAD_LABEL]["label"] = 7
    nan_line = json.dumps({**records[ROW_NAN], "score": float("nan")})
    assert "NaN" in nan_line
    rules = classification_rules(extra=[{"id": "contamination", "check": "overlap"}])
    for rule in rules["rules"]:
        if rule["id"] in ("dupes", "near"):
            del rule["max_fraction"]
    return records, {ROW_NAN: nan_line}, rules


def regression_records(n: int = 60, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows ``{id, features, target}`` with a linear target."""
    rng = random.Random(seed)
    weights = (0.5, -1.0, 2.0, 0.25)
    out = []
    for i in range(n):
        x = [round(rng.uniform(0.1, 1.0) * rng.choice((-1, 1)), 4) for _ in weights]
        out.append({"id": f"g{i}", "features": x,
                    "target": round(sum(w * v for w, v in zip(weights, x, strict=True)) + 1, 6)})
    return out


SMOKE_RULES: dict[str, Any] = {
    "task": "regression",
    "fields": {"features": "features", "target": "target", "id": "id"},
    "smoke": {"samples": 60, "steps": 8},
    "rules": [{"id": "schema", "check": "schema"}],
}


def smoke_fail_records() -> list[dict[str, Any]]:
    records = regression_records()
    records[ROW_BIG_TARGET]["target"] = 1e30
    return records


def show_text_case() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Markup in user text: an id and a non-numeric rating are ``XSS``, and the text of the
    same row holds a zero-width space, for a run with ``show_text=True``."""
    records = [{"id": f"s{i}", "text": f"Plain sentence number {i}.", "rating": i}
               for i in range(8)]
    records[2] = {"id": XSS, "text": f"{SECRET}\u200b <b>bold</b>", "rating": XSS}
    rules = {"fields": {"text": "text", "id": "id", "numeric": "rating"},
             "rules": [{"id": "hidden", "check": "invisible_unicode"},
                       {"id": "ratings", "check": "numeric"}]}
    return records, rules


# ------------------------------------------------------------------------------------ runs


def gate(data: Path, records: list[dict[str, Any]], rules: dict[str, Any], out: Path, *,
         raw: dict[int, str] | None = None, smoke: bool = False, show_text: bool = False,
         formats: tuple[str, ...] = ALL_FORMATS) -> Run:
    """Write ``records`` to ``data`` and run the gate on it into ``out``."""
    write_jsonl(data, records, raw)
    report = run_preflight(data, rules=rules, out=out, smoke=smoke, show_text=show_text,
                           formats=formats)
    return Run(report, out, data)


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Train on one thread: the models are tiny, and on a busy two-core machine torch's
    default thread pool spins and makes each run many times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("passing")
    records, rules = passing_case()
    run = gate(tmp / "data.jsonl", records, rules, tmp / "out")
    assert run.report.passed, run.report.reasons
    return run


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("failing")
    records, raw, rules = failing_case()
    run = gate(tmp / "data.jsonl", records, rules, tmp / "out", raw=raw)
    assert not run.report.passed
    return run


@pytest.fixture(scope="module")
def smoke_pass(tmp_path_factory: pytest.TempPathFactory, one_torch_thread: None) -> Run:
    tmp = tmp_path_factory.mktemp("smoke_pass")
    run = gate(tmp / "data.jsonl", regression_records(), SMOKE_RULES, tmp / "out", smoke=True)
    assert run.report.smoke is not None and run.report.smoke.verdict == "pass"
    return run


@pytest.fixture(scope="module")
def smoke_fail(tmp_path_factory: pytest.TempPathFactory, one_torch_thread: None) -> Run:
    tmp = tmp_path_factory.mktemp("smoke_fail")
    run = gate(tmp / "data.jsonl", smoke_fail_records(), SMOKE_RULES, tmp / "out", smoke=True)
    assert run.report.smoke is not None and run.report.smoke.verdict == "data_fault"
    return run


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("shown")
    records, rules = show_text_case()
    return gate(tmp / "data.jsonl", records, rules, tmp / "out", show_text=True)


def invoke(*args: str | Path) -> Result:
    """Run the CLI in-process."""
    return CliRunner().invoke(main, [str(a) for a in args])


def flat(text: str) -> str:
    """Console text with its line wrapping undone."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------ HTML tree

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "source", "track", "wbr"})


@dataclass
class Node:
    """An element: tag, attributes and children (elements and text)."""

    tag: str
    attrs: dict[str, str | None]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        """All text inside, entities decoded."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def elements(self) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node)]

    def iter(self, tag: str | None = None) -> Iterator[Node]:
        """This element and every element below it (with ``tag``, when given)."""
        if tag is None or self.tag == tag:
            yield self
        for child in self.elements():
            yield from child.iter(tag)

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        """Elements below with ``tag`` whose attributes equal ``attrs`` (``class_`` for
        one of the class names, ``data_x`` for ``data-x``)."""
        out = []
        for node in self.iter(tag):
            if all(node.has(k, v) for k, v in attrs.items()):
                out.append(node)
        return out

    def find(self, tag: str, **attrs: str) -> Node:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"expected one <{tag} {attrs}>, got {len(found)}"
        return found[0]

    def has(self, key: str, value: str) -> bool:
        if key == "class_":
            return value in (self.attrs.get("class") or "").split()
        return self.attrs.get(key.replace("_", "-")) == value


class _TreeBuilder(HTMLParser):
    """Builds a ``Node`` tree and fails on an end tag that closes the wrong element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        open_tag = self.stack[-1].tag
        assert open_tag == tag, f"</{tag}> closes <{open_tag}> at line {self.getpos()[0]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Node:
    """The document's tree; an AssertionError when tags do not nest."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    unclosed = [n.tag for n in builder.stack[1:]]
    assert not unclosed, f"unclosed elements at the end: {unclosed}"
    return builder.root
