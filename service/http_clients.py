"""The probe HTTP clients, one per (TLS verification, HTTP/2) setting, owned by the app
lifespan."""

from __future__ import annotations

import httpx


class ClientPool:
    """Shared connection pools, so repeated runs reuse connections like a real client would."""

    def __init__(self, max_connections: int) -> None:
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._clients: dict[tuple[bool, bool], httpx.AsyncClient] = {}

    def get(self, *, tls_verify: bool, http2: bool = False) -> httpx.AsyncClient:
        key = (tls_verify, http2)
        client = self._clients.get(key)
        if client is None:
            client = httpx.AsyncClient(limits=self._limits, verify=tls_verify, http2=http2,
                                       follow_redirects=False, trust_env=False)
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
