"""Security headers as ASGI middleware: every response says nosniff and no-referrer and may
not be framed; sustain's own HTML pages also get a Content-Security-Policy that allows no
script at all and forms only to this origin, and are not cached (they show live data)."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
"""No script source at all; inline styles only (the page's stylesheet and bar widths)."""
DOCS_PATHS = ("/docs", "/redoc")
"""FastAPI's interactive docs load their own scripts; they only get frame-ancestors."""


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = str(scope["path"]).startswith(DOCS_PATHS)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Frame-Options", "DENY")
                if headers.get("content-type", "").startswith("text/html"):
                    headers.setdefault("Content-Security-Policy",
                                       "frame-ancestors 'none'" if docs else PAGE_CSP)
                    if not docs:
                        headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, with_headers)
