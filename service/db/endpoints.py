"""Endpoint queries beyond plain CRUD."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db import crud
from sustain.service.db.models import Endpoint, Probe
from sustain.service.errors import ConflictError


async def delete(session: AsyncSession, endpoint: Endpoint) -> None:
    """Refuses while probes use the endpoint, so no probe is left pointing nowhere."""
    in_use = await session.scalar(select(exists().where(Probe.endpoint_id == endpoint.id)))
    if in_use:
        raise ConflictError(f"endpoint {endpoint.id} is used by probes; delete them first")
    await crud.delete(session, endpoint, "endpoint")
