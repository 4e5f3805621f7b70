"""report.html in a real browser: headless Chromium opens the failing run's page offline,
logs no console message, draws a screenshot that is not blank, and its DOM holds the rules
table and the plots."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from tests.report.conftest import Run

CHROMIUM = (shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome"))
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium, chromium-browser or google-chrome on PATH "
           "(Debian: apt-get install chromium)",
)
WIDTH, HEIGHT = 1200, 2000
FAIL_RED = (0xC6, 0x28, 0x28)  # the banner's --fail colour
PASS_BG = (0xFA, 0xFA, 0xFA)  # the page background
TIMEOUT = 90


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with no sandbox, GPU or network (every host name fails)."""
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-dev-shm-usage",
               "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)


def console_messages(stderr: str) -> list[str]:
    """Lines where the page logged to its console or threw. Chromium logs console.error at
    INFO level (``INFO:CONSOLE:1] "boom"``), so any console line counts; dbus complaints
    about a missing session bus are noise."""
    return [line for line in stderr.splitlines()
            if "dbus" not in line.lower()
            and ("CONSOLE" in line or "Uncaught" in line)]


@pytest.fixture(scope="module")
def shot(failing: Run, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("browser")
    png = tmp / "report.png"
    proc = chromium(tmp / "profile", f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}",
                    failing.path("html").resolve().as_uri())
    return proc, png


def test_screenshot_is_a_png_of_the_window(shot: tuple[subprocess.CompletedProcess[str],
                                                        Path]) -> None:
    proc, png = shot
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as img:
        assert img.format == "PNG"
        assert img.size == (WIDTH, HEIGHT)


def test_screenshot_is_not_blank(shot: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, png = shot
    with Image.open(png) as img:
        colours = img.convert("RGB").getcolors(maxcolors=WIDTH * HEIGHT)
    assert colours is not None
    pixels = Counter({colour: n for n, colour in colours})
    total = WIDTH * HEIGHT
    assert len(pixels) >= 50, f"only {len(pixels)} colours"
    assert pixels.most_common(1)[0][1] < 0.9 * total
    assert pixels[PASS_BG] > 0.2 * total  # the page itself
    assert pixels[FAIL_RED] > 50_000, "no red FAIL banner"  # about 1100 x 150 px


def test_page_logs_no_console_errors(shot: tuple[subprocess.CompletedProcess[str],
                                                 Path]) -> None:
    proc, _ = shot
    assert console_messages(proc.stderr) == []


def test_console_check_catches_a_page_that_throws(tmp_path: Path) -> None:
    # The check above is not vacuous: a page that logs an error and throws is caught.
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>hi</p><script>console.error('boom'); nope();</script>",
                    encoding="utf-8")
    proc = chromium(tmp_path / "profile", f"--screenshot={tmp_path / 'bad.png'}",
                    "--window-size=400,300", page.as_uri())
    found = console_messages(proc.stderr)
    assert any("boom" in line for line in found), proc.stderr[-2000:]
    assert any("Uncaught" in line for line in found)


def test_dom_holds_the_rules_table_and_the_plots(failing: Run, tmp_path: Path) -> None:
    proc = chromium(tmp_path / "profile", "--dump-dom", failing.path("html").resolve().as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert '<table id="rules">' in dom
    for r in failing.report.rules:
        assert f'data-rule="{r.id}" data-status="{r.status}"' in dom
    assert '<div class="banner fail" id="verdict">' in dom
    kinds = Counter(k for k in ("token_lengths", "cluster_sizes", "values", "labels",
                                "smoke_curves") for _ in range(dom.count(f'data-plot="{k}"')))
    assert kinds == {"token_lengths": 1, "cluster_sizes": 2, "values": 1, "labels": 1}
    assert dom.count("<svg") == 4  # the one-cluster rule's sizes are a sentence
    assert "1 cluster of 3 records" in dom
    assert "&lt;U+200B&gt;" in dom
