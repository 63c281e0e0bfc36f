"""The status page in a real browser: Debian's Chromium, headless, driven by Playwright (no
browser download). A live `sustain serve` probes the simulator and a dead endpoint; the page
shows both probes with their state, last run, availability and p99s with charts, the SLO's
budget bar and the firing endpoint-down alert, without any script, after signing in with a
viewer key through the form (and not before); a screenshot is kept in test-artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.processes import SustainProcess, admin_client, free_port, wait_until
from tests.tools import find_tool

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = find_tool("chromium")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright (test extra) not installed")


@pytest.fixture
def live(tmp_path: Path, database_url: str) -> Iterator[str]:
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(["simulate", "--port", str(sim_port), "--ttft-ms", "20",
                                "--itl-ms", "4", "--output-tokens", "8"],
                               tmp_path / "simulator.log")
    server = SustainProcess(["serve", "--port", str(port)], tmp_path / "sustain.log", env={
        "SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_ALERT_EVALUATION_S": "1",
        "SUSTAIN_ENDPOINT_DOWN_RUNS": "2"})
    with simulator, server:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        server.wait_http(f"http://127.0.0.1:{port}/readyz")
        base = f"http://127.0.0.1:{port}"
        api = admin_client(base)
        dead_port = free_port()
        for name, url in (("sim", f"http://127.0.0.1:{sim_port}/v1"),
                          ("dead", f"http://127.0.0.1:{dead_port}/v1")):
            endpoint = api.post("/api/v1/endpoints", json={
                "name": name, "base_url": url, "model": "sim-model",
                "timeout_connect_s": 1, "timeout_total_s": 5})
            assert endpoint.status_code == 201, endpoint.text
            probe = api.post("/api/v1/probes", json={
                "name": "chat" if name == "sim" else "dead-probe",
                "endpoint_id": endpoint.json()["id"], "interval_s": 1,
                "profile": {"kind": "constant", "rate": 10, "duration_s": 0.5},
                "workload": {"max_tokens": 8}})
            assert probe.status_code == 201, probe.text
        slo = api.post("/api/v1/slos", json={
            "name": "chat-availability", "probes": ["chat"], "sli": {"kind": "availability"},
            "objective": 0.99, "window": "1d"})
        assert slo.status_code == 201, slo.text

        def ready() -> bool:
            runs = api.get("/api/v1/runs", params={"status": "succeeded"}).json()["items"]
            firing = api.get("/api/v1/alerts", params={"state": "firing"}).json()["items"]
            return len(runs) >= 2 and any(a["alertname"] == "SustainEndpointDown"
                                          for a in firing)
        wait_until(ready, 60, step_s=0.3)
        yield base


def _check_sign_in_form(page: Page, live: str) -> None:
    """Signed out, the page sends the browser to the sign-in form, served under a policy
    that allows no script; a key that is not one is refused there."""
    response = page.goto(live + "/")
    assert response is not None
    assert page.url == live + "/login"
    csp = response.headers["content-security-policy"]
    assert "script-src" not in csp
    assert "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    page.fill("#key", "sk_sustain_not-a-key-at-all-0123456789abcdefgh")
    page.click("button[type=submit]")
    assert page.locator("#error").inner_text() == "That key was not accepted."


def _sign_in_as_viewer(page: Page, live: str) -> None:
    """Sign in through the form with a new viewer key: the session cookie is HTTP-only,
    strict same-site, and does not carry the key."""
    with admin_client(live) as api:
        viewer_key = api.post("/api/v1/keys", json={"name": "browser",
                                                    "role": "viewer"}).json()["key"]
    page.fill("#key", viewer_key)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")
    assert page.url == live + "/"
    cookie, = page.context.cookies()
    assert cookie["name"] == "sustain_session"
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert viewer_key not in cookie["value"]


def _check_status_page(page: Page) -> Locator:
    """The signed-in status page: not cached, script-free, refreshing itself; both probes
    with their state, availability, p99s and charts, the firing alert, the SLO's budget bar
    and the API docs link; a screenshot is kept. The chat probe's row."""
    response = page.reload()
    assert response is not None
    assert response.status == 200
    assert response.headers["cache-control"] == "no-store"
    assert "signed in as browser" in page.content()
    assert page.title() == "sustain status"
    assert page.locator("script").count() == 0
    refresh = page.locator('meta[http-equiv="refresh"]').get_attribute("content")
    assert refresh is not None
    assert int(refresh) > 0

    chat = page.locator('tr.probe[data-probe="chat"]')
    assert chat.locator(".badge").inner_text() == "ok"
    cells = chat.locator("td.num").all_inner_texts()
    assert cells[0] == "100.00 %"
    assert cells[1].removesuffix("*").endswith(" ms"), "a p99 from few samples is marked"
    assert cells[2].removesuffix("*").endswith(" ms")
    assert chat.locator("figure.axis-chart svg.chart").count() == 2
    labels = chat.locator("figure.axis-chart .axis-label").all_text_contents()
    assert "TTFT p99 (ms)" in labels, "charts name their axes and units"
    assert "time (UTC)" in labels
    assert chat.locator("svg.chart text.tick").count() >= 4, "both axes are ticked"
    dead = page.locator('tr.probe[data-probe="dead-probe"]')
    assert dead.locator(".badge").inner_text() == "down"

    alerts = page.locator("tr.alert").all_inner_texts()
    assert any("SustainEndpointDown" in a and "probe=dead-probe" in a for a in alerts)
    slo = page.locator('tr.slo[data-slo="chat-availability"]')
    assert slo.count() == 1
    assert "%" in slo.inner_text()
    assert slo.locator(".bar span").count() == 1

    site = page.get_by_role("navigation", name="Site")
    assert site.get_by_role("link", name="API docs").get_attribute("href") == "/docs"
    page.screenshot(path=str(ARTIFACTS / "status-page.png"), full_page=True)
    return chat


def _check_run_page(page: Page, chat: Locator) -> None:
    """The chat probe's last run opens from its row: a script-free page with the latency
    table and a histogram; a screenshot is kept."""
    run_link = chat.locator("a.run")
    href = run_link.get_attribute("href")
    assert href is not None
    assert href.startswith("/runs/")
    run_link.click()
    assert page.locator("h1").inner_text().startswith("Run ")
    assert "of probe chat" in page.locator("h1").inner_text()
    assert page.locator("table.latency tr").count() >= 3
    assert page.locator("figure.axis-chart svg rect.bar").count() > 0
    assert page.locator("script").count() == 0
    page.screenshot(path=str(ARTIFACTS / "run-page.png"), full_page=True)


def _check_failed_run_page(page: Page, live: str) -> None:
    """The dead endpoint's last run says what failed, where and why: the error class, that no
    HTTP answer came, the URL the requests went to, and a hint; no empty histogram frames."""
    page.goto(live + "/")
    page.locator('tr.probe[data-probe="dead-probe"] a.run').first.click()
    failure = page.locator("section.failure").inner_text()
    assert "requests failed (connect" in failure
    assert "(no HTTP answer) from POST http://127.0.0.1:" in failure
    assert "/v1/chat/completions" in failure
    assert "is the server up there?" in failure
    assert page.locator("figure.axis-chart").count() == 0, "no empty frames"
    empties = page.locator(".chart-empty").all_inner_texts()
    assert empties == ["No request succeeded, so there is no latency to draw."], \
        "one reason, not one frame per histogram"
    page.screenshot(path=str(ARTIFACTS / "failed-run-page.png"), full_page=True)


def _check_compare_page(page: Page, live: str) -> None:
    """The compare page shows both probes side by side, and names a probe that is not."""
    page.goto(live + "/compare?probe=chat&probe=dead-probe&window=1d")
    headers = page.locator("table.compare th[data-probe]").all_inner_texts()
    assert [h.split("\n")[0] for h in headers] == ["chat", "dead-probe"]
    assert "availability" in page.locator("table.compare").inner_text()
    page.goto(live + "/compare?probe=chat&probe=nope")
    assert "no probe named 'nope'" in page.content()


def _check_sign_out(page: Page, live: str) -> None:
    """Signing out ends the session: the page asks for a key again, then and afterwards."""
    page.goto(live + "/")
    page.click("text=Sign out")
    assert page.url == live + "/login"
    page.goto(live + "/")
    assert page.url == live + "/login"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(.ci/run installs it)")
def test_status_page_shows_probes_slos_and_alerts_without_javascript(live: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900},
                                    java_script_enabled=False)
            _check_sign_in_form(page, live)
            _sign_in_as_viewer(page, live)
            chat = _check_status_page(page)
            _check_run_page(page, chat)
            _check_failed_run_page(page, live)
            _check_compare_page(page, live)
            _check_sign_out(page, live)
        finally:
            browser.close()
    assert (ARTIFACTS / "status-page.png").stat().st_size > 10_000
