"""/api/v1/deliveries: the delivery log, one entry per notification and notifier, with its
attempts, last HTTP status and error (never a URL or a secret)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from sustain.service.api.deps import SessionDep
from sustain.service.db import deliveries as queries
from sustain.service.schemas.common import DbId
from sustain.service.schemas.notifiers import DeliveryRead, DeliveryState

router = APIRouter(prefix="/deliveries", tags=["notifiers"])


@router.get("")
async def list_deliveries(session: SessionDep, notifier_id: DbId | None = None,
                          state: DeliveryState | None = None, before: DbId | None = None,
                          limit: Annotated[int, Query(ge=1, le=1000)] = 100
                          ) -> list[DeliveryRead]:
    """Newest first; page with `before` = the last id seen."""
    rows = await queries.log(session, notifier_id, state, before, limit)
    return [DeliveryRead.model_validate(r, from_attributes=True) for r in rows]
