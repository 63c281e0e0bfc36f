"""A request's HTTP phases (docs/metrics.md#http-phases), as the transports time them with the
same monotonic clock as TTFT (perf_counter_ns), and only by reading it where the transport
is anyway: name resolution, the TCP handshake and the TLS handshake of a connection the
request opened itself, and TTFB (the request handed to the socket to its response head
received).

The lean HTTP/1.1 pool (http1_pool.py) keeps them on its connections and exchanges; httpx
(HTTP/2 endpoints, `http` checks) tells them through its `trace` extension, for which
HttpxPhases is the callback, and its name resolution through RESOLVING, which the egress
backend (egress_connect.py) times into the phases of the request it connects for.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any

from sustain.probes.measure.sample import NS_PER_MS


def phase_fields(*, dns_ns: int | None, connect_ns: int | None, tls_ns: int | None,
                 sent_ns: int | None, head_ns: int | None, reused: bool | None,
                 trace_id: str | None) -> dict[str, Any]:
    """The Measurement fields of a request's phases (ms), from its timings (ns)."""
    return {
        "dns_ms": None if dns_ns is None else dns_ns / NS_PER_MS,
        "connect_ms": None if connect_ns is None else connect_ns / NS_PER_MS,
        "tls_ms": None if tls_ns is None else tls_ns / NS_PER_MS,
        "ttfb_ms": None if sent_ns is None or head_ns is None
        else max(head_ns - sent_ns, 0) / NS_PER_MS,
        "connection_reused": reused, "trace_id": trace_id}


class HttpxPhases:
    """The `trace` extension of one request through httpx: the times of the events httpcore
    tells (connect_tcp, start_tls, send_request_headers, receive_response_headers), each
    stamped as it is told. A request that saw no connect_tcp went on a connection an earlier
    request opened. Over HTTP/2, requests started together share the connection the first of
    them opens, and count as reused."""

    __slots__ = ("connect_end", "connect_start", "dns_ns", "head_ns", "sent_ns", "tls_end",
                 "tls_start")

    def __init__(self) -> None:
        self.dns_ns: int | None = None
        """Name resolution, as the egress backend timed it (RESOLVING)."""
        self.connect_start: int | None = None
        self.connect_end: int | None = None
        self.tls_start: int | None = None
        self.tls_end: int | None = None
        self.sent_ns: int | None = None
        self.head_ns: int | None = None

    async def __call__(self, event: str, _info: dict[str, Any]) -> None:
        now = time.perf_counter_ns()
        name = event.partition(".")[2]
        if name == "connect_tcp.started":
            self.connect_start = now
        elif name == "connect_tcp.complete":
            self.connect_end = now
        elif name == "start_tls.started":
            self.tls_start = now
        elif name == "start_tls.complete":
            self.tls_end = now
        elif name == "send_request_headers.started" and self.sent_ns is None:
            self.sent_ns = now
        elif name == "receive_response_headers.complete":
            self.head_ns = now

    def fields(self, trace_id: str | None) -> dict[str, Any]:
        """The Measurement fields of what was told (phase_fields). The TCP connect is what
        connect_tcp took less the name resolution inside it. A request that was never sent
        (its connection could not be had) has no phases, as over the lean pool: its error
        class names the phase that failed."""
        if self.sent_ns is None:
            return phase_fields(dns_ns=None, connect_ns=None, tls_ns=None, sent_ns=None,
                                head_ns=None, reused=None, trace_id=trace_id)
        opened = self.connect_start is not None
        connect = None
        if self.connect_start is not None and self.connect_end is not None:
            connect = max(self.connect_end - self.connect_start - (self.dns_ns or 0), 0)
        tls = None if self.tls_start is None or self.tls_end is None \
            else self.tls_end - self.tls_start
        return phase_fields(dns_ns=self.dns_ns if opened else None, connect_ns=connect,
                            tls_ns=tls, sent_ns=self.sent_ns, head_ns=self.head_ns,
                            reused=not opened, trace_id=trace_id)


RESOLVING: ContextVar[HttpxPhases | None] = ContextVar("sustain_resolving", default=None)
"""The phases of the httpx request being sent in this task, for the egress backend to time
its name resolution into (httpcore connects in the task of the request that needs the
connection); None outside such a request."""
