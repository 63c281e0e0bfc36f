"""Who is calling, and may they: API keys (`Authorization: Bearer sk_sustain_…`) with roles.

`Access(read=…, write=…)` is attached to whole routers in `create_app`: safe methods need the
read role, everything else the write role, so a route cannot be added without a rule. The caller
found is left in the request scope for the audit log (service/api/audit.py); a refusal is
counted (sustain_auth_failures_total{reason}) and its reason left there instead, so the audit
log samples refusals rather than writing one row each."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import Scope

from sustain.service.access.auth_failures import AuthFailure
from sustain.service.access.hosts import anonymous_host, parse_allowed_hosts
from sustain.service.access.keys import (
    Role,
    allows,
    bearer_token,
    key_hash,
    same_hash,
)
from sustain.service.config import Settings
from sustain.service.db import keys as key_queries
from sustain.service.errors import ForbiddenError, UnauthenticatedError
from sustain.service.runtime import Replica

logger = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PRINCIPAL_SCOPE_KEY = "sustain.principal"
"""Where the authenticated caller is left in the ASGI scope (read by the audit log)."""
AUTH_FAILURE_SCOPE_KEY = "sustain.auth_failure"
"""Where a refused call's AuthFailure is left in the ASGI scope (the audit log samples those)."""
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
    location: str | None = None
    """An agent key's location: the only one it acts for."""


ANONYMOUS_VIEWER = Principal("anonymous", Role.viewer)


async def authenticate_hash(replica: Replica, digest: str) -> Principal | AuthFailure:
    """The caller holding the key whose SHA-256 is `digest`: the bootstrap admin key, or an
    active stored key (its last use recorded); else why not."""
    admin = replica.settings.admin_key
    if admin is not None and same_hash(digest, key_hash(admin.get_secret_value())):
        return Principal(BOOTSTRAP_ACTOR, Role.admin)
    async with replica.api_sessions() as session:
        stored = await key_queries.by_hash(session, digest)
        if stored is None:
            return AuthFailure.unknown_key
        if stored.revoked:
            return AuthFailure.revoked_key
        await key_queries.touch(session, stored, datetime.now(UTC))
        await session.commit()
    return Principal(stored.name, stored.role, stored.id, stored.location)


async def principal_for_hash(replica: Replica, digest: str) -> Principal | None:
    found = await authenticate_hash(replica, digest)
    return found if isinstance(found, Principal) else None


async def authenticate_key(replica: Replica, key: str) -> Principal | AuthFailure:
    """The caller holding `key` (compared through its hash, in constant time)."""
    return await authenticate_hash(replica, key_hash(key))


async def principal_for_key(replica: Replica, key: str) -> Principal | None:
    found = await authenticate_key(replica, key)
    return found if isinstance(found, Principal) else None


async def authenticate_header(replica: Replica, header: str) -> Principal | AuthFailure:
    """The caller an `Authorization: Bearer <key>` header names; a malformed header is an
    unknown key."""
    token = bearer_token(header)
    return AuthFailure.unknown_key if token is None else await authenticate_key(replica, token)


async def authenticate_cookie(replica: Replica, token: str | None) -> Principal | AuthFailure:
    """The caller behind a status-page sign-in cookie (its key must still be valid)."""
    if not token or len(token) > 128:
        return AuthFailure.bad_session
    async with replica.api_sessions() as session:
        digest = await key_queries.session_key_hash(session, token, datetime.now(UTC))
    found = AuthFailure.bad_session if digest is None else await authenticate_hash(replica,
                                                                                    digest)
    return AuthFailure.bad_session if isinstance(found, AuthFailure) else found


async def principal_for_cookie(replica: Replica, token: str | None) -> Principal | None:
    found = await authenticate_cookie(replica, token)
    return found if isinstance(found, Principal) else None


def client_source(scope: Scope) -> str:
    """The caller's address as this app sees it (uvicorn puts a trusted proxy's
    X-Forwarded-For here): what refusals are sampled and sign-ins throttled by."""
    client = scope.get("client")
    return str(client[0])[:64] if client else "unknown"


@lru_cache(maxsize=8)
def _allowed_hosts(text: str) -> tuple[str, ...]:
    return parse_allowed_hosts(text)


def anonymous_reads(scope: Scope, settings: Settings) -> bool:
    """Whether a caller without a key may read here: SUSTAIN_ANONYMOUS_READ is on and the
    request's Host is a loopback name, or one SUSTAIN_ALLOWED_HOSTS lists (see
    sustain.service.access.hosts.anonymous_host). A page of another site whose name resolves
    to 127.0.0.1 (DNS rebinding) sends its own name, and so is a caller without a key."""
    if not settings.anonymous_read:
        return False
    host = next((value.decode("latin-1") for key, value in scope.get("headers", ())
                 if key == b"host"), "")
    return anonymous_host(host, _allowed_hosts(settings.allowed_hosts))


def refuse(request: Request, reason: AuthFailure) -> None:
    """Count a failed authentication, and mark the call so the audit log samples it instead
    of writing a row per refusal."""
    request.scope[AUTH_FAILURE_SCOPE_KEY] = reason
    replica: Replica = request.app.state.sustain
    replica.metrics.observe_auth_failure(reason)


UNAUTHENTICATED_DETAIL = {
    AuthFailure.missing_key: "this call needs an API key: Authorization: Bearer <key>",
    AuthFailure.bad_session: "the sign-in has expired or its key was revoked",
}
"""What a 401 says; unknown and revoked keys get the same words (which one it was is only
counted)."""


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
        found: Principal | AuthFailure
        cookie = request.cookies.get(SESSION_COOKIE)
        if header is None and cookie is not None and request.method in SAFE_METHODS:
            # a signed-in status-page user follows its links to the API (reads only: the
            # cookie is SameSite=Strict, and writes need the key itself)
            found = await authenticate_cookie(replica, cookie)
        elif header is None:
            found = ANONYMOUS_VIEWER if needed == Role.viewer \
                and anonymous_reads(request.scope, replica.settings) else AuthFailure.missing_key
        else:
            found = await authenticate_header(replica, header)
        if isinstance(found, AuthFailure):
            refuse(request, found)
            raise UnauthenticatedError(UNAUTHENTICATED_DETAIL.get(
                found, "the API key is unknown, revoked or malformed"))
        request.scope[PRINCIPAL_SCOPE_KEY] = found
        if not allows(found.role, needed):
            refuse(request, AuthFailure.forbidden_role)
            raise ForbiddenError(
                f"the {found.role.value} role may not do this; it needs {needed.value}")
        return found


def current_principal(request: Request) -> Principal:
    """The caller the router's Access dependency found (it runs before the route's own
    parameters)."""
    principal: Principal = request.scope[PRINCIPAL_SCOPE_KEY]
    return principal


PrincipalDep = Annotated[Principal, Depends(current_principal)]
"""The caller of a route that needs its name (e.g. who created a key or a silence)."""
