"""Security headers as ASGI middleware: every response says nosniff and no-referrer and may
not be framed; sustain's own HTML pages also get a Content-Security-Policy that allows no
script at all and forms only to this origin, and are not cached (they show live data). The
API docs page sets its own, narrower-than-default policy (docs_csp)."""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
"""No script source at all; inline styles only (the page's stylesheet and bar widths)."""

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_csp(html: str) -> str:
    """The policy of the API docs page `html`: scripts, styles and images from this origin
    only, plus exactly the page's own inline scripts (by their SHA-256), requests only to this
    origin (the OpenAPI document and "try it out"); nothing from any other origin. Swagger UI
    sets inline styles on its elements and draws its icons as data: images."""
    scripts = ["'self'", *(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html))]
    return (f"default-src 'none'; script-src {' '.join(scripts)}; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Frame-Options", "DENY")
                if headers.get("content-type", "").startswith("text/html"):
                    headers.setdefault("Content-Security-Policy", PAGE_CSP)
                    headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, with_headers)
