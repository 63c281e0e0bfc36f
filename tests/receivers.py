"""A webhook receiver on a loopback port, on its own thread: it records every request and
answers with the statuses it is told to (or stalls), so tests can watch notifiers deliver,
retry and give up."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn

Scope = MutableMapping[str, Any]


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    """time.monotonic() on arrival."""

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.statuses: list[int] = []
        """Statuses to answer, first to last; 200 once used up."""
        self.stall_s = 0.0
        self._lock = threading.Lock()
        self._server = uvicorn.Server(uvicorn.Config(
            self._app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
            lifespan="off", interface="asgi3", timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()),
                                        name="test-receiver", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answered(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received if path is None or r.path == path]

    def wait_for(self, check: Callable[[list[Received]], bool], timeout_s: float) -> float:
        """Seconds until `check(received)` held; AssertionError after `timeout_s`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if check(self.answered()):
                return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f"receiver: condition not met in {timeout_s}s; got "
                             f"{[(r.path, r.body[:200]) for r in self.answered()]}")

    async def _app(self, scope: Scope, receive: Callable[[], Any],
                   send: Callable[[dict[str, Any]], Any]) -> None:
        if scope["type"] != "http":
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        with self._lock:
            status = self.statuses.pop(0) if self.statuses else 200
            self.received.append(Received(
                scope["path"], {k.decode().lower(): v.decode() for k, v in scope["headers"]},
                b"".join(parts), time.monotonic()))
        if self.stall_s:
            await asyncio.sleep(self.stall_s)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    def __enter__(self) -> Receiver:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("receiver failed to start")
            time.sleep(0.01)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` answering on a loopback port, on a thread of its own: its root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
