"""/api/v1/endpoints"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.reach import refuse_unreachable
from sustain.service.db import crud
from sustain.service.db import endpoints as endpoint_queries
from sustain.service.db.models import Endpoint
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.endpoints import EndpointCreate, EndpointRead, EndpointUpdate

router = APIRouter(prefix="/endpoints", tags=["endpoints"])

EndpointId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_endpoint(body: EndpointCreate, session: SessionDep,
                          state: StateDep) -> EndpointRead:
    """422 naming `base_url` when the egress policy refuses its host, or `auth_secret_ref`
    when the secret policy refuses the reference."""
    values = endpoint_queries.columns(body)
    refuse_unreachable(values, state.reach)
    endpoint = await crud.create(session, Endpoint, values, "endpoint")
    await session.commit()
    return endpoint_queries.read(endpoint)


@router.get("")
async def list_endpoints(session: SessionDep) -> list[EndpointRead]:
    rows = await crud.list_all(session, Endpoint)
    return [endpoint_queries.read(e) for e in rows]


@router.get("/{endpoint_id}")
async def get_endpoint(endpoint_id: EndpointId, session: SessionDep) -> EndpointRead:
    return endpoint_queries.read(await crud.get(session, Endpoint, endpoint_id, "endpoint"))


@router.patch("/{endpoint_id}")
async def update_endpoint(endpoint_id: EndpointId, body: EndpointUpdate,
                          session: SessionDep, state: StateDep) -> EndpointRead:
    endpoint = await crud.get(session, Endpoint, endpoint_id, "endpoint")
    crud.check_unmanaged(endpoint, "endpoint")
    changes = endpoint_queries.columns(body, partial=True)
    refuse_unreachable(changes, state.reach)
    endpoint = await crud.update(session, endpoint, changes, "endpoint")
    await session.commit()
    return endpoint_queries.read(endpoint)


@router.delete("/{endpoint_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_endpoint(endpoint_id: EndpointId, session: SessionDep) -> None:
    endpoint = await crud.get(session, Endpoint, endpoint_id, "endpoint")
    crud.check_unmanaged(endpoint, "endpoint")
    await endpoint_queries.delete(session, endpoint)
    await session.commit()
