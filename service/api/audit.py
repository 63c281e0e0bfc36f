"""The audit log as ASGI middleware: every call that is not a read (POST, PUT, PATCH, DELETE,
on the API or the status page's sign-in) is recorded once its answer is sent: who (the key's
name, never the key), method, path, the object's id and the status. Bodies are never stored:
the only thing read from a response is the `id` of a created object.

Calls by an authenticated caller are all recorded. Refused calls (no key, a bad key, a role
that may not, a failed sign-in) and other calls without a caller (a POST to no route) are only
sampled: the first per source and reason each minute (AuditSampler), so anonymous traffic
cannot fill the table; every refusal is still counted in sustain_auth_failures_total."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sustain.service.access.auth_failures import AuditSampler, AuthFailure
from sustain.service.api.auth import (
    AUTH_FAILURE_SCOPE_KEY,
    PRINCIPAL_SCOPE_KEY,
    SAFE_METHODS,
    Principal,
    client_source,
)
from sustain.service.db import audit as audit_queries
from sustain.service.runtime import Replica

logger = logging.getLogger(__name__)

MAX_ID_BODY_BYTES = 64 * 1024
"""A created object's answer is read for its id only up to this size."""
MAX_PATH_CHARS = 512
UNAUTHENTICATED = "anonymous"
"""The sampling reason of a call without a caller that no check refused (e.g. a 404)."""


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
        self.sampler = AuditSampler()
        """This app's memory of refusals already written (per replica, bounded)."""

    def sampled_out(self, scope: Scope) -> bool:
        """Whether a call is left out of the log: one without an authenticated caller, or
        refused, whose source and reason already have a row this minute."""
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        reason: AuthFailure | None = scope.get(AUTH_FAILURE_SCOPE_KEY)
        if principal is not None and reason is None:
            return False
        return not self.sampler.admit(client_source(scope), reason or UNAUTHENTICATED)

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
        if replica is None or self.sampled_out(scope):
            return
        principal: Principal | None = scope.get(PRINCIPAL_SCOPE_KEY)
        try:
            async with replica.api_sessions() as session:
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
