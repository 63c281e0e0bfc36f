"""The `serve` fixture: raw loopback servers (raw_http.py), closed after the test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.integration.probes.client.raw_http import Handler, Serve


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    yield start
    for server in servers:
        server.close()
