"""The Host header, which a client chooses freely: only the names in SUSTAIN_ALLOWED_HOSTS are
answered (Starlette's TrustedHostMiddleware, with a problem+json refusal), and no redirect
repeats a Host back (a redirect to this app is a path, never http://<Host>/...), so a
forged Host cannot send a browser or a cache elsewhere."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import URL, MutableHeaders
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sustain.service.api.errors import problem

UNCHECKED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Answered whatever the Host: kubelet probes and Prometheus scrapes reach a pod by its IP
address. None of them redirects or repeats the Host; /metrics keeps its own key check
(SUSTAIN_METRICS_AUTH)."""
_HOST_ALLOWED = "sustain.host_allowed"


class AllowedHosts:
    """Refuses (400 problem+json, naming the Host header) a request whose Host is not one of
    `patterns` (see sustain.service.access.hosts), except on UNCHECKED_PATHS."""

    def __init__(self, app: ASGIApp, patterns: tuple[str, ...]) -> None:
        self.app = app
        self.any_host = not patterns or "*" in patterns
        self.guard = TrustedHostMiddleware(self._allowed, allowed_hosts=list(patterns) or ["*"],
                                           www_redirect=False)

    async def _allowed(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[_HOST_ALLOWED] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.any_host or scope["type"] != "http" or scope["path"] in UNCHECKED_PATHS:
            await self.app(scope, receive, send)
            return

        async def passed_only(message: Message) -> None:
            # the guard's own plain-text refusal is dropped; ours follows below
            if scope.get(_HOST_ALLOWED):
                await send(message)

        await self.guard(scope, receive, passed_only)
        if not scope.get(_HOST_ALLOWED):
            refusal = problem(Request(scope), 400, "Unknown host",
                              "Host: not a name this service answers for "
                              "(SUSTAIN_ALLOWED_HOSTS)",
                              errors=[{"field": "header.host",
                                       "message": "not an allowed host"}])
            await refusal(scope, receive, send)


def path_only(location: str, own_netloc: str) -> str:
    """`location` without scheme and host when it points at `own_netloc` (this request's Host,
    as Starlette builds redirect URLs from it); any other location unchanged. Leading slashes
    and backslashes are collapsed so the path cannot read as a scheme-relative URL
    (//other.example/, which browsers also accept as /\\other.example/)."""
    parts = urlsplit(location)
    if parts.scheme not in ("http", "https") or parts.netloc.lower() != own_netloc.lower():
        return location
    return "/" + urlunsplit(("", "", parts.path, parts.query, parts.fragment)).lstrip("/\\")


class PathOnlyRedirects:
    """Rewrites the Location of a redirect to this app (e.g. Starlette's trailing-slash
    redirect, which is built from the Host header) to a path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def relative(message: Message) -> None:
            if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
                headers = MutableHeaders(scope=message)
                location = headers.get("location")
                if location is not None:
                    headers["location"] = path_only(location, URL(scope=scope).netloc)
            await send(message)

        await self.app(scope, receive, relative)
