"""/api/v1/audit (admin): every write through the API, newest first, with cursor paging."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep
from sustain.service.db import audit as audit_queries
from sustain.service.schemas.keys import AuditPage

router = APIRouter(prefix="/audit", tags=["audit"])
CURSOR_KIND = "audit"


@router.get("")
async def list_audit(session: SessionDep,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                     cursor: Annotated[str | None, Query(max_length=64)] = None) -> AuditPage:
    """Who wrote what and when (method, path, object id, status); never bodies or secrets."""
    rows = await audit_queries.page(session, cursors.decode(CURSOR_KIND, cursor), limit)
    following = cursors.encode(CURSOR_KIND, rows[-1].id) if len(rows) == limit else None
    return AuditPage(items=[audit_queries.read(r) for r in rows], next_cursor=following)
