"""Fixtures of the probe library's integration tests: a client set per test, both client
transports, and a frozen heap.

The service freezes its heap after start-up so that full collections skip long-lived objects
(service/api/app.py, gc.freeze); the test process has collected much more by now (earlier
suites load chart schemas, browsers, apps). Freezing what exists before these tests gives
them the service's conditions."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import pytest

from sustain.probes.client.clients import HttpClients


@pytest.fixture(scope="module", autouse=True)
def frozen_heap() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
async def client() -> AsyncIterator[HttpClients]:
    async with HttpClients() as clients:
        yield clients


@pytest.fixture(params=[False, True], ids=["lean-http1", "httpx"])
def via_httpx(request: pytest.FixtureRequest) -> bool:
    """Both client paths: the lean HTTP/1.1 transport, and httpx (HTTP/2 endpoints' path;
    against a plain-http server it speaks HTTP/1.1 too)."""
    return bool(request.param)
