"""/docs (Swagger UI) and /redoc (ReDoc) are served entirely by this app: every script,
stylesheet and image they name is a path here, each answers with its content type, and the
pages' policies name no other origin (tests/browser/test_docs.py renders them in Chromium
under those policies)."""

from __future__ import annotations

import re

import httpx

ASSET_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


async def test_docs_load_their_assets_from_this_app_only(api: httpx.AsyncClient) -> None:
    page = await api.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    urls = re.findall(r'<(?:link|script)[^>]* (?:src|href)="([^"]+)"', page.text)
    assert len(urls) == 3, urls
    assert all(url.startswith("/docs/assets/") for url in urls), urls
    assert re.findall(r'<a href="([^"]+)"', page.text) == ["/"], "back to the status page"
    assert "http" not in page.text.replace("/openapi.json", "")
    for url in urls:
        asset = await api.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(ASSET_TYPES[url[url.rindex("."):]])
        assert len(asset.content) > 1000
    csp = page.headers["content-security-policy"]
    assert "http" not in csp, "no other origin"
    assert "*" not in csp, "no other origin"
    assert "default-src 'none'" in csp
    assert "'unsafe-eval'" not in csp
    scripts = re.search(r"script-src ([^;]+);", csp)
    assert scripts is not None
    assert "'unsafe-inline'" not in scripts.group(1), "only the page's own inline script"
    assert (await api.get("/openapi.json")).status_code == 200


async def test_redoc_loads_its_script_from_this_app_only(api: httpx.AsyncClient) -> None:
    page = await api.get("/redoc")
    assert page.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert "/docs/redoc.js" in urls
    assert all(url.startswith("/docs/") for url in urls), urls
    assert "fonts.googleapis" not in page.text
    script = await api.get("/docs/redoc.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert len(script.content) > 100_000
    assert b"cdn.redoc.ly" not in script.content, "nothing from another origin"
    csp = page.headers["content-security-policy"]
    assert "http" not in csp, "no other origin"
    assert "*" not in csp
    assert "worker-src blob:" in csp
