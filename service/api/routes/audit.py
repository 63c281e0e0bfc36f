"""/api/v1/audit (admin): every write through the API, newest first, with cursor paging."""

from __future__ import annotations

from fastapi import APIRouter

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep
from sustain.service.api.paging import PageDep
from sustain.service.db import audit as audit_queries
from sustain.service.schemas.keys import AuditPage

router = APIRouter(prefix="/audit", tags=["audit"])
CURSOR_KIND = "audit"


@router.get("")
async def list_audit(session: SessionDep, paging: PageDep) -> AuditPage:
    """Who wrote what and when (method, path, object id, status); never bodies or secrets.
    Newest first, a page at a time."""
    rows = await audit_queries.page(session, cursors.decode(CURSOR_KIND, paging.cursor),
                                    paging.fetch)
    page, following = paging.cut(rows, lambda r: cursors.encode(CURSOR_KIND, r.id))
    return AuditPage(items=[audit_queries.read(r) for r in page], next_cursor=following)
