"""The API docs in a real browser (Debian's Chromium, headless, driven by Playwright) against a
live `sustain serve` that answers only for 127.0.0.1 (SUSTAIN_ALLOWED_HOSTS): Swagger UI
and ReDoc render the API from this service's own assets under the page's Content-Security-Policy,
with no request to any other origin and no policy violation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import SustainProcess, free_port
from tests.tools import find_tool

CHROMIUM = find_tool("chromium")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright (test extra) not installed")


HANG_GUARD_MS = 60_000
"""Rendering takes a second or two; a CI machine running the suites beside a Docker build
has taken over 15 s."""


def rendered(locator: Any, requested: list[str], problems: list[str]) -> None:
    """Wait for the page's element; if it never shows, fail with what the page asked for and
    what it reported, which say why (a refused asset, a policy violation)."""
    try:
        locator.wait_for(timeout=HANG_GUARD_MS)
    except sync_api.TimeoutError as error:
        raise AssertionError(f"not rendered; requests {requested}, errors {problems}") from error


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(.ci/run installs it)")
def test_api_docs_render_from_this_service_alone_under_their_policy(
        tmp_path: Path, database_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = SustainProcess(["serve", "--port", str(port)], tmp_path / "sustain.log", env={
        "SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_ALLOWED_HOSTS": "127.0.0.1"})
    with server:
        server.wait_http(base + "/readyz")
        # over real HTTP: another Host is refused, health checks answer whatever the Host
        assert httpx.get(base + "/docs", headers={"Host": "evil.example"}).status_code == 400
        assert httpx.get(base + "/healthz", headers={"Host": "10.9.8.7"}).status_code == 200
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox"])
            try:
                page = browser.new_page()
                requested: list[str] = []
                problems: list[str] = []
                page.on("request", lambda request: requested.append(request.url))
                page.on("console", lambda message: problems.append(message.text)
                        if message.type == "error" else None)
                page.on("pageerror", lambda error: problems.append(str(error)))
                response = page.goto(base + "/docs")
                assert response is not None
                assert response.status == 200
                title = page.locator(".swagger-ui .info .title")
                rendered(title, requested, problems)
                assert title.inner_text().startswith("sustain")
                assert page.locator(".opblock").count() > 10, "the API's operations"
                assert requested
                assert all(url.startswith(base + "/") for url in requested), requested
                assert problems == []

                response = page.goto(base + "/redoc")
                assert response is not None
                assert response.status == 200
                heading = page.locator("h1").first
                rendered(heading, requested, problems)
                assert heading.inner_text().startswith("sustain")
                assert page.locator("[data-section-id]").count() > 10, "the API's operations"
                elsewhere = [url for url in requested
                             if not url.startswith((base + "/", "blob:", "data:"))]
                assert elsewhere == []
                assert problems == []
            finally:
                browser.close()
