"""/api/v1/slos: SLO definitions, and each one's status (budget, burn rates, breached tiers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.api.times import utc_or_now
from sustain.service.db import crud, quotas
from sustain.service.db import slos as slo_queries
from sustain.service.db.models import Slo
from sustain.service.errors import FieldError
from sustain.service.schemas.common import MAX_DB_ID, ApiTime
from sustain.service.schemas.paging import Page
from sustain.service.schemas.slos import (
    LocationStatusRead,
    SloCreate,
    SloRead,
    SloStatusRead,
    SloUpdate,
    WindowRead,
)

router = APIRouter(prefix="/slos", tags=["slos"])
CURSOR_KIND = "slos"

SloId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


async def _check_probes(session: AsyncSession, names: list[str] | None) -> None:
    """An SLO may only name probes that exist (422 naming each unknown one)."""
    unknown = await slo_queries.unknown_probes(session, names or [])
    if unknown:
        raise FieldError.of([(f"probes.{i}", f"no probe named {name!r}")
                             for i, name in unknown])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_slo(body: SloCreate, session: SessionDep, state: StateDep) -> SloRead:
    """Create an SLO; runs still within its windows are counted at once (exact from raw
    samples while retained, from sketches before). Every probe named must exist; 409 when
    SUSTAIN_MAX_SLOS SLOs exist."""
    await _check_probes(session, body.probes)
    await quotas.make_room(session, "slo", state.settings.max_slos)
    slo = await crud.create(session, Slo, slo_queries.columns(body),
                            "slo")
    await slo_queries.recount(session, slo, state.settings.sample_retention_days)
    await session.commit()
    return slo_queries.read(slo)


@router.get("")
async def list_slos(session: SessionDep, paging: PageDep) -> Page[SloRead]:
    """SLOs in id order (oldest first), a page at a time."""
    rows = await crud.page(session, Slo, cursors.decode(CURSOR_KIND, paging.cursor),
                           paging.fetch)
    page, following = paging.cut(rows, lambda s: cursors.encode(CURSOR_KIND, s.id))
    return Page(items=[slo_queries.read(s) for s in page], next_cursor=following)


@router.get("/{slo_id}")
async def get_slo(slo_id: SloId, session: SessionDep) -> SloRead:
    return slo_queries.read(await crud.get(session, Slo, slo_id, "slo"))


@router.patch("/{slo_id}")
async def update_slo(slo_id: SloId, body: SloUpdate, session: SessionDep,
                     state: StateDep) -> SloRead:
    slo = await crud.get(session, Slo, slo_id, "slo")
    crud.check_unmanaged(slo, "slo")
    await _check_probes(session, body.probes)
    changes = slo_queries.columns(body, partial=True)
    slo = await crud.update(session, slo, changes, "slo")
    if slo_queries.RECOUNT_COLUMNS & set(changes):
        await slo_queries.recount(session, slo, state.settings.sample_retention_days)
    await session.commit()
    return slo_queries.read(slo)


@router.delete("/{slo_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_slo(slo_id: SloId, session: SessionDep) -> None:
    slo = await crud.get(session, Slo, slo_id, "slo")
    crud.check_unmanaged(slo, "slo")
    await crud.delete(session, slo, "slo")
    await session.commit()


@router.get("/{slo_id}/status")
async def get_slo_status(slo_id: SloId, session: SessionDep,
                         at: ApiTime | None = None) -> SloStatusRead:
    """Compliance and budget over the compliance window, and the burn rate over each tier
    window, ending at `at` (now). Windows without events have null figures."""
    slo = await crud.get(session, Slo, slo_id, "slo")
    moment = utc_or_now(at)
    figures, places = await slo_queries.judged_status(await session.connection(), slo,
                                                      moment)
    return SloStatusRead(
        slo_id=slo.id, at=moment, objective=figures.objective, window_s=figures.window_s,
        good=figures.good, total=figures.total, compliance=figures.compliance,
        budget_remaining=figures.budget_remaining,
        windows=[WindowRead(window_s=w.window_s, good=w.good, total=w.total,
                            burn_rate=w.burn_rate) for w in figures.windows],
        breached_tiers=figures.breached_tiers,
        approximate=await slo_queries.any_approximate(
            session, slo.id, moment - slo_queries.lookback(slo)),
        locations={place: LocationStatusRead(
            good=found.good, total=found.total, compliance=found.compliance,
            budget_remaining=found.budget_remaining, breached_tiers=found.breached_tiers)
            for place, found in places.items()})
