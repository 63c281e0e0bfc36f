"""Failed authentication over real HTTP (uvicorn on loopback, configured as `sustain serve`
configures it: the loopback proxy trusted for X-Forwarded-For and X-Forwarded-Proto, which the
tests use to be several clients and to arrive over TLS).

Every refusal is counted in sustain_auth_failures_total{reason}, but the audit log gets at most
one row per source and reason a minute (anonymous POSTs once wrote a row each: 4,196 rows in
10 s). /login refuses forms posted from other sites (login CSRF) and throttles a source's
failed keys with 429 and Retry-After. The session cookie is Secure when the request came over
HTTPS, and only then."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from sustain.service.access.auth_failures import LOGIN_FAILURES_ALLOWED, AuthFailure
from tests.integration.service.helpers import samples_of, serving
from tests.integration.service.test_auth import bearer, make_key
from tests.processes import ADMIN_HEADERS

FORM = {"content-type": "application/x-www-form-urlencoded"}


@asynccontextmanager
async def over_http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan, behind a real uvicorn on a loopback port (proxy headers
    trusted from 127.0.0.1, uvicorn's default and `sustain serve`'s); an admin client of it."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    async with serving(app):  # the app's lifespan, run by the test
        task = asyncio.create_task(server.serve())
        try:
            async with asyncio.timeout(10):  # hang guard: uvicorn starts in well under 1 s
                while not server.started:  # noqa: ASYNC110 - uvicorn has no started event
                    await asyncio.sleep(0.02)
            port = server.servers[0].sockets[0].getsockname()[1]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         headers=ADMIN_HEADERS, timeout=10) as client:
                yield client
        finally:
            server.should_exit = True
            await task


@pytest.fixture
async def live(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with over_http(app) as client:
        yield client


@pytest.fixture
async def anon(live: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the same server without a key."""
    async with httpx.AsyncClient(base_url=live.base_url, timeout=10) as client:
        yield client


def source(address: str, **headers: str) -> dict[str, str]:
    """Headers of a call from `address`, as the trusted loopback proxy reports it."""
    return {"X-Forwarded-For": address, **headers}


async def failures(client: httpx.AsyncClient) -> dict[str, float]:
    text = (await client.get("/metrics")).text
    return {labels["reason"]: value for labels, value
            in samples_of(text)["sustain_auth_failures_total"]}


async def anonymous_rows(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    entries = (await client.get("/api/v1/audit", params={"limit": 1000})).json()["items"]
    return [e for e in entries if e["actor"] != "SUSTAIN_ADMIN_KEY"]


async def test_refusals_are_all_counted_but_audited_once_per_source_and_reason_a_minute(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    viewer = await make_key(live, "dash", "viewer")
    revoked = await make_key(live, "old", "editor")
    (old,) = [k for k in (await live.get("/api/v1/keys")).json()["items"] if k["name"] == "old"]
    assert (await live.delete(f"/api/v1/keys/{old['id']}")).status_code == 204
    assert set(await failures(live)) == {r.value for r in AuthFailure}  # all start at 0
    callers = {AuthFailure.missing_key: {},
               AuthFailure.unknown_key: bearer("sk_sustain_" + "u" * 43),
               AuthFailure.revoked_key: bearer(revoked),
               AuthFailure.forbidden_role: bearer(viewer)}
    sources = ["203.0.113.7", "203.0.113.8", "2001:db8::9"]
    repeats = 12

    async def attack(address: str, reason: AuthFailure) -> None:
        for _ in range(repeats):
            r = await anon.post("/api/v1/endpoints", json={},
                                headers=source(address, **callers[reason]))
            assert r.status_code == (403 if reason is AuthFailure.forbidden_role else 401)

    await asyncio.gather(*(attack(a, r) for a in sources for r in callers))

    counted = await failures(live)
    assert {r: counted[r] for r in callers} == {r.value: len(sources) * repeats
                                                for r in callers}
    rows = await anonymous_rows(live)
    by_status = {s: sum(1 for e in rows if e["status"] == s) for s in (401, 403)}
    assert by_status == {401: 3 * len(sources), 403: len(sources)}, rows
    assert {e["actor"] for e in rows if e["status"] == 403} == {"dash"}


async def test_posts_to_no_route_without_a_key_are_sampled_too(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    for _ in range(20):
        r = await anon.post("/nothing-here", headers=source("198.51.100.4"))
        assert r.status_code in (404, 405)
    assert len(await anonymous_rows(live)) == 1


async def test_a_source_failing_at_login_is_throttled_with_retry_after(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    viewer = await make_key(live, "person", "viewer")
    attacker = source("203.0.113.50", **FORM)
    for _ in range(LOGIN_FAILURES_ALLOWED):
        r = await anon.post("/login", content="key=sk_sustain_guess", headers=attacker)
        assert r.status_code == 401
    for key in ("sk_sustain_guess", viewer):  # past the limit, even the right key waits
        r = await anon.post("/login", content=f"key={key}", headers=attacker)
        assert r.status_code == 429
        assert 1 <= int(r.headers["retry-after"]) <= 300
        assert "sustain_session" not in r.cookies
    other = await anon.post("/login", content=f"key={viewer}",
                            headers=source("203.0.113.51", **FORM))
    assert other.status_code == 303
    counted = await failures(live)
    assert (counted["login_failed"], counted["login_throttled"]) == (LOGIN_FAILURES_ALLOWED, 2)
    rows = await anonymous_rows(live)
    assert sorted(e["status"] for e in rows) == [303, 401, 429]


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
    {"Sec-Fetch-Site": "same-site", "Origin": "http://evil.127.0.0.1.nip.io"},
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
])
async def test_a_sign_in_form_posted_from_another_site_is_403(
        live: httpx.AsyncClient, anon: httpx.AsyncClient, headers: dict[str, str]) -> None:
    viewer = await make_key(live, "victim-is-signed-in-as-this", "viewer")
    r = await anon.post("/login", content=f"key={viewer}", headers={**FORM, **headers})
    assert r.status_code == 403
    assert "sustain_session" not in r.cookies
    assert viewer not in r.text
    assert (await failures(live))["cross_site"] == 1


async def test_a_sign_in_from_this_sites_form_or_a_non_browser_is_accepted(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    viewer = await make_key(live, "person", "viewer")
    own = str(live.base_url).rstrip("/")
    for headers in ({"Sec-Fetch-Site": "same-origin", "Origin": own}, {"Origin": own}, {}):
        r = await anon.post("/login", content=f"key={viewer}", headers={**FORM, **headers})
        assert r.status_code == 303, (headers, r.text)
        assert "sustain_session" in r.cookies


def session_cookie(response: httpx.Response) -> SimpleCookie:
    (header,) = [v for v in response.headers.get_list("set-cookie")
                 if v.startswith("sustain_session=")]
    cookie = SimpleCookie()
    cookie.load(header)
    return cookie


async def test_the_session_cookie_is_secure_over_https_only(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    viewer = await make_key(live, "person", "viewer")
    plain = await anon.post("/login", content=f"key={viewer}", headers=FORM)
    assert plain.status_code == 303
    assert not session_cookie(plain)["sustain_session"]["secure"]
    assert session_cookie(plain)["sustain_session"]["httponly"]
    tls = {"X-Forwarded-Proto": "https"}  # TLS ended at the (trusted, loopback) proxy
    signed_in = await anon.post("/login", content=f"key={viewer}", headers={**FORM, **tls})
    assert signed_in.status_code == 303
    assert session_cookie(signed_in)["sustain_session"]["secure"]
    out = await anon.post("/logout", headers=tls)
    assert out.status_code == 303
    assert session_cookie(out)["sustain_session"]["secure"]
    assert session_cookie(out)["sustain_session"]["max-age"] == "0"


async def test_an_https_asgi_scope_gets_a_secure_cookie(app: FastAPI) -> None:
    """Another server in front (an ASGI scope whose scheme is https) gets the same."""
    async with serving(app) as client:
        viewer = await make_key(client, "person", "viewer")
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="https://sustain.test") as tls):
        r = await tls.post("/login", content=f"key={viewer}", headers=FORM)
        assert r.status_code == 303
        assert session_cookie(r)["sustain_session"]["secure"]


async def test_an_unknown_sign_in_cookie_is_counted_as_a_bad_session(
        live: httpx.AsyncClient, anon: httpx.AsyncClient) -> None:
    anon.cookies.set("sustain_session", "not-a-session")
    assert (await anon.get("/")).status_code == 303
    assert (await anon.get("/api/v1/probes")).status_code == 401
    assert (await failures(live))["bad_session"] == 2
