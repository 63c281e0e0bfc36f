"""`sustain demo` walked as a new user would, in a real browser (Debian's Chromium, headless,
driven by Playwright): sign in with the admin key the demo uses, the status page, a probe's
page, a run's page, the capacity probe and its run, compare (picking probes in its form), the
API docs, sign out. On every page: the console has no error, every chart names both of its
axes (or says why it is empty), and every link meant for a person (not marked as JSON or text)
opens an HTML page. A screenshot of each page is kept in test-artifacts/ (CI keeps them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.processes import TEST_ADMIN_KEY, SustainProcess, free_port, wait_until
from tests.tools import find_tool

if TYPE_CHECKING:
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "demo-walk"
CHROMIUM = find_tool("chromium")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright (test extra) not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                "(.ci/run installs it)")
READY_TIMEOUT_S = 120.0
"""Only a hang guard: the demo's first runs of both probes finish ~25 s after its start."""


@pytest.fixture
def running_demo(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = SustainProcess(["demo"], tmp_path / "demo.log", env={
        "SUSTAIN_DATA_DIR": str(tmp_path / "data"), "SUSTAIN_PORT": str(port)})
    process.env.pop("SUSTAIN_DATABASE_URL", None)
    with process:
        process.wait_http(f"{base}/readyz", timeout_s=60)

        def both_probes_ran() -> bool:
            runs = httpx.get(f"{base}/api/v1/runs", params={"status": "succeeded"},
                             timeout=5).json()["items"]
            return len({run["probe_id"] for run in runs}) == 2
        wait_until(both_probes_ran, READY_TIMEOUT_S, step_s=0.5)
        yield base


class Walk:
    """The browser's page, and what every page it opens must hold."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.elsewhere: list[str] = []
        self.checked_links: set[str] = set()
        page.on("console", lambda m: self.errors.append(f"{page.url}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        page.on("request", lambda r: self.elsewhere.append(r.url)
                if not r.url.startswith((base + "/", "data:", "blob:")) else None)

    def check(self, name: str, links: bool = True) -> None:
        """The page now shown: charts with named axes, links that open pages (`links`: on
        sustain's own pages, not Swagger UI's), a screenshot."""
        page = self.page
        assert page.locator("script").count() == 0 or name.endswith("docs"), "no script"
        for chart in page.locator("figure.axis-chart").all():
            labels = chart.locator(".axis-label").all_text_contents()
            assert len(labels) == 2, f"{name}: a chart without both axis labels: {labels}"
            assert all(label.strip() for label in labels), f"{name}: a blank axis label"
            assert chart.locator("text.tick").count() >= 3, f"{name}: a chart without ticks"
        for empty in page.locator(".chart-empty").all_text_contents():
            assert empty.strip(), f"{name}: an empty chart that does not say why"
        for link in page.locator("a[href]").all() if links else []:
            href = link.get_attribute("href") or ""
            kind = link.get_attribute("type")
            if kind is not None or href.startswith("#") or href in self.checked_links:
                continue
            url = href if href.startswith("http") else self.base + (
                href if href.startswith("/") else "/" + href.lstrip("?"))
            if href.startswith("?"):
                url = page.url.split("?")[0].split("#")[0] + href
            self.checked_links.add(href)
            answer = page.request.get(url, max_redirects=5)
            assert answer.ok, f"{name}: {href} answered {answer.status}"
            assert answer.headers["content-type"].startswith("text/html"), \
                f"{name}: {href} opens {answer.headers['content-type']}, not a page"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_new_user_walks_the_demo_from_status_to_sign_out(running_demo: str) -> None:
    base = running_demo
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            walk = Walk(page, base)
            site = page.get_by_role("navigation", name="Site")

            page.goto(base + "/")
            assert page.title() == "sustain status"
            site.get_by_role("link", name="Sign in").click()
            page.fill("#key", TEST_ADMIN_KEY)
            page.get_by_role("button", name="Sign in").click()
            assert page.url == base + "/"
            assert "signed in as" in site.inner_text()
            assert page.locator("tr.probe").count() == 2
            walk.check("1-status")

            page.locator('tr.probe[data-probe="demo-constant"] a.probe').click()
            assert page.locator("h1").inner_text() == "Probe demo-constant"
            assert page.locator("figure.axis-chart").count() >= 3, "TTFT, E2E, availability"
            assert page.locator("tr.slo").count() == 1, "the demo's availability SLO"
            assert page.locator("dd.drift").inner_text() == "not enough runs yet"
            walk.check("2-probe")

            page.locator("table.runs a.run").last.click()
            assert page.locator("h1").inner_text().endswith("of probe demo-constant")
            assert page.locator("table.latency tr").count() >= 3
            assert page.locator("figure.axis-chart rect.bar").count() > 0, "histograms"
            walk.check("3-run")

            page.get_by_role("link", name="demo-constant").first.click()
            page.goto(base + "/")
            page.locator('tr.probe[data-probe="demo-capacity"] a.probe').click()
            assert page.locator("h1").inner_text() == "Probe demo-capacity"
            walk.check("4-capacity-probe")
            page.locator("table.runs a.run").last.click()
            assert page.locator("h2#curve").inner_text().startswith("Capacity under SLO: 8")
            assert page.locator("figure.axis-chart circle.pass").count() >= 1
            assert page.locator("figure.axis-chart circle.fail").count() >= 1, \
                "the levels past the knee are drawn as failing"
            walk.check("5-capacity-run")

            site.get_by_role("link", name="Compare").click()
            page.get_by_label("demo-constant").check()
            page.get_by_label("demo-capacity").check()
            page.get_by_role("button", name="Compare").click()
            headers = page.locator("table.compare th[data-probe]").all_inner_texts()
            assert [h.split("\n")[0] for h in headers] == ["demo-capacity", "demo-constant"]
            assert "not enough runs yet" in page.locator("table.compare").inner_text()
            walk.check("6-compare")

            site.get_by_role("link", name="API docs").click()
            page.locator(".swagger-ui .info .title").wait_for(timeout=15_000)  # hang guard
            assert page.locator(".opblock").count() > 10
            walk.check("7-docs", links=False)

            page.go_back()
            page.get_by_role("navigation", name="Site").get_by_role(
                "button", name="Sign out").click()
            assert page.url == base + "/login"
            page.goto(base + "/")
            assert page.get_by_role("navigation", name="Site").get_by_role(
                "link", name="Sign in").count() == 1, "signed out"
            walk.check("8-signed-out")
            time.sleep(0.2)  # a console message of the last page reaches the listener
            assert walk.errors == []
            assert walk.elsewhere == [], "nothing is loaded from another origin"
        finally:
            browser.close()
