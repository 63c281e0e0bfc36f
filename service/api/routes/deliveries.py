"""/api/v1/deliveries: the delivery log, one entry per notification and notifier, with its
attempts, last HTTP status and error (never a URL or a secret)."""

from __future__ import annotations

from fastapi import APIRouter

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep
from sustain.service.api.paging import PageDep
from sustain.service.db import deliveries as queries
from sustain.service.schemas.common import DbId
from sustain.service.schemas.notifiers import DeliveryRead, DeliveryState
from sustain.service.schemas.paging import Page

router = APIRouter(prefix="/deliveries", tags=["notifiers"])
CURSOR_KIND = "deliveries"


@router.get("")
async def list_deliveries(session: SessionDep, paging: PageDep, notifier_id: DbId | None = None,
                          state: DeliveryState | None = None, before: DbId | None = None
                          ) -> Page[DeliveryRead]:
    """Newest first, a page at a time; `before` starts below that id."""
    after = cursors.decode(CURSOR_KIND, paging.cursor)
    bounds = [b for b in (before, after) if b is not None]
    rows = await queries.log(session, notifier_id, state, min(bounds, default=None),
                             paging.fetch)
    page, following = paging.cut(rows, lambda d: cursors.encode(CURSOR_KIND, d.id))
    return Page(items=[DeliveryRead.model_validate(r, from_attributes=True) for r in page],
                next_cursor=following)
