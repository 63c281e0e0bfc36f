"""Access weaknesses a security review found, each closed:

- sustain's own credentials (the admin key, the database URL and password) are refused
  anywhere *inside* a config value, an expanded `${NAME}` or a secret, not only as the whole
  value; the refusal names the field or reference, never the value;
- anonymous reads (SUSTAIN_ANONYMOUS_READ, which `sustain demo` sets on loopback) answer only a
  loopback Host (or one SUSTAIN_ALLOWED_HOSTS lists), so a page on evil.example whose name
  resolves to 127.0.0.1 (DNS rebinding) reads nothing from a victim's browser;
- the sign-in throttle cannot be reset: not by a sign-in with the attacker's own key, not by
  fresh IPv6 addresses of one /64, not by flooding its table with other sources.

Real HTTP over loopback (uvicorn, proxy headers trusted from loopback as `sustain serve` does,
which the tests use to be many clients) and a private PostgreSQL database."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.access.auth_failures import LOGIN_FAILURES_ALLOWED, LoginThrottle
from sustain.service.app import create_app, runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    samples_of,
    serving,
    wait_for_run,
)
from tests.integration.service.test_auth import make_key
from tests.integration.service.test_auth_failures import FORM, failures, over_http, source
from tests.integration.service.test_config_expansion import CONFIG
from tests.processes import TEST_ADMIN_KEY

# --- 1. credentials inside a value ----------------------------------------------------------



async def test_a_config_reload_that_assembles_the_admin_key_from_two_variables_is_refused(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Neither variable holds the key, so a check of each variable alone passes; the value
    they expand to holds it, wrapped in other text."""
    half = len(TEST_ADMIN_KEY) // 2
    monkeypatch.setenv("OWNER", "inference")
    monkeypatch.setenv("PART_A", TEST_ADMIN_KEY[:half])
    monkeypatch.setenv("PART_B", TEST_ADMIN_KEY[half:])
    config = tmp_path / "sustain.yaml"
    config.write_text(CONFIG)
    app = create_app(app_settings(database_url, auto_migrate=False, config=config,
                                  config_env="*", config_reload_s=0))
    async with serving(app) as api:
        config.write_text(CONFIG.replace("${OWNER}", "x-${PART_A}${PART_B}-y"))
        caplog.set_level(logging.INFO)
        assert await runtime_of(app).reloader.reload() is None  # type: ignore[union-attr]

        listed = (await api.get("/api/v1/endpoints")).json()["items"]
        assert [e["labels"] for e in listed] == [{"owner": "inference"}]
        metrics = (await api.get("/metrics")).text
        assert ({"result": "invalid"}, 1.0) in samples_of(metrics)["sustain_config_reloads_total"]
        assert f"{config}:6: endpoints[0].labels.owner: the value holds one of sustain's own " \
            "credentials (expanded from PART_A, PART_B)" in caplog.text
        for text in (caplog.text, metrics, str(listed)):
            assert TEST_ADMIN_KEY not in text


async def test_a_secret_reference_to_a_variable_wrapping_the_admin_key_is_a_422_by_name(
        api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_WRAPPED", f"Bearer {TEST_ADMIN_KEY}")
    r = await api.post("/api/v1/endpoints", json={
        "name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "auth_secret_ref": "env:TEST_WRAPPED"})
    assert r.status_code == 422, r.text
    errors = {e["field"]: e["message"] for e in r.json()["errors"]}
    assert "own credentials" in errors["auth_secret_ref"]
    assert "env:TEST_WRAPPED" in errors["auth_secret_ref"]
    assert TEST_ADMIN_KEY not in r.text
    assert (await api.get("/api/v1/endpoints")).json()["items"] == []


async def test_a_secret_file_changed_to_wrap_the_database_url_fails_the_run_by_name(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    """The file is fine when the endpoint is created and changed before a run: the measurement
    worker, which holds only digests of the credentials, finds the URL inside it."""
    secret = tmp_path / "sim-key"
    secret.write_text("sk-file-key\n")
    app = create_app(app_settings(database_url, auto_migrate=False, secret_dir=tmp_path))
    async with serving(app) as api:
        endpoint = await create_endpoint(api, simulator.base_url,
                                         auth_secret_ref=f"file:{secret}")
        probe = await create_probe(api, endpoint["id"], enabled=False)
        secret.write_text(f"url={database_url};\n")
        r = await api.post(f"/api/v1/probes/{probe['id']}/runs")
        assert r.status_code == 202, r.text
        run = await wait_for_run(api, int(r.json()["id"]))
    assert run["status"] == "failed"
    assert run["error"] == f"secret reference file:{secret}: refused, it holds one of " \
        "sustain's own credentials"
    assert database_url not in json.dumps(run)


# --- 2. anonymous reads and the Host header (DNS rebinding) -------------------------------

@pytest.fixture
def open_reads_app(database_url: str) -> FastAPI:
    """The demo's access: anonymous reads on, no allowed-hosts list."""
    return create_app(app_settings(database_url, auto_migrate=False, anonymous_read=True))


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io",
                                  "localhost.evil.example"])
async def test_anonymous_reads_refuse_a_page_of_another_name_resolving_to_loopback(
        open_reads_app: FastAPI, host: str) -> None:
    async with over_http(open_reads_app) as admin:
        await admin.post("/api/v1/endpoints", json={
            "name": "private-endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
        async with httpx.AsyncClient(base_url=admin.base_url, timeout=10) as browser:
            api = await browser.get("/api/v1/endpoints", headers={"Host": host})
            assert api.status_code == 401
            assert "private-endpoint" not in api.text
            page = await browser.get("/", headers={"Host": host})
            assert page.status_code in (303, 307)
            assert page.headers["location"] == "/login"
            assert "private-endpoint" not in page.text
        assert (await failures(admin))["missing_key"] == 1


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]:8000"])
async def test_anonymous_reads_answer_a_loopback_host(
        open_reads_app: FastAPI, host: str) -> None:
    async with over_http(open_reads_app) as admin:
        await admin.post("/api/v1/endpoints", json={
            "name": "demo-endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
        async with httpx.AsyncClient(base_url=admin.base_url, timeout=10) as browser:
            r = await browser.get("/api/v1/endpoints", headers={"Host": host})
            assert r.status_code == 200
            assert [e["name"] for e in r.json()["items"]] == ["demo-endpoint"]
            assert (await browser.get("/", headers={"Host": host})).status_code == 200


async def test_with_allowed_hosts_anonymous_reads_answer_the_listed_names_only(
        database_url: str) -> None:
    app = create_app(app_settings(database_url, auto_migrate=False, anonymous_read=True,
                                  allowed_hosts="status.example"))
    async with over_http(app) as admin, httpx.AsyncClient(base_url=admin.base_url,
                                                          timeout=10) as browser:
        listed = await browser.get("/api/v1/endpoints", headers={"Host": "status.example"})
        assert listed.status_code == 200
        for host in ("evil.example", "localhost"):
            refused = await browser.get("/api/v1/endpoints", headers={"Host": host})
            assert refused.status_code == 400, host


# --- 3. the sign-in throttle cannot be reset ------------------------------------------------

async def test_signing_in_with_the_attackers_own_key_resets_no_failures(
        app: FastAPI) -> None:
    async with over_http(app) as admin, httpx.AsyncClient(base_url=admin.base_url,
                                                          timeout=10) as anon:
        own = await make_key(admin, "attacker-viewer", "viewer")
        attacker = source("203.0.113.60", **FORM)
        for _ in range(LOGIN_FAILURES_ALLOWED - 1):
            r = await anon.post("/login", content="key=sk_sustain_guess", headers=attacker)
            assert r.status_code == 401
        signed_in = await anon.post("/login", content=f"key={own}", headers=attacker)
        assert signed_in.status_code == 303  # still under the limit: the key is checked
        last = await anon.post("/login", content="key=sk_sustain_guess", headers=attacker)
        assert last.status_code == 401  # the tenth failure, counted with the nine before
        for key in (own, "sk_sustain_guess"):
            r = await anon.post("/login", content=f"key={key}", headers=attacker)
            assert r.status_code == 429
            assert "sustain_session" not in r.cookies
        assert (await failures(admin))["login_failed"] == LOGIN_FAILURES_ALLOWED


async def test_fresh_addresses_of_one_ipv6_64_share_its_failures(app: FastAPI) -> None:
    async with over_http(app) as admin, httpx.AsyncClient(base_url=admin.base_url,
                                                          timeout=10) as anon:
        viewer = await make_key(admin, "person", "viewer")
        for n in range(LOGIN_FAILURES_ALLOWED):
            r = await anon.post("/login", content="key=sk_sustain_guess",
                                headers=source(f"2001:db8:77:1::{n + 1:x}", **FORM))
            assert r.status_code == 401
        for address in ("2001:db8:77:1::ffff", "2001:db8:77:1:abcd:1:2:3"):
            r = await anon.post("/login", content=f"key={viewer}",
                                headers=source(address, **FORM))
            assert r.status_code == 429, address
        other = await anon.post("/login", content=f"key={viewer}",
                                headers=source("2001:db8:77:2::1", **FORM))
        assert other.status_code == 303


async def test_a_flood_of_sources_throttles_the_flood_and_never_frees_a_throttled_source(
        app: FastAPI) -> None:
    """The table is made small (MAX_SOURCES is 10,000 in service; the unit tests flood that
    one with 20,000): tracked sources keep their counts, new ones share one."""
    cap = 20
    app.state.login_throttle = LoginThrottle(max_sources=cap)
    async with over_http(app) as admin, httpx.AsyncClient(base_url=admin.base_url,
                                                          timeout=10) as anon:
        viewer = await make_key(admin, "person", "viewer")
        victim_guesser = source("203.0.113.70", **FORM)
        for _ in range(LOGIN_FAILURES_ALLOWED):
            await anon.post("/login", content="key=sk_sustain_guess", headers=victim_guesser)
        statuses = []
        for n in range(2 * cap + LOGIN_FAILURES_ALLOWED):
            r = await anon.post("/login", content="key=sk_sustain_guess",
                                headers=source(f"2001:db8:{n + 1:x}::1", **FORM))
            statuses.append(r.status_code)
        # the table fills, then the new sources share one count, which is throttled
        assert statuses.count(401) == (cap - 1) + LOGIN_FAILURES_ALLOWED
        assert statuses[-1] == 429
        assert len(app.state.login_throttle) == cap
        r = await anon.post("/login", content=f"key={viewer}", headers=victim_guesser)
        assert r.status_code == 429  # still throttled, right key or not
