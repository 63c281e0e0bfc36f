"""The alert evaluation loop, run by every replica: SLO statuses become candidates, and each
candidate advances its alert under the alert's row lock (service.db.alerts.advance), so a
transition is recorded and owed to the notifiers once, whichever replica gets there first.
Alerts whose SLO or tier disappeared are resolved."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.alerting.candidates import Candidate, slo_burn_candidates
from service.db import alerts as alert_queries
from service.db import slo_counts
from service.db.models import AlertRow, Slo
from service.db.slos import tiers_of
from service.evaluation.rules import SloRules
from service.evaluation.slo_status import needed_windows, status

logger = logging.getLogger(__name__)


class AlertEvaluator:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], replica_id: str,
                 interval_s: float, repeat_s: float | None) -> None:
        self.sessions = sessions
        self.replica_id = replica_id
        self.interval_s = interval_s
        self.repeat = None if not repeat_s else timedelta(seconds=repeat_s)
        self._task: asyncio.Task[None] | None = None

    async def candidates(self, now: datetime) -> list[Candidate]:
        out: list[Candidate] = []
        async with self.sessions() as session:
            slos = (await session.execute(select(Slo).order_by(Slo.id))).scalars().all()
            connection = await session.connection()
            for slo in slos:
                tiers = tiers_of(slo)
                counts = await slo_counts.window_counts(connection, slo.id, now,
                                                        needed_windows(slo.window_s, tiers))
                out += slo_burn_candidates(
                    SloRules(slo.name, slo.objective, tiers, slo.description),
                    status(slo.objective, slo.window_s, tiers, counts))
            known = {c.fingerprint for c in out}
            stale = (await session.execute(select(AlertRow).where(
                AlertRow.alertname == "SustainSloBurnRate",
                AlertRow.state.in_(("pending", "firing"))))).scalars().all()
        out += [Candidate(labels=dict(row.labels), condition=False,
                          annotations=dict(row.annotations))
                for row in stale if row.fingerprint not in known]
        return out

    async def evaluate_once(self, now: datetime | None = None) -> list[tuple[str, str]]:
        """One pass; the (fingerprint, transition) pairs this replica notified."""
        moment = now or datetime.now(UTC)
        notified = []
        for candidate in await self.candidates(moment):
            async with self.sessions.begin() as session:
                transition = await alert_queries.advance(
                    session, candidate, moment, timedelta(0), self.repeat, self.replica_id)
            if transition is not None:
                notified.append((candidate.fingerprint, transition))
                logger.warning("alert %s %s: %s", candidate.alertname, transition,
                               candidate.labels)
        return notified

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alert-evaluator")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.evaluate_once()
            except Exception as exc:
                logger.warning("alert evaluation failed (%s); next try in %ss",
                               type(exc).__name__, self.interval_s)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
