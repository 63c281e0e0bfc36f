"""The audit log as ASGI middleware: every call that is not a read (POST, PUT, PATCH, DELETE,
on the API or the status page's sign-in) is recorded once its answer is sent: who (the key's
name, never the key), method, path, the object's id and the status. Bodies are never stored:
the only thing read from a response is the `id` of a created object."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sustain.service.api.auth import PRINCIPAL_SCOPE_KEY, SAFE_METHODS, Principal
from sustain.service.db import audit as audit_queries
from sustain.service.runtime import Replica

logger = logging.getLogger(__name__)

MAX_ID_BODY_BYTES = 64 * 1024
"""A created object's answer is read for its id only up to this size."""
MAX_PATH_CHARS = 512


def object_id(path_params: dict[str, Any], status: int, body: bytes) -> str | None:
    """The id a write named: its path parameter, or the `id` of what a 201 created."""
    for name, value in path_params.items():
        if name.endswith("_id") or name in ("fingerprint", "name"):
            return str(value)[:128]
    if status == 201 and body:
        try:
            created = json.loads(body)
        except ValueError:
            return None
        if isinstance(created, dict) and isinstance(created.get("id"), int | str):
            return str(created["id"])[:128]
    return None


class AuditMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        status = 500
        body = bytearray()

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and status == 201 \
                    and len(body) < MAX_ID_BODY_BYTES:
                body.extend(message.get("body", b"")[:MAX_ID_BODY_BYTES - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            await self._record(scope, status, bytes(body))

    async def _record(self, scope: Scope, status: int, body: bytes) -> None:
        replica: Replica | None = getattr(scope["app"].state, "sustain", None)
        if replica is None:
            return
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        try:
            async with replica.sessions() as session:
                await audit_queries.record(
                    session, actor=principal.name if principal else "anonymous",
                    key_id=principal.key_id if principal else None,
                    role=principal.role.value if principal else None,
                    method=scope["method"][:8], path=scope["path"][:MAX_PATH_CHARS],
                    object_id=object_id(scope.get("path_params") or {}, status, body),
                    status=status)
                await session.commit()
        except Exception as exc:  # noqa: BLE001 - the write happened; its record is best effort
            logger.warning("audit record of %s %s not stored: %s", scope["method"],
                           scope["path"][:MAX_PATH_CHARS], type(exc).__name__)
