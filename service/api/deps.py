"""Dependencies as Annotated aliases, used as plain route parameters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.runtime import Replica
from sustain.service.scheduling.executor import RunExecutor
from sustain.service.scheduling.scheduler import ProbeScheduler


def get_state(request: Request) -> Replica:
    state: Replica = request.app.state.sustain
    return state


StateDep = Annotated[Replica, Depends(get_state)]


async def get_session(state: StateDep) -> AsyncIterator[AsyncSession]:
    """One session per request, from the API's own pool (Replica.api_sessions: never the
    connections that measuring and storing use). Write routes commit explicitly before they
    answer (and before they tell the scheduler), so a client that reads right after a write
    sees it. The session closes when the route function returns (scope="function"), before
    its answer is written: a client that reads slowly holds no database connection."""
    async with state.api_sessions() as session:
        yield session


def get_scheduler(state: StateDep) -> ProbeScheduler:
    return state.scheduler


def get_executor(state: StateDep) -> RunExecutor:
    return state.executor


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
SchedulerDep = Annotated[ProbeScheduler, Depends(get_scheduler)]
ExecutorDep = Annotated[RunExecutor, Depends(get_executor)]
