"""The HTTP/1.1 protocol `sustain serve` runs: uvicorn's httptools protocol, plus a deadline
for each request, a cap on each request's head, a deadline for each write, and a cap on open
connections.

Why a subclass: uvicorn (0.55) has no deadline for receiving a request. `timeout_keep_alive`
only closes a connection idle *between* requests, so a client sending one header line every
few seconds holds its connection (and a file descriptor) forever; `limit_concurrency` answers
503 once a request head is complete, which a slow client never reaches, and closes nothing.
Thousands of such clients exhaust the process's file descriptors, after which nothing can be
accepted, not even the kubelet's /healthz, and no database or notifier connection can be
opened. So this protocol

* arms a timer when a connection opens, and when a new request starts on a kept-alive one;
  a connection that has not delivered the whole request (head and body) when it fires
  (SUSTAIN_HTTP_HEADER_TIMEOUT_S) is closed;
* counts the bytes of each request's head (request line and header lines) as they arrive,
  before the parser sees them: neither uvicorn nor httptools bounds a head, so one client
  could make the server hold hundreds of megabytes of header lines (and answer 200). Once a
  head has not ended within SUSTAIN_HTTP_MAX_HEAD_BYTES, the connection is answered 431 and
  closed, and nothing more of it is read;
* arms a write deadline whenever the transport stops taking a response (its buffer is past
  the high-water mark because the client does not read): a client that has not taken the
  next piece within SUSTAIN_EXPORT_WRITE_TIMEOUT_S is closed, so a reader that never
  reads holds neither a buffered response nor an export slot for long;
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
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from sustain.service.config import Settings
from sustain.service.connections import (
    ConnectionRegistry,
    fd_reserve,
    open_connection_cap,
)

logger = logging.getLogger(__name__)

HEAD_ENDS = (b"\n\r\n", b"\n\n")
"""How a request head ends: an empty line (CRLF, or a bare LF, which llhttp also takes)."""
TOO_LARGE_BODY = b"Request head too large"


def head_ends_within(tail: bytes, data: bytes, allowance: int) -> bool:
    """Whether a request head whose last bytes so far are `tail` (at most 2) ends within the
    next `allowance` bytes of `data`."""
    window = tail + data[:max(allowance, 0)]
    return any(end in window for end in HEAD_ENDS)


def head_too_large_answer() -> bytes:
    """The whole 431 answer, written straight to the socket (no app sees the request)."""
    return b"".join([STATUS_LINE[431],
                     b"content-type: text/plain; charset=utf-8\r\n",
                     b"content-length: ", str(len(TOO_LARGE_BODY)).encode("ascii"), b"\r\n",
                     b"connection: close\r\n\r\n", TOO_LARGE_BODY])


class GuardedConfig(uvicorn.Config):
    """uvicorn's Config, carrying the request deadline and the connection registry that
    GuardedHttpToolsProtocol enforces."""

    def __init__(self, app: Any, *, header_timeout_s: float, max_open_connections: int,
                 max_head_bytes: int, write_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, http=GuardedHttpToolsProtocol, ws="none", **kwargs)
        self.header_timeout_s = header_timeout_s
        """Seconds a client has to send a whole request, from its first byte (or from
        connecting)."""
        self.max_head_bytes = max_head_bytes
        """Bytes a request head (request line and header lines, with their line ends) may
        have; beyond: 431 and the connection closed."""
        self.write_timeout_s = write_timeout_s
        """Seconds a client may leave the server's writes waiting (the transport's buffer
        past its high-water mark) before its connection is closed."""
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
        self.max_head_bytes = config.max_head_bytes
        self.write_timeout_s = config.write_timeout_s
        self.registry = config.registry
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._in_head = True
        """The next bytes belong to a request head (none has begun, or its head has not
        ended); false from the end of a head to the end of its message."""
        self._head_bytes = 0
        """Bytes of the current head counted so far."""
        self._head_tail = b""
        """The current head's last two bytes (its end may straddle two reads)."""
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
        self._disarm_write()
        self.registry.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # answered 431 or shed: nothing more of it is read
        if self._in_head and not self._count_head(data):
            self._head_too_large()
            return
        if not self._busy and self._deadline is None:
            self._receiving()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._head_tail = b""
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # The next request's head starts here. Bytes of it that arrived in the same read as
        # this message's end were not counted (at most one read, 256 KiB).
        self._in_head = True
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

    # --- writes the client does not take ---
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.write_timeout_s,
                                                        self._not_reading)

    def resume_writing(self) -> None:
        self._disarm_write()
        super().resume_writing()

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _not_reading(self) -> None:
        self._write_deadline = None
        self.shed(f"took nothing of its answer for {self.write_timeout_s}s")

    # --- request heads ---
    def _count_head(self, data: bytes) -> bool:
        """Count `data` into the current head: false once the head cannot end within
        max_head_bytes."""
        allowance = self.max_head_bytes - self._head_bytes
        if len(data) > allowance and not head_ends_within(self._head_tail, data, allowance):
            return False
        self._head_bytes += len(data)
        self._head_tail = (self._head_tail + data[-2:])[-2:]
        return True

    def _head_too_large(self) -> None:
        """Answer 431 and close, reading nothing more: what is unread is discarded."""
        logger.debug("closing the connection of %s: request head over %d bytes", self.client,
                     self.max_head_bytes)
        self._disarm()
        self.registry.closed(self)
        self.transport.pause_reading()
        self.transport.write(head_too_large_answer())
        self.transport.close()

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
    """The uvicorn config of `sustain serve`: the settings' request deadline, head cap and
    write deadline, and their open-connection cap lowered, with a warning, to fit the file limit."""
    limit = file_limit()
    reserve = fd_reserve(settings)
    cap = open_connection_cap(settings.http_max_open_connections, limit, reserve)
    if cap < settings.http_max_open_connections:
        logger.warning(
            "serving at most %d open connections, not SUSTAIN_HTTP_MAX_OPEN_CONNECTIONS=%d: "
            "the file limit (ulimit -n) is %s and the rest of the replica may need %d; "
            "raise the limit to serve more", cap, settings.http_max_open_connections, limit,
            reserve)
    return GuardedConfig(app, header_timeout_s=settings.http_header_timeout_s,
                         max_open_connections=cap, max_head_bytes=settings.http_max_head_bytes,
                         write_timeout_s=settings.export_write_timeout_s, **kwargs)
