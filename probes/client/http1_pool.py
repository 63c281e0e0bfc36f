"""A lean HTTP/1.1 client for measuring: asyncio protocols, the httptools (llhttp) parser, and
body bytes handed to the caller, stamped with their arrival time (perf_counter_ns), in the
same call that read them from the socket. It knows HTTP, not OpenAI: http1.py sends OpenAI
requests through it.

Why not httpx for this path: with many streams in flight, httpcore's pool re-scans every
connection for every request and every chunk travels through anyio and h11; at 64 concurrent
streams that made one core the bottleneck and added tens of milliseconds to TTFT (see
benchmarks/RESULTS.md). httpx stays for HTTP/2 endpoints and plain `http` checks.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.egress_connect import (
    EgressDeniedError,
    address_literal,
    permitted_addresses,
)
from sustain.probes.client.phases import phase_fields

RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Set by the transport itself; the same names among a caller's headers are dropped."""

FRAMING_LIMIT = 64 * 1024
"""Bytes a response may send in a row without any body: its head (and any 1xx interim heads),
chunk-size lines, trailers. Past it the response fails as `protocol`. Heads are a few KiB;
the cap exists because the parser (httptools) grows a header line by copying it on every read,
so a never-ending header or trailer line would cost quadratic time on the event loop."""
FRAMING_TOO_LARGE = "response head or chunk framing over 64 KiB"

BodyCallback = Callable[[bytes, int], None]
"""on_body(chunk, arrival_ns): called for each piece of the response body as it arrives."""


class TransportError(Exception):
    """A failure below HTTP; `kind` is one of connect, dns, tls, timeout_connect, protocol,
    egress_denied (the egress policy refused every address), closed (the peer closed the
    connection before the response ended)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> tuple[Origin, str]:
        """The origin of `url` and the request target (path and query)."""
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise TransportError("protocol", f"invalid URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError("protocol", "URL must be http:// or https:// with a host")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.scheme, parts.hostname, port), target

    @property
    def host_header(self) -> str:
        """The `host` header for this origin: the port only where it is not the scheme's."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port in (80, 443) else f"{host}:{self.port}"


@lru_cache(maxsize=256)
def _request_target(url: str) -> tuple[Origin, str, str]:
    """`url`'s origin, request target and host header, parsed once per URL: a probe sends
    every request to the same URL, and parsing it again costs more than the rest of a
    request's head. Bounded: 256 URLs at most are kept."""
    origin, path = Origin.of(url)
    return origin, path, origin.host_header


@dataclass(slots=True)
class Exchange:
    """One request on one connection: its response head, body callback and completion."""

    on_body: BodyCallback
    head: asyncio.Future[tuple[int, dict[str, str]]]
    done: asyncio.Future[int]
    """Resolves to the arrival time (ns) of the end of the response."""
    headers: dict[str, str] = field(default_factory=dict)
    connection: _Connection | None = None
    reused: bool = False
    """Whether it went on a connection an earlier exchange opened (else it opened one: its
    connection's dns_ns, connect_ns and tls_ns are this exchange's phases)."""
    sent_ns: int = 0
    """When the request was handed to the socket (perf_counter_ns), its connection ready."""
    head_ns: int | None = None
    """When the data that completed the response head arrived; None until it did."""

    def phases(self, trace_id: str | None) -> dict[str, Any]:
        """The Measurement fields of this exchange's phases (phases.phase_fields): its
        connection's opening when it opened it, and its TTFB."""
        opened = None if self.reused else self.connection
        return phase_fields(
            dns_ns=None if opened is None else opened.dns_ns,
            connect_ns=None if opened is None else opened.connect_ns,
            tls_ns=None if opened is None else opened.tls_ns,
            sent_ns=self.sent_ns or None, head_ns=self.head_ns, reused=self.reused,
            trace_id=trace_id)

    def fail(self, error: BaseException) -> None:
        for future in (self.head, self.done):
            if not future.done():
                future.set_exception(error)
                future.exception()  # marked retrieved: the caller may only await one


class _Connection(asyncio.Protocol):
    def __init__(self, pool: ConnectionPool, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: Exchange | None = None
        self.closed = False
        self.reusable = False
        self.arrival_ns = 0
        self.interim = False
        """The message being parsed is a 1xx interim response, to be skipped."""
        self.framing_run = 0
        """Bytes read in a row, for the current exchange, that carried no body."""
        self.body_in_read = False
        self.single_use = False
        """Opened for one request (`connection: new`): closed once its response ended."""
        self.dns_ns: int | None = None
        """How long opening it took: name resolution (None for an address literal), the TCP
        handshake and the TLS one (None over plain http), in ns (phases.py)."""
        self.connect_ns: int | None = None
        self.tls_ns: int | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.arrival_ns = time.perf_counter_ns()
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted
            self.close()
            return
        self.body_in_read = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._abort(TransportError("protocol", f"invalid HTTP response ({exc})"))
            return
        if self.exchange is not exchange:  # complete (or given up) within this read
            return
        if self.body_in_read:
            self.framing_run = 0
        else:
            self.framing_run += len(data)
            if self.framing_run > FRAMING_LIMIT:
                self._abort(TransportError("protocol", FRAMING_TOO_LARGE))

    def eof_received(self) -> bool | None:
        self._abort(TransportError("closed", "server closed the connection"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (asyncio's)
        self.closed = True
        self.pool.forget(self)
        if self.exchange is not None:
            self.exchange.fail(TransportError("closed", "connection lost"))
            self.exchange = None

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if self.exchange is not None:
            self.exchange.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        status = self.parser.get_status_code()
        self.interim = 100 <= status < 200 and status != 101
        if exchange is None or self.interim:
            if exchange is not None:
                exchange.headers.clear()
            return
        if not exchange.head.done():
            exchange.head_ns = self.arrival_ns
            exchange.head.set_result((status, exchange.headers))

    def on_body(self, body: bytes) -> None:
        self.body_in_read = True
        if self.exchange is not None:
            self.exchange.on_body(body, self.arrival_ns)

    def on_message_complete(self) -> None:
        if self.interim:  # e.g. 103 Early Hints: the real response follows
            self.interim = False
            return
        exchange, self.exchange = self.exchange, None
        self.reusable = self.parser.should_keep_alive() and not self.single_use
        if exchange is not None and not exchange.done.done():
            exchange.done.set_result(self.arrival_ns)
        if self.reusable:
            self.pool.release(self)
        else:
            self.close()

    def _abort(self, error: TransportError) -> None:
        if self.exchange is not None:
            self.exchange.fail(error)
            self.exchange = None
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class ConnectionPool:
    """Keep-alive connections per origin, most recently used first. Not thread-safe; one per
    event loop. New connections go only where `egress` allows, judged on the addresses the
    host resolved to (egress_connect.py)."""

    def __init__(self, *, tls_verify: bool = True, egress: EgressPolicy | None = None) -> None:
        self._egress = egress or EgressPolicy()
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._tls_verify = tls_verify
        self._ssl: ssl.SSLContext | None = None
        """Made at the first https connection: loading the system's CA certificates costs
        tens of milliseconds of CPU, which a pool that only speaks plain http never pays."""

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context()
            if not self._tls_verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl = context
        return self._ssl

    @property
    def idle_connections(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    async def _connect(self, origin: Origin, timeout_s: float) -> _Connection:
        """A new connection to `origin`, timed by phase (its dns_ns, connect_ns, tls_ns)."""
        loop = asyncio.get_running_loop()
        tls = self._tls() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(timeout_s):
                started = time.perf_counter_ns()
                addresses = await permitted_addresses(self._egress, origin.host, origin.port)
                resolved = time.perf_counter_ns()
                protocol = await self._open_first(loop, origin, addresses, tls)
        except TimeoutError:
            raise TransportError("timeout_connect", "connect timed out") from None
        except EgressDeniedError as exc:
            raise TransportError("egress_denied", str(exc)) from None
        except socket.gaierror as exc:
            raise TransportError("dns", str(exc)) from None
        except ssl.SSLError as exc:
            raise TransportError("tls", exc.reason or type(exc).__name__) from None
        except OSError as exc:
            # sock_connect's own words ("Connect call failed (...)") name no cause: the
            # errno's do ("Connection refused")
            raise TransportError("connect", os.strerror(exc.errno) if exc.errno
                                 else str(exc) or type(exc).__name__) from None
        if address_literal(origin.host) is None:
            protocol.dns_ns = resolved - started
        self._open.add(protocol)
        return protocol

    async def _open_first(self, loop: asyncio.AbstractEventLoop, origin: Origin,
                          addresses: list[str], tls: ssl.SSLContext | None) -> _Connection:
        """A connection to the first of `addresses` that accepts one (TLS names the host).
        The TCP handshake (sock_connect) and the TLS one (create_connection over the
        connected socket) are awaited apart, so each is timed on its own."""
        failure: OSError = OSError(f"{origin.host} resolved to no address")
        for address in addresses:
            sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET,
                                 socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                begun = time.perf_counter_ns()
                await loop.sock_connect(sock, (address, origin.port))
                connected = time.perf_counter_ns()
                _, protocol = await loop.create_connection(
                    lambda: _Connection(self, origin), sock=sock, ssl=tls,
                    server_hostname=origin.host if tls else None)
            except ssl.SSLError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            except BaseException:  # cancelled, timed out: the socket is not left open
                sock.close()
                raise
            protocol.connect_ns = connected - begun
            if tls is not None:
                protocol.tls_ns = time.perf_counter_ns() - connected
            return protocol
        raise failure

    def release(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.origin, [])
        if not connection.closed and connection not in idle:
            idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    async def start(self, method: str, url: str, headers: Mapping[str, str], body: bytes,
                    on_body: BodyCallback, *, connect_timeout_s: float,
                    fresh: bool = False) -> Exchange:
        """Send a request; the returned exchange's futures give the head and the end. With
        `fresh`, on a connection of its own (`connection: new`, what a new user pays),
        closed once its response ended."""
        origin, path, host = _request_target(url)
        lines = [f"{method} {path} HTTP/1.1", f"host: {host}", f"content-length: {len(body)}"]
        if fresh:
            lines.append("connection: close")
        lines.extend(f"{name}: {value}" for name, value in headers.items()
                     if name.lower() not in RESERVED_HEADERS)
        try:
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        except UnicodeEncodeError:
            raise TransportError("protocol", "a request header is not latin-1 text") from None
        idle = None if fresh else self._idle.get(origin)
        connection = None
        while idle:
            candidate = idle.pop()
            if not candidate.closed:
                connection = candidate
                break
        reused = connection is not None
        if connection is None:
            connection = await self._connect(origin, connect_timeout_s)
            connection.single_use = fresh
        loop = asyncio.get_running_loop()
        exchange = Exchange(on_body=on_body, head=loop.create_future(),
                            done=loop.create_future(), connection=connection, reused=reused)
        connection.exchange = exchange
        connection.framing_run = 0
        assert connection.transport is not None
        exchange.sent_ns = time.perf_counter_ns()
        connection.transport.write(head + body)
        return exchange

    @staticmethod
    def abandon(exchange: Exchange) -> None:
        """Give up an exchange (timeout, or the caller stopped reading): its connection is
        closed, since a response still arriving on it would confuse the next request."""
        if exchange.connection is not None and exchange.connection.exchange is exchange:
            exchange.connection.exchange = None
            exchange.connection.close()
        exchange.fail(TransportError("closed", "abandoned"))

    async def aclose(self) -> None:
        """Close every connection, idle or in use."""
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()
