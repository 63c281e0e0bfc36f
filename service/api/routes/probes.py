"""/api/v1/probes, and run-now under /api/v1/probes/{id}/runs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status
from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.profiles import LoadProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.workload.spec import Workload
from sustain.service.api import cursor as cursors
from sustain.service.api.deps import ExecutorDep, SchedulerDep, SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.api.reach import (
    refuse_dataset,
    refuse_unplayable,
    refuse_workload_secrets,
)
from sustain.service.config import Settings
from sustain.service.db import crud, quotas
from sustain.service.db import probes as probe_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.errors import ConflictError, FieldError, NotFoundError, UnavailableError
from sustain.service.evaluation.thresholds import threshold_problems
from sustain.service.policy.limits import (
    LoadLimits,
    dotted,
    limit_violations,
)
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.paging import Page
from sustain.service.schemas.probes import (
    ProbeCreate,
    ProbeRead,
    ProbeUpdate,
    RagEndpointIds,
    period_of,
)
from sustain.service.schemas.rag_endpoints import kind_problems, pairing_problem
from sustain.service.schemas.runs import RunAccepted

router = APIRouter(prefix="/probes", tags=["probes"])
CURSOR_KIND = "probes"

ProbeId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


def _check_limits(profile: LoadProfile | None, limits: LoadLimits) -> None:
    """A profile beyond this service's limits is a 422 naming each field that breaks one."""
    if profile is not None and (found := limit_violations(profile.planned_load(), limits)):
        raise FieldError.of([(dotted("profile", path), message) for path, message in found])


async def _check_total_rate(session: AsyncSession, settings: Settings, probe_id: int | None,
                            before: LoadProfile | None, after: LoadProfile | None,
                            before_locations: int = 1, after_locations: int = 1) -> None:
    """409 naming SUSTAIN_MAX_TOTAL_RATE when probe `probe_id` (None: a new one), enabled with
    profile `after` (None: disabled) instead of `before` (None: it was disabled or new),
    would raise the enabled probes' planned rate beyond it. Each location a probe runs from
    plans its profile's rate."""
    await quotas.check_total_rate(
        session, probe_id,
        0.0 if before is None else before.peak_rate(settings.max_rate) * before_locations,
        after, settings.max_rate, settings.max_total_rate, after_locations)


async def _endpoint(session: AsyncSession, endpoint_id: int, field: str) -> Endpoint:
    """The endpoint a probe names; a 422 naming `field` when there is none."""
    try:
        return await crud.get(session, Endpoint, endpoint_id, "endpoint")
    except NotFoundError as exc:
        raise FieldError(field, str(exc)) from None


async def _check_endpoint(session: AsyncSession, endpoint_id: int,
                          slo: SloThresholds | None) -> None:
    """A 422 naming `endpoint_id` when there is no such endpoint, or the SLO thresholds its
    kind can never meet (service/evaluation/thresholds.py)."""
    endpoint = await _endpoint(session, endpoint_id, "endpoint_id")
    if slo is not None and (found := threshold_problems(endpoint.api_kind, slo)):
        raise FieldError.of([(f"slo.{name}", message) for name, message in found])


async def _check_rag(session: AsyncSession, endpoint_id: int, workload: Workload,
                     rag: RagEndpointIds | None) -> None:
    """A 422 naming `rag_endpoints` (or the endpoint among them) when a RAG probe's endpoints
    are missing, absent or of the wrong api_kind (service/schemas/rag_endpoints.py)."""
    problem = pairing_problem(workload.rag is not None, rag is not None)
    if problem is not None:
        raise FieldError("rag_endpoints", problem)
    if rag is None:
        return
    fields = {"endpoint": "endpoint_id", "embed": "rag_endpoints.embed_endpoint_id",
              "rerank": "rag_endpoints.rerank_endpoint_id"}
    generate = await _endpoint(session, endpoint_id, fields["endpoint"])
    embed = await _endpoint(session, rag.embed_endpoint_id, fields["embed"])
    rerank = None if rag.rerank_endpoint_id is None \
        else await _endpoint(session, rag.rerank_endpoint_id, fields["rerank"])
    for part, message in kind_problems(generate.api_kind, embed.api_kind,
                                       None if rerank is None else rerank.api_kind):
        raise FieldError(fields[part], message)


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_probe(body: ProbeCreate, session: SessionDep, scheduler: SchedulerDep,
                       state: StateDep) -> ProbeRead:
    """Create a probe. Its profile must stay within the load limits (SUSTAIN_MAX_RATE,
    SUSTAIN_MAX_CONCURRENCY, SUSTAIN_MAX_RUN_S, SUSTAIN_MAX_RUN_REQUESTS), and a dataset
    must lie under SUSTAIN_DATASET_DIR. 409 when SUSTAIN_MAX_PROBES probes exist, or when
    it is enabled and the enabled probes would plan more than SUSTAIN_MAX_TOTAL_RATE
    requests/s in all."""
    _check_limits(body.profile, state.settings.load_limits())
    refuse_dataset(body.workload, state.reach, body.profile)
    refuse_workload_secrets(body.workload, state.reach)
    refuse_unplayable(body.workload, body.profile)
    await _check_endpoint(session, body.endpoint_id, body.slo)
    await _check_rag(session, body.endpoint_id, body.workload, body.rag_endpoints)
    await quotas.make_room(session, "probe", state.settings.max_probes)
    await _check_total_rate(session, state.settings, None, None,
                            body.profile if body.enabled else None,
                            after_locations=len(body.locations))
    probe = await crud.create(session, Probe, probe_queries.columns(body), "probe")
    await probe_queries.notify_changed(session, probe.id)
    await session.commit()
    await scheduler.refresh(probe.id)
    return probe_queries.read(probe)


@router.get("")
async def list_probes(session: SessionDep, paging: PageDep) -> Page[ProbeRead]:
    """Probes in id order (oldest first), a page at a time."""
    rows = await crud.page(session, Probe, cursors.decode(CURSOR_KIND, paging.cursor),
                           paging.fetch)
    page, following = paging.cut(rows, lambda p: cursors.encode(CURSOR_KIND, p.id))
    return Page(items=[probe_queries.read(p) for p in page], next_cursor=following)


@router.get("/{probe_id}")
async def get_probe(probe_id: ProbeId, session: SessionDep) -> ProbeRead:
    return probe_queries.read(await crud.get(session, Probe, probe_id, "probe"))


@router.patch("/{probe_id}")
async def update_probe(probe_id: ProbeId, body: ProbeUpdate, session: SessionDep,
                       scheduler: SchedulerDep, state: StateDep) -> ProbeRead:
    """Change a probe; a new profile must stay within the load limits. Disabling it cancels
    its run in progress, if any (within 2 s, wherever it executes). 409 when enabling it, or
    giving an enabled one a faster profile, would have the enabled probes plan more than
    SUSTAIN_MAX_TOTAL_RATE requests/s in all."""
    probe = await crud.get(session, Probe, probe_id, "probe")
    crud.check_unmanaged(probe, "probe")
    _check_limits(body.profile, state.settings.load_limits())
    refuse_dataset(body.workload, state.reach, body.profile)
    refuse_workload_secrets(body.workload, state.reach)
    current = probe_queries.read(probe)
    refuse_unplayable(body.workload or current.workload, body.profile or current.profile)
    if body.endpoint_id is not None or body.slo is not None:
        await _check_endpoint(session, body.endpoint_id or probe.endpoint_id,
                              body.slo or current.slo)
    await _check_rag(session, body.endpoint_id or probe.endpoint_id,
                     body.workload or current.workload,
                     body.rag_endpoints if "rag_endpoints" in body.model_fields_set
                     else current.rag_endpoints)
    changes = probe_queries.columns(body)
    cron = changes.get("cron", probe.cron)
    interval = changes.get("interval_seconds", probe.interval_seconds)
    jitter = probe.jitter_seconds if body.jitter_s is None else body.jitter_s
    if jitter >= period_of(interval if cron is None else None, cron):
        raise FieldError("jitter_s", "must be smaller than the interval between ticks")
    await _check_total_rate(
        session, state.settings, probe.id, current.profile if probe.enabled else None,
        (body.profile or current.profile) if changes.get("enabled", probe.enabled) else None,
        len(probe.locations), len(body.locations or probe.locations))
    if any(changes.get(k, getattr(probe, k)) != getattr(probe, k)
           for k in probe_queries.SCHEDULE_COLUMNS):
        changes["schedule_since"] = func.now()
    disabled = probe.enabled and changes.get("enabled") is False
    probe = await crud.update(session, probe, changes, "probe")
    if disabled:
        await run_queries.cancel_probe_runs(session, probe.id)
    await probe_queries.notify_changed(session, probe.id)
    await session.commit()
    if disabled:
        state.executor.cancel_probe(probe.id)
    await scheduler.refresh(probe.id)
    return probe_queries.read(probe)


@router.delete("/{probe_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_probe(probe_id: ProbeId, session: SessionDep, scheduler: SchedulerDep,
                       executor: ExecutorDep) -> None:
    """Delete a probe and its runs; a run of it still going stops within 2 s, wherever it
    executes (its replica finds the run gone)."""
    probe = await crud.get(session, Probe, probe_id, "probe")
    crud.check_unmanaged(probe, "probe")
    await crud.delete(session, probe, "probe")
    await probe_queries.notify_changed(session, probe_id)
    await session.commit()
    executor.cancel_probe(probe_id)
    await scheduler.refresh(probe_id)


@router.post("/{probe_id}/runs", status_code=status.HTTP_202_ACCEPTED)
async def run_now(probe_id: ProbeId, session: SessionDep, executor: ExecutorDep,
                  state: StateDep) -> RunAccepted:
    """Start a run now, outside the schedule; poll the returned href for its result. 409 while
    a run of the probe is in flight in this replica's location (runs of a probe never
    overlap there); 503 while the write buffer is nearly full (the database is down or slow)
    or this replica is shutting down. The run measures from the location of the replica that
    took the request."""
    await crud.get(session, Probe, probe_id, "probe")
    if state.stopping:
        raise UnavailableError("this replica is shutting down; send the request to another")
    if not executor.buffer.accepting:
        raise UnavailableError("the sample write buffer is nearly full; no new runs start "
                               "until the database catches up")
    await run_queries.lock_probe(session, probe_id)
    if await run_queries.busy(session, probe_id, executor.location):
        raise ConflictError(f"probe {probe_id} has a run in progress in location "
                            f"{executor.location}; runs of a probe never overlap there")
    run = await run_queries.create_manual(session, probe_id, executor.location)
    await session.commit()
    executor.submit(run.id)
    return RunAccepted(id=run.id, status="pending", href=f"/api/v1/runs/{run.id}")
