"""The connections runs share: the lean HTTP/1.1 pool for OpenAI requests, and httpx clients
for HTTP/2 endpoints and plain `http` checks, all connecting only where the egress policy
allows (by default: anywhere but link-local and cloud metadata addresses). Created and closed
by their owner (the service lifespan, the CLI); one per event loop."""

from __future__ import annotations

import httpx

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.egress_connect import egress_client
from sustain.probes.client.http1_pool import ConnectionPool


class HttpClients:
    def __init__(self, max_connections: int = 1000, egress: EgressPolicy | None = None) -> None:
        self.egress = egress or EgressPolicy()
        self._limits = httpx.Limits(max_connections=max_connections,
                                    max_keepalive_connections=max_connections)
        self._pools: dict[bool, ConnectionPool] = {}
        self._httpx: dict[tuple[bool, bool, bool], httpx.AsyncClient] = {}

    def pool(self, *, tls_verify: bool = True) -> ConnectionPool:
        pool = self._pools.get(tls_verify)
        if pool is None:
            pool = self._pools[tls_verify] = ConnectionPool(tls_verify=tls_verify,
                                                            egress=self.egress)
        return pool

    def httpx(self, *, tls_verify: bool = True, http2: bool = False,
              fresh: bool = False) -> httpx.AsyncClient:
        """The httpx client for these settings; with `fresh` (`connection: new`), one that
        keeps no idle connection, so each request opens its own (but over HTTP/2, where
        requests in flight at once share the connection they find open)."""
        key = (tls_verify, http2, fresh)
        client = self._httpx.get(key)
        if client is None:
            limits = self._limits if not fresh else httpx.Limits(
                max_connections=self._limits.max_connections, max_keepalive_connections=0)
            client = egress_client(self.egress, verify=tls_verify, http2=http2,
                                   limits=limits)
            self._httpx[key] = client
        return client

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        for client in self._httpx.values():
            await client.aclose()
        self._pools.clear()
        self._httpx.clear()

    async def __aenter__(self) -> HttpClients:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
