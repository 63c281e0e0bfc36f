"""The Host header a client sends: no redirect repeats it back, and with
SUSTAIN_ALLOWED_HOSTS only the names listed are answered (health checks and /metrics
whatever the Host, as kubelet and Prometheus reach a pod by its address)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import create_app
from tests.integration.service.helpers import app_settings, serving


async def test_trailing_slash_redirect_is_a_path_never_the_host_the_client_sent(
        api: httpx.AsyncClient) -> None:
    r = await api.get("/api/v1/endpoints/?limit=5", headers={"Host": "evil.example"})
    assert r.status_code in (307, 308)
    assert r.headers["location"] == "/api/v1/endpoints?limit=5"
    followed = await api.get(r.headers["location"])
    assert followed.status_code == 200


async def test_sign_in_and_out_redirect_to_paths(api: httpx.AsyncClient) -> None:
    out = await api.post("/logout", headers={"Host": "evil.example"})
    assert out.status_code == 303
    assert out.headers["location"] == "/login"


@pytest.fixture
def allowlisted_app(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False,
                                   allowed_hosts="sustain.example, *.sustain.internal"))


async def test_allowed_hosts_refuses_any_other_host_but_answers_health_checks(
        allowlisted_app: FastAPI) -> None:
    async with serving(allowlisted_app) as api:
        refused = await api.get("/api/v1/endpoints", headers={"Host": "evil.example"})
        assert refused.status_code == 400
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["errors"] == [{"field": "header.host",
                                             "message": "not an allowed host"}]
        assert refused.headers["x-content-type-options"] == "nosniff"
        slash = await api.get("/api/v1/endpoints/", headers={"Host": "evil.example"})
        assert slash.status_code == 400
        assert "location" not in slash.headers
        page = await api.get("/login", headers={"Host": "sustain.example.evil.example"})
        assert page.status_code == 400
        for path in ("/healthz", "/readyz", "/metrics"):
            probe = await api.get(path, headers={"Host": "10.1.2.3:8000"})
            assert probe.status_code == 200, path
        for host in ("sustain.example", "SUSTAIN.example:8443", "api.sustain.internal"):
            allowed = await api.get("/api/v1/endpoints", headers={"Host": host})
            assert allowed.status_code == 200, host


@pytest.mark.parametrize("bad", ["evil example", "*evil.example", "sustain.*", "a..b",
                                 "host:8000", "::1"])
def test_allowed_hosts_setting_refuses_what_is_not_a_host_pattern(bad: str) -> None:
    with pytest.raises(ValueError, match="allowed_hosts"):
        app_settings("postgresql://localhost/x", allowed_hosts=f"sustain.example,{bad}")
