"""The hand-drawn SVG charts: well-formed, escaped, deterministic, with round ticks and
curves broken where values are missing."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from preflight.report.svg import Panel, _ticks, render

NS = "{http://www.w3.org/2000/svg}"


def _chart(field: str = "score") -> str:
    panel = Panel(f"{field}: 2 outliers", field, "values")
    panel.stairs([3, 0, 5], [0.0, 1.5, 3.0, 4.5], "#4c78a8")
    panel.vline(4.0, color="#e45756", label="bound")
    return render([panel], f"{field}: values")


def test_chart_is_well_formed_and_named_for_screen_readers() -> None:
    root = ET.fromstring(_chart())
    assert root.tag == f"{NS}svg"
    assert root.attrib["role"] == "img" and root.attrib["aria-label"] == "score: values"
    # two bars (the empty bin draws nothing), the dashed bound, the legend entry
    assert len(root.findall(f"{NS}rect")) == 2
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert {"score: 2 outliers", "score", "values", "bound"} <= set(texts)


def test_labels_from_the_data_are_escaped() -> None:
    hostile = '<script>alert("x")</script>&'
    text = _chart(hostile)
    assert "<script>" not in text
    root = ET.fromstring(text)  # still parses
    assert root.attrib["aria-label"] == f"{hostile}: values"
    assert hostile in [t.text for t in root.iter(f"{NS}text")]


def test_same_numbers_same_text() -> None:
    assert _chart() == _chart()


def test_ticks_are_round() -> None:
    assert _ticks(0, 47, log=False) == [0, 10, 20, 30, 40, 50]
    assert _ticks(0, 0.8, log=False) == [0, 0.2, 0.4, 0.6, 0.8]
    assert _ticks(1, 5000, log=True) == [1, 10, 100, 1000, 10000]
    assert _ticks(3, 40, log=True) == [1, 10, 100]
    assert _ticks(3, 8, log=True) == [2, 5, 10]  # within one decade: 1-2-5 steps


def test_a_missing_value_breaks_the_curve_and_log_axes_skip_zero() -> None:
    panel = Panel("loss", "step", ylog=True)
    panel.line(range(6), [1.0, 0.5, None, 0.3, 0.0, 0.2], color="#000", label="real")
    root = ET.fromstring(render([panel], "loss"))
    lines = root.findall(f"{NS}polyline")
    assert [len(p.attrib["points"].split()) for p in lines] == [2, 1, 1]


def test_categories_mark_absent_classes_and_panels_sit_side_by_side() -> None:
    labels = Panel("Labels", "class", "records", categories=["0", "1", "2"])
    labels.bars([4, 0, 2], "#4c78a8")
    labels.crosses([1], color="#e45756", label="absent")
    other = Panel("second", "step", width=320)
    other.line([0, 1], [1.0, 2.0], color="#000")
    root = ET.fromstring(render([labels, other], "two"))
    assert root.attrib["width"] == str(520 + 320)
    assert len(root.findall(f"{NS}rect")) == 2  # the zero bar is a cross, not a rect
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert {"0", "1", "2", "absent", "Labels", "second"} <= set(texts)
