"""A cap on request bodies (SUSTAIN_MAX_BODY_BYTES): a larger body is a 413 problem, found
before the body is read whole, so a caller cannot make the service buffer or store 100 MB.

A pure ASGI middleware. A Content-Length over the cap is refused before the app runs; a body
without one (chunked) is counted as it arrives, and the chunk that crosses the cap raises
BodyTooLarge out of `receive`. FastAPI passes an HTTPException raised while it reads a body on
to the exception handlers (errors.py renders it); one that escapes the app before it answered
is rendered here, with the same problem().
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sustain.service.api.errors import problem


class BodyTooLarge(HTTPException):
    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request bodies are limited to {max_bytes} bytes "
                              "(SUSTAIN_MAX_BODY_BYTES)")


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, if it has a usable one."""
    value = Headers(scope=scope).get("content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send, BodyTooLarge(self.max_bytes))
            return
        received = 0
        answered = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as exc:
            if answered:
                raise
            await self._refuse(scope, receive, send, exc)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, exc: BodyTooLarge) -> None:
        response = problem(Request(scope), 413, "Content too large", str(exc.detail))
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
