"""A replica's background loops outlive failures of their own I/O (database unreachable, no file
descriptor left: both OSErrors), and /readyz says so when one has stopped anyway."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from sustain.service.alerting.delivery import DeliveryWorker
from sustain.service.app import runtime_of
from sustain.service.db.engine import create_engine, session_factory
from sustain.service.db.models import Notifier

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/none"
"""A database nobody listens for: each connection attempt fails with an OSError."""


async def test_an_alertmanager_resend_that_cannot_reach_the_database_is_counted_not_lost(
        ) -> None:
    engine = create_engine(UNREACHABLE, pool_size=1)
    results: list[tuple[str, str]] = []
    async with httpx.AsyncClient() as client:
        worker = DeliveryWorker(session_factory(engine), client, "replica", "http://x",
                                observe=lambda name, result: results.append((name, result)))
        notifier = Notifier(name="am", kind="alertmanager", url="http://127.0.0.1:1",
                            match={}, send_resolved=True, enabled=True, timeout_s=1.0)
        await worker._resend_to(notifier, [])  # the task must end normally
    await engine.dispose()
    assert results == [("am", "resend_failed")]


async def test_readyz_is_503_when_a_background_loop_has_stopped(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    assert "background" not in (await api.get("/readyz")).json()["checks"]
    await runtime_of(app).delivery.close()
    answer = await api.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"]["background"] == "stopped: notification delivery"
