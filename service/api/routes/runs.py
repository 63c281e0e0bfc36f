"""/api/v1/runs, /api/v1/runs/{id}/samples (JSON pages or streamed CSV), its server's
metrics and the records of it the database refused."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, status

from sustain.service.api import cursor
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.exports import ExportResponse, csv_pages, in_pieces, take_export_slot
from sustain.service.api.filters import LocationQuery
from sustain.service.api.paging import PageDep
from sustain.service.db import dead_letters
from sustain.service.db import runs as run_queries
from sustain.service.db import samples as sample_queries
from sustain.service.db.models import FINAL_RUN_STATUSES, Probe
from sustain.service.errors import FieldError
from sustain.service.export.csv_rows import MEDIA_TYPE as CSV_MEDIA
from sustain.service.export.csv_rows import csv_text
from sustain.service.schemas.common import MAX_DB_ID, ApiTime
from sustain.service.schemas.runs import (
    DeadLetterRead,
    DeadLetters,
    RunList,
    RunRead,
    RunStatus,
    SamplePage,
    SampleRead,
    ServerSeries,
    ServerTelemetry,
)
from sustain.service.strict_json import dumps_bytes

router = APIRouter(prefix="/runs", tags=["runs"])

RunId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


@router.get("")
async def list_runs(
    session: SessionDep,
    paging: PageDep,
    probe_id: Annotated[int | None, Query(ge=1, le=MAX_DB_ID)] = None,
    status: RunStatus | None = None,
    from_: Annotated[ApiTime | None, Query(alias="from")] = None,
    to: ApiTime | None = None,
    location: LocationQuery = None,
) -> RunList:
    """Runs, newest first; `from`/`to` bound scheduled_for, `location` keeps one location's.
    Pass `next_cursor` back as `cursor` for the next page; it is null on the last one."""
    start, end = from_, to
    if start is not None and end is not None and start >= end:
        raise FieldError("query.from", "must be before `to`")
    before = cursor.decode("runs", paging.cursor)
    rows = await run_queries.list_runs(session, probe_id=probe_id, status=status, start=start,
                                       end=end, before_id=before, limit=paging.fetch,
                                       location=location)
    page, next_cursor = paging.cut(rows, lambda r: cursor.encode("runs", r.id))
    return RunList(items=[RunRead.model_validate(r) for r in page], next_cursor=next_cursor)


@router.get("/{run_id}")
async def get_run(run_id: RunId, session: SessionDep) -> RunRead:
    return RunRead.model_validate(await run_queries.get(session, run_id))


@router.post("/{run_id}/cancel", status_code=status.HTTP_202_ACCEPTED,
             responses={404: {"description": "No such run."},
                        409: {"description": "The run is already final."}})
async def cancel_run(run_id: RunId, session: SessionDep, state: StateDep) -> RunRead:
    """Cancel a pending or running run, on whichever replica it executes. A pending run is
    `cancelled` at once; a running one within 2 s (poll it), with the samples it measured so
    far kept and its summary computed from them. 409 for a run already final (a run that
    ends on its own meanwhile keeps its own status)."""
    run = await run_queries.request_cancel(session, run_id)
    probe = await session.get(Probe, run.probe_id)
    answer = RunRead.model_validate(run)
    await session.commit()
    if answer.status == "cancelled" and probe is not None:
        state.metrics.observe_run(probe.name, "cancelled", answer.location)
    state.executor.cancel(run_id)
    return answer


@router.get("/{run_id}/samples", response_model=SamplePage,
            responses={200: {"content": {"text/csv": {}}},
                       429: {"description": "Too many sample exports in flight (per key or "
                             "anonymous address, or in all); see Retry-After."}})
async def run_samples(
    run_id: RunId,
    request: Request,
    session: SessionDep,
    state: StateDep,
    format_: Annotated[Literal["json", "csv"], Query(alias="format")] = "json",
    cursor_: Annotated[str | None, Query(alias="cursor", max_length=100)] = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> Any:
    """A run's raw samples in the order they were recorded. JSON comes in pages (`limit`,
    default 1000): follow `next_cursor` until it is null, which happens only once the run is
    final, so a client reading a running run gets every sample exactly once. CSV (with a
    header row) streams every sample after `cursor`, or one page with `limit` and the next
    cursor in the `X-Next-Cursor` header.

    Each answer is a sample export: a key (or an anonymous address) may have
    SUSTAIN_EXPORT_MAX_CONCURRENT_PER_KEY in flight, all callers together
    SUSTAIN_EXPORT_MAX_CONCURRENT; beyond, 429 with Retry-After."""
    after = cursor.decode("samples", cursor_)
    slot = take_export_slot(request, state)
    try:
        run = await run_queries.get(session, run_id)
        if format_ == "csv" and limit is None:
            await session.close()  # the stream reads in its own short transactions
            return ExportResponse(csv_pages(state.api_sessions, run, after), slot,
                                  media_type=CSV_MEDIA, headers=_disposition(run_id))
        final = run.status in FINAL_RUN_STATUSES
        rows = await sample_queries.page(session, run, after, limit or 1000)
        await session.close()  # nothing is held while the answer is made and written
        last = rows[-1]["pos"] if rows else after if after is not None else -1
        more = len(rows) == (limit or 1000) or not final
        next_cursor = cursor.encode("samples", last) if more else None
        if format_ == "csv":
            body = (await asyncio.to_thread(csv_text, rows, header=True)).encode()
            headers = _disposition(run_id) | (
                {"X-Next-Cursor": next_cursor} if next_cursor else {})
            media_type = CSV_MEDIA
        else:
            body = await asyncio.to_thread(_page_json, run_id, run.status, rows, next_cursor)
            headers = {}
            media_type = "application/json"
        return ExportResponse(in_pieces(body), slot, media_type=media_type,
                              headers=headers | {"Content-Length": str(len(body))})
    except BaseException:
        slot.give_back()
        raise


def _page_json(run_id: int, run_status: str, rows: list[dict[str, Any]],
               next_cursor: str | None) -> bytes:
    """A JSON page of samples, as FastAPI would have written the SamplePage (run in a
    thread: a page of 10,000 samples takes a while)."""
    page = SamplePage.model_validate({
        "run_id": run_id, "run_status": run_status,
        "items": [SampleRead.model_validate(r) for r in rows], "next_cursor": next_cursor})
    return dumps_bytes(page.model_dump(mode="json"))


@router.get("/{run_id}/server-metrics")
async def run_server_metrics(run_id: RunId, session: SessionDep,
                             paging: PageDep) -> ServerTelemetry:
    """The series the run read from its server's metrics (empty when its endpoint has no
    metrics_url, or while it runs), by name, `limit` series a page: follow `next_cursor`
    until it is null."""
    await run_queries.get(session, run_id)
    after = cursor.decode_key("server-metrics", paging.cursor, (str,))
    rows = await run_queries.server_series(session, run_id, paging.fetch,
                                           None if after is None else str(after[0]))
    page, following = paging.cut(rows, lambda r: cursor.encode_key("server-metrics",
                                                                   (r.name,)))
    return ServerTelemetry(run_id=run_id, series=[
        ServerSeries(name=row.name, at=row.at, value=row.value) for row in page],
        next_cursor=following)


@router.get("/{run_id}/dead-letters")
async def run_dead_letters(run_id: RunId, session: SessionDep,
                           paging: PageDep) -> DeadLetters:
    """The run's records the database refused (a value out of range, text or JSON it cannot
    hold), oldest first, as they were, with the database's words; the run is `failed` with
    the reason. Empty for a run the database took whole. A page at a time."""
    await run_queries.get(session, run_id)
    rows = await dead_letters.of_run(session, run_id, paging.fetch,
                                     cursor.decode("dead-letters", paging.cursor))
    page, following = paging.cut(rows, lambda d: cursor.encode("dead-letters", d.id))
    return DeadLetters(run_id=run_id, items=[DeadLetterRead.model_validate(r) for r in page],
                       next_cursor=following)


def _disposition(run_id: int) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="run-{run_id}-samples.csv"'}

