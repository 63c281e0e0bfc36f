"""Endpoint rows: the one mapping between the endpoint schemas and their columns (used by
the REST routes and the config-file sync alike), and queries beyond plain CRUD."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db import crud
from sustain.service.db.models import Endpoint
from sustain.service.db.probes import uses_endpoint
from sustain.service.errors import ConflictError
from sustain.service.schemas.endpoints import EndpointCreate, EndpointRead, EndpointUpdate


def columns(body: EndpointCreate | EndpointUpdate, *, partial: bool = False) -> dict[str, Any]:
    """Column values of a body: every field, or (partial) only those the caller set."""
    return body.model_dump(mode="json", exclude_unset=partial)


def read(endpoint: Endpoint) -> EndpointRead:
    """What the API answers for a stored endpoint (the secret stays a reference)."""
    return EndpointRead.model_validate(endpoint)


async def delete(session: AsyncSession, endpoint: Endpoint) -> None:
    """Refuses while probes use the endpoint, so no probe is left pointing nowhere."""
    in_use = await session.scalar(select(exists().where(uses_endpoint(endpoint.id))))
    if in_use:
        raise ConflictError(f"endpoint {endpoint.id} is used by probes; delete them first")
    await crud.delete(session, endpoint, "endpoint")
