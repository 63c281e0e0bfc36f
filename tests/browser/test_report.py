"""`sustain probe --html` in a real browser: the report of a Pareto run opens
from the file in Debian's Chromium with every network request refused and JavaScript off,
and shows its results, the curve as an SVG step chart with its points, latency tables and
histograms; it names no external asset at all."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.processes import SustainProcess, free_port, sustain_command
from tests.tools import find_tool

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = find_tool("chromium")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright (test extra) not installed")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(.ci/run installs it)")
def test_the_html_report_opens_offline_with_its_chart(tmp_path: Path) -> None:
    port = free_port()
    report = tmp_path / "report.html"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "10", "--itl-ms", "2",
                         "--output-tokens", "8", "--max-batch", "4"],
                        tmp_path / "simulator.log") as simulator:
        simulator.wait_http(f"http://127.0.0.1:{port}/v1/models")
        done = subprocess.run([*sustain_command(), "probe", f"http://127.0.0.1:{port}/v1",
                               "--model", "m", "--profile", "pareto", "--max-concurrency", "8",
                               "--points", "7", "--duration", "0.5", "--output-tokens", "8",
                               "--html", str(report), "--json"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # a level of half a second on a loaded machine may end without a TPOT: its point has no
    # place on the chart (its table row says so), so the chart's points are counted from the
    # run's own answer
    charted = sum(1 for point in json.loads(done.stdout)["pareto"]
                  if point.get("tps_per_user") and point.get("system_tps"))
    assert charted >= 1
    html = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.IGNORECASE)
    assert "<script" not in html
    ARTIFACTS.mkdir(exist_ok=True)
    requested: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            context = browser.new_context(java_script_enabled=False, offline=True)
            page = context.new_page()
            page.on("request", lambda request: requested.append(request.url))
            page.goto(report.as_uri())
            assert page.locator("h1").inner_text().startswith("sustain probe:")
            assert page.locator("table.figures").inner_text().count("\n") >= 5
            assert page.locator("h2#curve").inner_text().startswith("Pareto curve")
            assert page.locator("table.curve tbody tr").count() == 7
            curve = page.locator("figure.axis-chart").filter(has=page.locator("path.curve"))
            assert curve.locator("svg path.curve").count() == 1
            assert curve.locator("svg circle").count() == charted
            assert curve.locator("text.axis-label").all_text_contents() == [
                "tokens/s per user (1000 / TPOT p90)", "system output tokens/s"]
            assert page.locator("figure.axis-chart svg rect.bar").count() > 0
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert requested == [report.as_uri()], "the report loads nothing but itself"
