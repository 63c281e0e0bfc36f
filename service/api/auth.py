"""Who is calling, and may they: API keys (`Authorization: Bearer sk_sustain_…`) with roles.

`Access(read=…, write=…)` is attached to whole routers in `create_app`: safe methods need the
read role, everything else the write role, so a route cannot be added without a rule. The caller
found is left in the request scope for the audit log (service/api/audit.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sustain.service.db import keys as key_queries
from sustain.service.domain.keys import (
    Role,
    allows,
    bearer_token,
    key_hash,
    same_hash,
)
from sustain.service.errors import ForbiddenError, UnauthenticatedError
from sustain.service.runtime import Replica

logger = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PRINCIPAL_SCOPE_KEY = "sustain.principal"
"""Where the authenticated caller is left in the ASGI scope (read by the audit log)."""
BOOTSTRAP_ACTOR = "SUSTAIN_ADMIN_KEY"
SESSION_COOKIE = "sustain_session"

bearer_scheme = HTTPBearer(
    auto_error=False, scheme_name="apiKey",
    description="An API key (sk_sustain_…): `sustain keys create`, POST /api/v1/keys, or "
    "SUSTAIN_ADMIN_KEY.")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the key's name (never the key), its role and id."""

    name: str
    role: Role
    key_id: int | None = None


ANONYMOUS_VIEWER = Principal("anonymous", Role.viewer)


async def principal_for_hash(replica: Replica, digest: str) -> Principal | None:
    """The caller holding the key whose SHA-256 is `digest`: the bootstrap admin key, or an
    active stored key (its last use recorded), else None."""
    admin = replica.settings.admin_key
    if admin is not None and same_hash(digest, key_hash(admin.get_secret_value())):
        return Principal(BOOTSTRAP_ACTOR, Role.admin)
    async with replica.sessions() as session:
        stored = await key_queries.active_by_hash(session, digest)
        if stored is None:
            return None
        await key_queries.touch(session, stored, datetime.now(UTC))
        await session.commit()
    return Principal(stored.name, stored.role, stored.id)


async def principal_for_key(replica: Replica, key: str) -> Principal | None:
    """The caller holding `key` (compared through its hash, in constant time)."""
    return await principal_for_hash(replica, key_hash(key))


async def principal_for_cookie(replica: Replica, token: str | None) -> Principal | None:
    """The caller behind a status-page sign-in cookie (its key must still be valid)."""
    if not token or len(token) > 128:
        return None
    async with replica.sessions() as session:
        digest = await key_queries.session_key_hash(session, token, datetime.now(UTC))
    return None if digest is None else await principal_for_hash(replica, digest)


class Access:
    """A dependency that lets safe methods through with `read` and others with `write`."""

    def __init__(self, read: Role, write: Role) -> None:
        self.read = read
        self.write = write

    async def __call__(
        self, request: Request,
        _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    ) -> Principal:
        """`_credentials` only declares the scheme in the OpenAPI document; the header is
        parsed here so a malformed one is a 401 like an unknown key."""
        replica: Replica = request.app.state.sustain
        needed = self.read if request.method in SAFE_METHODS else self.write
        header = request.headers.get("authorization")
        principal: Principal | None
        cookie = request.cookies.get(SESSION_COOKIE)
        if header is None and cookie is not None and request.method in SAFE_METHODS:
            # a signed-in status-page user follows its links to the API (reads only: the
            # cookie is SameSite=Strict, and writes need the key itself)
            principal = await principal_for_cookie(replica, cookie)
            if principal is None:
                raise UnauthenticatedError("the sign-in has expired or its key was revoked")
        elif header is None:
            if replica.settings.anonymous_read and needed == Role.viewer:
                principal = ANONYMOUS_VIEWER
            else:
                raise UnauthenticatedError(
                    "this call needs an API key: Authorization: Bearer <key>")
        else:
            token = bearer_token(header)
            principal = None if token is None else await principal_for_key(replica, token)
            if principal is None:
                raise UnauthenticatedError("the API key is unknown, revoked or malformed")
        request.scope[PRINCIPAL_SCOPE_KEY] = principal
        if not allows(principal.role, needed):
            raise ForbiddenError(
                f"the {principal.role.value} role may not do this; it needs {needed.value}")
        return principal


def current_principal(request: Request) -> Principal:
    """The caller the router's Access dependency found (it runs before the route's own
    parameters)."""
    principal: Principal = request.scope[PRINCIPAL_SCOPE_KEY]
    return principal


PrincipalDep = Annotated[Principal, Depends(current_principal)]
"""The caller of a route that needs its name (e.g. who created a key or a silence)."""
