"""The simulator's ASGI plumbing: the types of an ASGI call, reading a request's body and
headers, writing JSON answers and errors, waiting for a deadline or a client that gives up.
Bare ASGI, so the simulator adds as little latency of its own as possible."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def sleep_until(deadline: float) -> None:
    """Return once perf_counter() has reached `deadline` (s), never before: the event loop may
    wake a timer a little early, and a later deadline equal to this one must find itself due
    (so the events after it join the same write)."""
    while (delay := deadline - time.perf_counter()) > 0:  # noqa: ASYNC110 (a clock, no event)
        await asyncio.sleep(delay)

def json_body(raw: bytes) -> dict[str, Any] | str:
    try:
        body = json.loads(raw)
    except ValueError:
        return "invalid JSON"
    return body if isinstance(body, dict) else "body must be a JSON object"


def header(scope: Scope, wanted: bytes) -> bytes | None:
    """The value of the request's header `wanted` (lower case), or None."""
    return next((value for name, value in scope["headers"] if name == wanted), None)


def request_id(scope: Scope) -> str | None:
    """The request's x-request-id, which names its line of the truth log."""
    value = header(scope, b"x-request-id")
    return None if value is None else value.decode("latin-1")


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def send_json(send: Send, status: int, payload: dict[str, Any],
                headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def send_raw(send: Send, body: bytes) -> None:
    """A 200 JSON answer of exactly `body` (which need not be valid JSON)."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, status: int, message: str) -> None:
    await send_json(send, status, {"error": {"message": message, "code": status}})


async def hang(receive: Receive, seconds: float) -> bool:
    """Hold the request open; False when the client gave up first."""
    try:
        message = await asyncio.wait_for(receive(), timeout=seconds)
    except TimeoutError:
        return True
    return bool(message["type"] != "http.disconnect")
