"""/healthz (process alive) and /readyz (database, migrations, scheduler)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from sustain.service.api.deps import StateDep
from sustain.service.db.migrate import current_revision, head_revision, known_revisions

router = APIRouter(tags=["health"])

READY_TIMEOUT_S = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def _database_checks(state: StateDep) -> dict[str, Any]:
    async with state.engine.connect() as connection:
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


@router.get("/readyz")
async def readyz(state: StateDep) -> JSONResponse:
    """200 when the database answers, the schema is at head, the scheduler runs, buffered
    samples are being written with room to spare and no tick measured during an outage waits
    to be stored; else 503 with the reason."""
    try:
        checks = await asyncio.wait_for(_database_checks(state), READY_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure makes the replica unready
        checks = {"database": f"unreachable ({type(exc).__name__})", "migrations": "unknown"}
    checks["scheduler"] = "ok" if state.scheduler.running else "not running"
    if state.stopping:
        checks["shutdown"] = "shutting down: no new runs; runs in flight are finishing"
    buffer = state.buffer
    checks["buffer"] = "ok" if buffer.accepting else (
        f"nearly full ({buffer.samples} of {buffer.capacity} samples): new runs paused")
    checks["writer"] = "ok" if state.writer.last_error is None else (
        f"retrying ({state.writer.last_error}); {buffer.samples} samples waiting")
    offline = state.executor.offline
    if offline.pending:
        checks["offline_runs"] = (f"{offline.pending} ticks measured (or still measuring) "
                                  "while the database was unreachable wait to be stored "
                                  f"({offline.samples} samples)")
    ready = all(value == "ok" or value.startswith("ok (") for value in checks.values())
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks},
                        status_code=200 if ready else 503)
