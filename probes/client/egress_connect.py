"""Connecting only where the egress policy (egress.py) allows, judged on the resolved addresses.

A host name is resolved here, every address it resolved to is judged
(EgressPolicy.check_connection), and the connection is then opened to one of those very
addresses, so what was judged is what is reached: no second lookup that DNS could answer
differently (a rebinding name that says 10.0.0.1 first and 169.254.169.254 next). Both
transports connect this way: the lean HTTP/1.1 pool (http1_pool.py) calls `permitted_addresses`
itself; httpx clients (OpenAI over HTTP/2, `http` checks, notifier deliveries) get a network
backend that does (`egress_client`), and times the name resolution into the phases of the
request it connects for (phases.RESOLVING). A refusal is EgressDeniedError, which the
transports turn into the `egress_denied` error class of a sample (or a failed delivery),
never an exception escaping a run.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import typing

import httpcore
import httpx

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.phases import RESOLVING


class EgressDeniedError(Exception):
    """The policy refuses the connection; `reason` names the host or address and the rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"egress denied: {reason}")
        self.reason = reason


def egress_denial(exc: BaseException) -> EgressDeniedError | None:
    """The EgressDeniedError behind `exc` (httpx wraps it in its own errors), if any."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        if isinstance(current, EgressDeniedError):
            return current
        seen.append(current)
        current = current.__cause__ or current.__context__
    return None


def address_literal(host: str) -> str | None:
    """`host` as an address, when it is an address literal in its standard form (then there
    is no name to resolve); None for a name (or another spelling, which the resolver reads)."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


async def permitted_addresses(policy: EgressPolicy, host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (resolver order, without repeats) when the policy lets
    every one of them be reached; EgressDeniedError otherwise. socket.gaierror when the name
    does not resolve. An address literal in its standard form is checked as it is, without a
    trip through the resolver's thread pool on every new connection; other spellings
    (`2852039166`, `0xa9fea9fe`) go through the resolver, which says what they mean."""
    literal = address_literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    reason = policy.check_connection(
        host, [ipaddress.ip_address(address.partition("%")[0]) for address in addresses])
    if reason is not None:
        raise EgressDeniedError(reason)
    return addresses


class EgressBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the egress check in front of every TCP connect (unix
    sockets stay unimplemented, as in the base class: sustain never uses them)."""

    def __init__(self, policy: EgressPolicy,
                 inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int,
                          timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
                          local_address: str | None = None,
                          socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        phases = RESOLVING.get()
        try:
            async with asyncio.timeout(timeout):
                started = time.perf_counter_ns()
                addresses = await permitted_addresses(self.policy, host, port)
                if phases is not None and address_literal(host) is None:
                    phases.dns_ns = time.perf_counter_ns() - started
        except TimeoutError:
            raise httpcore.ConnectTimeout("name resolution timed out") from None
        except (socket.gaierror, EgressDeniedError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        failure: Exception = httpcore.ConnectError(f"{host} resolved to no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout,
                                                    local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def egress_client(policy: EgressPolicy, *, verify: bool = True, http2: bool = False,
                  limits: httpx.Limits | None = None, trust_env: bool = False,
                  follow_redirects: bool = False) -> httpx.AsyncClient:
    """An httpx client whose every connection goes through the egress check. httpx offers no
    public way to set httpcore's network backend, so the transport's connection pool is
    replaced by one built alike with EgressBackend (tests/integration/probes/client/
    test_egress_connect.py fails if an httpx upgrade bypasses it). With `trust_env`, requests
    that an environment proxy (HTTPS_PROXY, ...) carries go through httpx's own proxy
    transport: the proxy resolves and reaches the host, and is where egress is controlled."""
    limits = limits or httpx.Limits()
    transport = httpx.AsyncHTTPTransport(verify=verify, http2=http2, limits=limits,
                                         trust_env=trust_env)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(verify=verify, trust_env=trust_env),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry, http1=True, http2=http2,
        network_backend=EgressBackend(policy))
    return httpx.AsyncClient(transport=transport, follow_redirects=follow_redirects,
                             trust_env=trust_env)
