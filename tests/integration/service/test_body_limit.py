"""Request bodies over SUSTAIN_MAX_BODY_BYTES are a 413 problem, never stored (a
100 MB extra_body must not be stored and returned by every later GET); a body the client
cuts short is the client going away, not a server error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from sustain.service.app import create_app
from tests.integration.service.helpers import app_settings, create_endpoint, serving
from tests.processes import ADMIN_HEADERS

CAP = 4096


@pytest.fixture
def app(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False, max_body_bytes=CAP))


@contextlib.asynccontextmanager
async def on_loopback(app: FastAPI) -> AsyncIterator[int]:
    """The app served by uvicorn on a loopback port, its lifespan left to the caller; the
    port."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn has no started event
                await asyncio.sleep(0.02)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


def probe_body(endpoint_id: int, padding: int) -> bytes:
    return json.dumps({"name": "p", "endpoint_id": endpoint_id, "interval_s": 60,
                       "workload": {"extra_body": {"pad": "x" * padding}}}).encode()


async def test_a_body_over_the_cap_is_413_and_nothing_is_stored(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", content=probe_body(endpoint["id"], 2 * CAP),
                       headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["title"] == "Content too large"
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_a_chunked_body_over_the_cap_is_413(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    body = probe_body(endpoint["id"], 2 * CAP)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent chunked
        for start in range(0, len(body), 512):
            yield body[start:start + 512]

    r = await api.post("/api/v1/probes", content=chunks(),
                       headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["status"] == 413
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_a_body_within_the_cap_is_handled_as_usual(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", content=probe_body(endpoint["id"], CAP // 2),
                       headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text


async def test_over_http_a_declared_length_is_refused_before_the_body_is_sent(
        app: FastAPI) -> None:
    """A real server on loopback: the client declares 100 MB, sends a few bytes, and gets
    its 413 without sending the rest."""
    async with serving(app), on_loopback(app) as port:  # the app's lifespan, run by the test
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        auth = "".join(f"{k}: {v}\r\n" for k, v in ADMIN_HEADERS.items())
        writer.write((f"POST /api/v1/probes HTTP/1.1\r\nHost: sustain\r\n{auth}"
                      "Content-Type: application/json\r\nContent-Length: 100000000\r\n"
                      "\r\n{\"name\": \"").encode())
        await writer.drain()
        async with asyncio.timeout(5):  # a hang guard only
            head = await reader.readuntil(b"\r\n\r\n")
            rest = await reader.read(4096)
        writer.close()
        assert head.startswith(b"HTTP/1.1 413"), head
        assert b"application/problem+json" in head.lower()
        assert json.loads(rest)["status"] == 413


async def test_a_body_cut_short_by_the_client_is_no_server_error(
        app: FastAPI, api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    """An agent's upload whose connection drops mid-body (an outage, a restart) is logged
    as the client going away, not as an unhandled error, and stores nothing."""
    caplog.set_level(logging.INFO)
    r = await api.post("/api/v1/keys", json={"name": "agent-edge", "role": "agent",
                                             "location": "edge"})
    assert r.status_code == 201, r.text
    async with on_loopback(app) as port:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write((f"POST /api/v1/agent/uploads?agent=a1 HTTP/1.1\r\nHost: sustain\r\n"
                      f"Authorization: Bearer {r.json()['key']}\r\n"
                      "Content-Type: application/msgpack\r\nContent-Length: 1000\r\n"
                      "\r\n\x8f\xa9upload_id").encode())
        await writer.drain()
        writer.close()
        async with asyncio.timeout(10):  # a hang guard only
            while not [m for m in caplog.messages if "client went away" in m]:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert (await api.get("/api/v1/runs")).json()["items"] == []
