"""The HTTP/1.1 protocol `sustain serve` runs: uvicorn's httptools protocol, plus a deadline
for each request and a cap on open connections.

Why a subclass: uvicorn (0.55) has no deadline for receiving a request. `timeout_keep_alive`
only closes a connection idle *between* requests, so a client sending one header line every
few seconds holds its connection (and a file descriptor) forever; `limit_concurrency` answers
503 once a request head is complete, which a slow client never reaches, and closes nothing.
Thousands of such clients exhaust the process's file descriptors, after which nothing can be
accepted, not even the kubelet's /healthz, and no database or notifier connection can be
opened. So this protocol

* arms a timer when a connection opens, and when a new request starts on a kept-alive one;
  a connection that has not delivered the whole request (head and body) when it fires
  (SUSTAIN_HTTP_HEADER_TIMEOUT_SECONDS) is closed;
* counts itself in a ConnectionRegistry (sustain.service.connections): when a new connection
  would exceed the cap (SUSTAIN_HTTP_MAX_OPEN_CONNECTIONS, kept below the file limit), the
  connection idle or slow the longest is closed, so a fresh one such as /healthz is served.

The protocol is pinned to httptools (uvicorn's "auto" choice when it is installed, which
sustain requires) rather than left to "auto", so that the hooks below always apply.
WebSockets are off: the service has no WebSocket route, and an upgraded connection would
leave both the deadline and the cap.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from sustain.service.config import Settings
from sustain.service.connections import (
    ConnectionRegistry,
    fd_reserve,
    open_connection_cap,
)

logger = logging.getLogger(__name__)


class GuardedConfig(uvicorn.Config):
    """uvicorn's Config, carrying the request deadline and the connection registry that
    GuardedHttpToolsProtocol enforces."""

    def __init__(self, app: Any, *, header_timeout_s: float, max_open_connections: int,
                 **kwargs: Any) -> None:
        super().__init__(app, http=GuardedHttpToolsProtocol, ws="none", **kwargs)
        self.header_timeout_s = header_timeout_s
        """Seconds a client has to send a whole request, from its first byte (or from
        connecting)."""
        self.registry: ConnectionRegistry[GuardedHttpToolsProtocol] = ConnectionRegistry(
            max_open_connections)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """One client connection: sheddable while idle or receiving a request, busy while its
    request is answered (see the module docstring)."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if not isinstance(config, GuardedConfig):
            raise TypeError("GuardedHttpToolsProtocol runs under a GuardedConfig")
        self.header_timeout_s = config.header_timeout_s
        self.registry = config.registry
        self._deadline: asyncio.TimerHandle | None = None
        self._in_message = False
        """A request has begun arriving and has not arrived whole."""
        self._busy = False
        """A whole request is being answered."""

    # --- the connection's life ---
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        for victim in self.registry.opened(self):
            victim.shed("the server is at its open-connection cap")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.registry.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._busy and self._deadline is None and not self.transport.is_closing():
            self._receiving()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True

    def on_message_complete(self) -> None:
        self._in_message = False
        self._disarm()
        if self.cycle is not None and self.cycle.response_complete:
            self._idle()  # answered before the body was read whole (e.g. 413)
        else:
            self._busy = True
            self.registry.busy(self)
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self._in_message:
            self._receiving()  # the body of the answered request is still arriving
        elif self.cycle is None or self.cycle.response_complete:
            self._idle()
        # else a pipelined request, received whole, has just started: still busy

    # --- states ---
    def _receiving(self) -> None:
        self._busy = False
        self._arm()
        self.registry.sheddable(self)

    def _idle(self) -> None:
        self._busy = False
        self.registry.sheddable(self)

    def _arm(self) -> None:
        """Start the request deadline unless it is running already (it counts from the
        request's first byte, not from the latest)."""
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        self.shed(f"no whole request within {self.header_timeout_s}s")

    def shed(self, why: str) -> None:
        """Close the connection at once (abort: whatever it has not read is discarded, so
        its file descriptor is freed now, even from a client that reads nothing)."""
        self._disarm()
        self.registry.closed(self)
        if not self.transport.is_closing():
            logger.debug("closing the connection of %s: %s", self.client, why)
        self.transport.abort()


def file_limit() -> int | None:
    """The soft RLIMIT_NOFILE of this process (None: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def guarded_config(app: Any, settings: Settings, **kwargs: Any) -> GuardedConfig:
    """The uvicorn config of `sustain serve`: the settings' request deadline, and their
    open-connection cap lowered, with a warning, to fit the file limit."""
    limit = file_limit()
    reserve = fd_reserve(settings)
    cap = open_connection_cap(settings.http_max_open_connections, limit, reserve)
    if cap < settings.http_max_open_connections:
        logger.warning(
            "serving at most %d open connections, not SUSTAIN_HTTP_MAX_OPEN_CONNECTIONS=%d: "
            "the file limit (ulimit -n) is %s and the rest of the replica may need %d; "
            "raise the limit to serve more", cap, settings.http_max_open_connections, limit,
            reserve)
    return GuardedConfig(app, header_timeout_s=settings.http_header_timeout_seconds,
                         max_open_connections=cap, **kwargs)
