"""`sustain demo` walked as a new user would, in a real browser (Debian's Chromium, headless,
driven by Playwright), at a laptop's width (1366 px) and a narrow window's (800 px): sign in
with the admin key the demo uses, the status page, a probe's page, a run's page, the
capacity probe and its run, compare (picking probes in its form, and refused one probe), a
failed run (a probe made through the API against the demo's simulator with a model it does
not serve), an interrupted run (one the demo was stopped during with Ctrl-C, then started
again on the same data directory), a page that does not exist, the API docs and back, sign
out.

On every page: the console has no error, every chart names both of its axes (or says why it
is empty), every link meant for a person (not marked as JSON or text) opens an HTML page, no
link to JSON is presented as a page link, no table is drawn without rows, and nothing is wider
than the window. A screenshot of each page at each width is kept in test-artifacts/demo-walk
(CI keeps them)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.processes import (
    ADMIN_HEADERS,
    TEST_ADMIN_KEY,
    SustainProcess,
    free_port,
    wait_until,
)
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
"""Only a hang guard: the demo answers and its first runs of both probes finish ~25 s after
its start on an idle machine."""
RUN_TIMEOUT_S = 60.0
"""Only a hang guard for the runs the walk makes (a second of load each)."""
WIDTHS = (1366, 800)
"""A laptop's window and a narrow one (px)."""
WRONG_MODEL = "no-such-model"
DATA_PATHS = ("/api/", "/openapi.json", "/readyz", "/healthz", "/metrics")
"""Where the service answers with data, not a page: a link there must say what it opens."""


@dataclass(frozen=True)
class Demo:
    base: str
    failed_run: int
    """A run of a probe whose endpoint names a model the simulator does not serve."""
    interrupted_run: int
    """A run the demo was stopped during."""


def admin_client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers=ADMIN_HEADERS, timeout=10)


def run_of(api: httpx.Client, probe: dict[str, Any], until: tuple[str, ...]) -> dict[str, Any]:
    """Trigger a run of `probe` through the API and wait until its status is one of
    `until`."""
    started = api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    found: dict[str, Any] = {}

    def reached() -> bool:
        found.update(api.get(f"/api/v1/runs/{run_id}").json())
        return found["status"] in until
    wait_until(reached, RUN_TIMEOUT_S, step_s=0.2)
    return found


def make_probe(api: httpx.Client, name: str, endpoint_id: int,
               profile: dict[str, Any]) -> dict[str, Any]:
    made = api.post("/api/v1/probes", json={
        "name": name, "endpoint_id": endpoint_id, "interval_s": 3600, "enabled": False,
        "profile": profile})
    assert made.status_code == 201, made.text
    return dict(made.json())


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo with its first runs, a failed run and an interrupted one: the demo is
    stopped with Ctrl-C during a long run and started again on the same data directory (the
    service marks the runs it was stopped during interrupted)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"SUSTAIN_DATA_DIR": str(tmp_path / "data"), "SUSTAIN_PORT": str(port)}
    first = SustainProcess(["demo"], tmp_path / "demo.log", env=env)
    first.env.pop("SUSTAIN_DATABASE_URL", None)
    with first:
        first.wait_http(f"{base}/readyz", timeout_s=READY_TIMEOUT_S)

        def both_probes_ran() -> bool:
            runs = httpx.get(f"{base}/api/v1/runs", params={"status": "succeeded"},
                             timeout=5).json()["items"]
            return len({run["probe_id"] for run in runs}) == 2
        wait_until(both_probes_ran, READY_TIMEOUT_S, step_s=0.5)
        api = admin_client(base)
        simulator = next(e for e in api.get("/api/v1/endpoints").json()["items"]
                         if e["name"] == "demo-simulator")
        wrong = api.post("/api/v1/endpoints", json={
            "name": "walk-wrong-model", "base_url": simulator["base_url"],
            "model": WRONG_MODEL})
        assert wrong.status_code == 201, wrong.text
        failed = run_of(api, make_probe(api, "walk-wrong-model", wrong.json()["id"], {
            "kind": "constant", "rate": 2, "duration_s": 1}), ("failed", "succeeded"))
        assert failed["status"] == "failed", failed
        long = run_of(api, make_probe(api, "walk-long-run", simulator["id"], {
            "kind": "constant", "rate": 1, "duration_s": 600}), ("running",))
        assert first.stop(signal.SIGINT) == 0, first.output()
    again = SustainProcess(["demo"], tmp_path / "demo-again.log", env={
        **env, "SUSTAIN_SHUTDOWN_GRACE_S": "0"})
    again.env.pop("SUSTAIN_DATABASE_URL", None)
    with again:
        again.wait_http(f"{base}/readyz", timeout_s=READY_TIMEOUT_S)
        stopped = admin_client(base).get(f"/api/v1/runs/{long['id']}").json()
        assert stopped["status"] == "interrupted", stopped
        yield Demo(base, failed["id"], long["id"])


class Walk:
    """The browser's page at one width, and what every page it opens must hold."""

    def __init__(self, page: Page, base: str, width: int, checked_links: set[str]) -> None:
        self.page = page
        self.base = base
        self.width = width
        self.errors: list[str] = []
        self.elsewhere: list[str] = []
        self.checked_links = checked_links
        self.refused: set[str] = set()
        """Pages opened that are meant to answer 404 or 422 (the browser logs the status)."""
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        page.on("request", lambda r: self.elsewhere.append(r.url)
                if not r.url.startswith((base + "/", "data:", "blob:")) else None)

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        if self.page.url in self.refused and ("status of 404" in message.text
                                              or "status of 422" in message.text):
            return
        self.errors.append(f"{self.page.url}: {message.text}")

    def check(self, name: str, links: bool = True) -> None:
        """The page now shown: charts with named axes, links that open pages (`links`: on
        sustain's own pages, not Swagger UI's), no data link posing as a page, no table
        without rows, nothing wider than the window; a screenshot."""
        page = self.page
        where = f"{self.width} px, {name}"
        assert page.locator("script").count() == 0 or name.endswith("docs"), "no script"
        for chart in page.locator("figure.axis-chart").all():
            labels = chart.locator(".axis-label").all_text_contents()
            assert len(labels) == 2, f"{where}: a chart without both axis labels: {labels}"
            assert all(label.strip() for label in labels), f"{where}: a blank axis label"
            assert chart.locator("text.tick").count() >= 3, f"{where}: a chart without ticks"
        for empty in page.locator(".chart-empty").all_text_contents():
            assert empty.strip(), f"{where}: an empty chart that does not say why"
        empty_tables = page.evaluate(
            "Array.from(document.querySelectorAll('table')).filter(t => "
            "Array.from(t.tBodies).every(b => b.rows.length === 0)).length")
        assert empty_tables == 0, f"{where}: a table without rows"
        wide = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert wide[0] <= wide[1], f"{where}: {wide[0]} px wide in a {wide[1]} px window"
        for link in page.locator("a[href]").all() if links else []:
            href = link.get_attribute("href") or ""
            kind = link.get_attribute("type")
            path = href.removeprefix(self.base)
            if path.startswith(DATA_PATHS) or path.split("?")[0].endswith(".json"):
                assert kind in ("application/json", "text/plain"), \
                    f"{where}: {href} opens data but reads as a page link"
            if kind is not None or href.startswith("#") or href in self.checked_links:
                continue
            url = href if href.startswith("http") else self.base + (
                href if href.startswith("/") else "/" + href.lstrip("?"))
            if href.startswith("?"):
                url = page.url.split("?")[0].split("#")[0] + href
            self.checked_links.add(href)
            answer = page.request.get(url, max_redirects=5)
            assert answer.ok, f"{where}: {href} answered {answer.status}"
            assert answer.headers["content-type"].startswith("text/html"), \
                f"{where}: {href} opens {answer.headers['content-type']}, not a page"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{self.width}-{name}.png"), full_page=True)


def walk_at(page: Page, walk: Walk, demo: Demo, first: bool) -> None:
    """The whole walk at the page's width; `first`: the docs page too (Swagger UI's own
    layout is not sustain's to keep narrow)."""
    base = demo.base
    site = page.get_by_role("navigation", name="Site")

    page.goto(base + "/")
    assert page.title() == "sustain status"
    site.get_by_role("link", name="Sign in").click()
    page.fill("#key", TEST_ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    assert page.url == base + "/"
    who = site.locator(".who").inner_text()
    assert who == f"signed in as the admin key {TEST_ADMIN_KEY[:17]}…", who
    assert page.locator("tr.probe").count() == 4, "the demo's two, the walk's two"
    capacity_row = page.locator('tr.probe[data-probe="demo-capacity"]')
    assert capacity_row.locator("sup.all-levels").count() == 3, \
        "a capacity search's figures say they take in the saturated levels"
    walk.check("1-status")

    page.locator('tr.probe[data-probe="demo-constant"] a.probe').click()
    assert page.locator("h1").inner_text() == "Probe demo-constant"
    titles = page.locator(".charts h3").all_inner_texts()
    assert titles[:4] == ["Time to first token (TTFT)", "Time per output token (TPOT)",
                          "Inter-token latency (ITL)", "End-to-end latency"], titles
    assert page.locator(".charts figure.axis-chart").count() >= 5, \
        "TTFT, TPOT, ITL, E2E and availability, each with data"
    assert page.locator("tr.slo").count() == 1, "the demo's availability SLO"
    drift = page.locator("dd.drift").inner_text()
    assert drift.startswith(("no runs in the 7-day baseline window yet",
                             "not checked yet: drift is checked every")), drift
    walk.check("2-probe")

    # its oldest succeeded run (one in flight when the demo was stopped is interrupted)
    page.locator("table.runs tr.run-row").filter(
        has=page.locator("td.status-succeeded")).last.locator("a.run").click()
    assert page.locator("h1").inner_text().endswith("of probe demo-constant")
    assert page.locator("table.latency tr").count() >= 3
    assert page.locator("figure.axis-chart rect.bar").count() > 0, "histograms"
    box = page.locator("main").bounding_box()
    nav = site.bounding_box()
    assert box is not None
    assert nav is not None
    assert abs(box["x"] - nav["x"]) <= 1, "the run page keeps the other pages' column"
    assert abs(box["width"] - nav["width"]) <= 1, "the run page keeps the other pages' column"
    histogram = page.locator(".charts figure.axis-chart").first.bounding_box()
    svg = page.locator(".charts figure.axis-chart svg").first.bounding_box()
    assert histogram is not None
    assert svg is not None
    assert svg["width"] >= histogram["width"] - 20, "a chart fills its box"
    walk.check("3-run")

    page.goto(base + "/")
    page.locator('tr.probe[data-probe="demo-capacity"] a.probe').click()
    assert page.locator("h1").inner_text() == "Probe demo-capacity"
    walk.check("4-capacity-probe")
    page.locator("table.runs tr.run-row").filter(
        has=page.locator("td.status-succeeded")).last.locator("a.run").click()
    assert page.locator("h2#curve").inner_text().startswith("Capacity under SLO: 8")
    assert page.locator("figure.axis-chart circle.pass").count() >= 1
    assert page.locator("figure.axis-chart circle.fail").count() >= 1, \
        "the levels past the knee are drawn as failing"
    walk.check("5-capacity-run")

    site.get_by_role("link", name="Compare").click()
    page.get_by_label("demo-constant").check()
    walk.refused.add(base + "/compare?probe=demo-constant&window=7d")
    page.get_by_role("button", name="Compare").click()
    assert "Pick at least two probes" in page.locator("p.problem").inner_text()
    assert page.locator("table").count() == 0
    assert page.get_by_label("demo-constant").is_checked(), "the pick is kept"
    walk.check("6-compare-one")
    page.get_by_label("demo-capacity").check()
    page.get_by_role("button", name="Compare").click()
    headers = page.locator("table.compare th[data-probe]").all_inner_texts()
    assert [h.split("\n")[0] for h in headers] == ["demo-capacity", "demo-constant"]
    assert "not enough runs yet" not in page.locator("table.compare").inner_text()
    assert page.get_by_role("heading", name="Compare other probes").count() == 1
    assert page.get_by_label("demo-capacity").is_checked(), "the picker stays"
    walk.check("7-compare")

    page.goto(f"{base}/runs/{demo.failed_run}")
    failure = page.locator("section.failure").inner_text()
    assert "the first: http_4xx (HTTP 404)" in failure, failure
    assert f"The model `{WRONG_MODEL}` does not exist." in failure, "the server's words"
    assert "from POST http://127.0.0.1:" in failure, "the request it was"
    assert "/v1/chat/completions" in failure
    assert f"does not serve model '{WRONG_MODEL}'" in failure, "the hint"
    walk.check("8-failed-run")

    page.goto(f"{base}/runs/{demo.interrupted_run}")
    assert page.locator("section.failure h2").inner_text() == "Why it ended early"
    assert "The run was interrupted: service stopped during the run" in \
        page.locator("section.failure").inner_text()
    walk.check("9-interrupted-run")

    for path, name in (("/no-such-page", "10-not-found"), ("/runs/999999999", "11-no-run")):
        walk.refused.add(base + path)
        answer = page.goto(base + path)
        assert answer is not None
        assert answer.status == 404
        assert page.locator("h1").inner_text() == "Not found"
        assert site.get_by_role("link", name="Compare").count() == 1, "the site's navigation"
        assert site.locator(".who").count() == 1, "still signed in"
        walk.check(name)
    site.get_by_role("link", name="Status").click()
    assert page.url == base + "/"

    if first:
        site.get_by_role("link", name="API docs").click()
        page.locator(".swagger-ui .info .title").wait_for(timeout=60_000)  # hang guard
        assert page.locator(".opblock").count() > 10
        walk.check("12-docs", links=False)
        page.get_by_role("link", name="sustain status page").click()
        assert page.url == base + "/", "the docs lead back to the status page"


def test_a_new_user_walks_the_demo_at_two_widths(demo: Demo) -> None:
    base = demo.base
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            checked_links: set[str] = set()
            walks = []
            for width in WIDTHS:
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                walk = Walk(page, base, width, checked_links)
                walks.append(walk)
                walk_at(page, walk, demo, first=width == WIDTHS[0])
                if width == WIDTHS[-1]:
                    site = page.get_by_role("navigation", name="Site")
                    site.get_by_role("button", name="Sign out").click()
                    assert page.url == base + "/login"
                    page.goto(base + "/")
                    assert site.get_by_role("link", name="Sign in").count() == 1, "signed out"
                    walk.check("13-signed-out")
                time.sleep(0.2)  # a console message of the last page reaches the listener
                context.close()
            assert [e for w in walks for e in w.errors] == []
            assert [u for w in walks for u in w.elsewhere] == [], \
                "nothing is loaded from another origin"
        finally:
            browser.close()
