"""/api/v1/endpoints"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.api.reach import refuse_unreachable
from sustain.service.db import crud, quotas
from sustain.service.db import endpoints as endpoint_queries
from sustain.service.db.models import Endpoint
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.endpoints import EndpointCreate, EndpointRead, EndpointUpdate
from sustain.service.schemas.paging import Page

router = APIRouter(prefix="/endpoints", tags=["endpoints"])
CURSOR_KIND = "endpoints"

EndpointId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_endpoint(body: EndpointCreate, session: SessionDep,
                          state: StateDep) -> EndpointRead:
    """422 naming `base_url` when the egress policy refuses its host, or `auth_secret_ref`
    when the secret policy refuses the reference; 409 when SUSTAIN_MAX_ENDPOINTS endpoints
    exist."""
    values = endpoint_queries.columns(body)
    refuse_unreachable(values, state.reach)
    await quotas.make_room(session, "endpoint", state.settings.max_endpoints)
    endpoint = await crud.create(session, Endpoint, values, "endpoint")
    await session.commit()
    return endpoint_queries.read(endpoint)


@router.get("")
async def list_endpoints(session: SessionDep, paging: PageDep) -> Page[EndpointRead]:
    """Endpoints in id order (oldest first), a page at a time."""
    rows = await crud.page(session, Endpoint, cursors.decode(CURSOR_KIND, paging.cursor),
                           paging.fetch)
    page, following = paging.cut(rows, lambda e: cursors.encode(CURSOR_KIND, e.id))
    return Page(items=[endpoint_queries.read(e) for e in page], next_cursor=following)


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
