"""/healthz (process alive) and /readyz (database, migrations, scheduler)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from sqlalchemy import text

from sustain.service.api.deps import StateDep
from sustain.service.db.migrate import current_revision, head_revision, known_revisions
from sustain.service.strict_json import StrictJSONResponse

router = APIRouter(tags=["health"])

READY_TIMEOUT_S = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def _database_checks(state: StateDep) -> dict[str, Any]:
    async with state.api_engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
        revision = await current_revision(connection)
    head = head_revision()
    if revision == head:
        migrations = "ok"
    elif revision is not None and revision not in known_revisions():
        # a newer release migrated first (a rolling upgrade's pre-upgrade hook): this
        # replica keeps serving until it is replaced; migrations only ever add
        migrations = f"ok (database at {revision}, newer than this release's {head})"
    else:
        migrations = f"at {revision}, head is {head}"
    return {"database": "ok", "migrations": migrations}


def _writer_check(state: StateDep) -> str:
    """Whether buffered samples are being written: retrying while the database is
    unavailable (not ready), or `ok`, saying so when the database has refused records (each
    kept in dead_letters, its run failed: the database itself is fine)."""
    writer = state.writer
    if writer.last_error is not None:
        return (f"retrying: the database is unavailable ({writer.last_error}); "
                f"{state.buffer.samples} samples waiting")
    refusals = writer.refusals
    if not refusals.total:
        return "ok"
    return (f"ok ({refusals.total} records refused by the database since start, kept in "
            f"dead_letters with their runs failed; newest: {refusals.newest}, at "
            f"{refusals.newest_at:%Y-%m-%dT%H:%M:%SZ})")


@router.get("/readyz")
async def readyz(state: StateDep) -> StrictJSONResponse:
    """200 when the database answers, the schema is at head, the scheduler runs, buffered
    samples are being written with room to spare and no tick measured during an outage waits
    to be stored; else 503 with the reason."""
    try:
        checks = await asyncio.wait_for(_database_checks(state), READY_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure makes the replica unready
        checks = {"database": f"unreachable ({type(exc).__name__})", "migrations": "unknown"}
    checks["scheduler"] = "ok" if state.scheduler.running else "not running"
    if stopped := state.stopped_loops():
        checks["background"] = f"stopped: {', '.join(stopped)}"
    if state.stopping:
        checks["shutdown"] = "shutting down: no new runs; runs in flight are finishing"
    buffer = state.buffer
    checks["buffer"] = "ok" if buffer.accepting else (
        f"nearly full ({buffer.samples} of {buffer.capacity} samples): new runs paused")
    checks["writer"] = _writer_check(state)
    offline = state.executor.offline
    if offline.pending:
        checks["offline_runs"] = (f"{offline.pending} ticks measured (or still measuring) "
                                  "while the database was unreachable wait to be stored "
                                  f"({offline.samples} samples)")
    ready = all(value == "ok" or value.startswith("ok (") for value in checks.values())
    return StrictJSONResponse({"status": "ready" if ready else "not ready", "checks": checks},
                        status_code=200 if ready else 503)
