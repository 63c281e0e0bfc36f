"""Telling a client that its request used a deprecated name: one `Warning: 299` header per
note (RFC 9111's warn-code for a persistent warning, as the Kubernetes API sends them)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sustain.service.schemas.renamed import collecting_notes


def warning_header(note: str) -> tuple[bytes, bytes]:
    """A Warning header carrying `note` as its quoted text (quotes and backslashes escaped)."""
    text = note.replace("\\", "\\\\").replace('"', '\\"')
    return b"warning", f'299 - "{text}"'.encode("latin-1", "replace")


class DeprecationWarnings:
    """Adds the request's deprecation notes (schemas/renamed.py) to its response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with collecting_notes() as notes:

            async def send_with_warnings(message: Message) -> None:
                if message["type"] == "http.response.start" and notes:
                    headers = list(message.get("headers", []))
                    headers.extend(warning_header(note) for note in dict.fromkeys(notes))
                    message = {**message, "headers": headers}
                await send(message)

            await self.app(scope, receive, send_with_warnings)
