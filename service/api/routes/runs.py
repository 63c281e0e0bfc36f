"""/api/v1/runs"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from service.api.deps import SessionDep
from service.api.schemas.common import MAX_DB_ID
from service.api.schemas.runs import RunList, RunRead, RunStatus
from service.db import runs as run_queries

router = APIRouter(prefix="/runs", tags=["runs"])


@router.get("")
async def list_runs(
    session: SessionDep,
    probe_id: Annotated[int | None, Query(ge=1, le=MAX_DB_ID)] = None,
    status: RunStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> RunList:
    """Runs, newest first."""
    rows = await run_queries.list_runs(session, probe_id=probe_id, status=status, limit=limit)
    return RunList(items=[RunRead.model_validate(r) for r in rows])


@router.get("/{run_id}")
async def get_run(run_id: Annotated[int, Path(ge=1, le=MAX_DB_ID)],
                  session: SessionDep) -> RunRead:
    return RunRead.model_validate(await run_queries.get(session, run_id))
