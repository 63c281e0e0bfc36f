"""The alert evaluation loop, run by every replica: SLO burn-rate tiers, endpoint down, no data
and drift findings become candidates, and each candidate advances its alert under the alert's
row lock (service.db.alerts.advance), so a transition is recorded and owed to the notifiers
once, whichever replica gets there first. Alerts whose subject disappeared (an SLO, a tier, a
probe) are resolved."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.service.alerting import drift_findings
from sustain.service.db import alerts as alert_queries
from sustain.service.db import drift as drift_queries
from sustain.service.db.models import AlertRow, Slo
from sustain.service.db.probe_health import capacity_histories, probe_health
from sustain.service.db.slos import judged_status, tiers_of
from sustain.service.evaluation.candidates import (
    Candidate,
    DriftState,
    drift_candidates,
    endpoint_down_candidates,
    no_data_candidates,
    slo_burn_candidates,
)
from sustain.service.evaluation.capacity_drop import HISTORY, capacity_drop_candidates
from sustain.service.evaluation.rules import SloRules

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DriftWatch:
    """What drift findings compare, and how often they are recomputed."""

    window: timedelta = timedelta(hours=24)
    baseline: timedelta = timedelta(days=7)
    watched: tuple[tuple[str, str], ...] = (("ttft", "p99"), ("e2e", "p99"))
    every: timedelta = timedelta(minutes=5)


class AlertEvaluator:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], replica_id: str,
                 interval_s: float, repeat_s: float | None, endpoint_down_runs: int = 3,
                 drift: DriftWatch | None = None,
                 on_transition: Callable[[], None] | None = None) -> None:
        self.sessions = sessions
        self.replica_id = replica_id
        self.interval_s = interval_s
        self.repeat = None if not repeat_s else timedelta(seconds=repeat_s)
        self.endpoint_down_runs = endpoint_down_runs
        self.drift = drift or DriftWatch()
        self.on_transition = on_transition or (lambda: None)
        self._drift_tried: datetime | None = None
        self._task: asyncio.Task[None] | None = None

    async def candidates(self, now: datetime) -> list[Candidate]:
        out: list[Candidate] = []
        async with self.sessions() as session:
            slos = (await session.execute(select(Slo).order_by(Slo.id))).scalars().all()
            connection = await session.connection()
            for slo in slos:
                found, places = await judged_status(connection, slo, now)
                out += slo_burn_candidates(
                    SloRules(slo.name, slo.objective, tiers_of(slo), slo.description),
                    found, places)
            health = await probe_health(session, self.endpoint_down_runs)
            out += endpoint_down_candidates(health, self.endpoint_down_runs)
            out += no_data_candidates(health, now)
            out += capacity_drop_candidates(await capacity_histories(session, HISTORY))
            out += drift_candidates([
                DriftState(name, f.metric, f.stat, f.verdict, f.ratio)
                for name, f in await drift_queries.findings(session)])
            known = {c.fingerprint for c in out}
            stale = (await session.execute(select(AlertRow).where(
                AlertRow.state.in_(("pending", "firing"))))).scalars().all()
        out += [Candidate(labels=dict(row.labels), condition=False,
                          annotations=dict(row.annotations))
                for row in stale if row.fingerprint not in known]
        return out

    async def evaluate_once(self, now: datetime | None = None) -> list[tuple[str, str]]:
        """One pass; the (fingerprint, transition) pairs this replica notified."""
        moment = now or datetime.now(UTC)
        await self._refresh_drift(moment)
        notified = []
        for candidate in await self.candidates(moment):
            async with self.sessions.begin() as session:
                transition = await alert_queries.advance(
                    session, candidate, moment, candidate.hold, self.repeat, self.replica_id)
            if transition is not None:
                notified.append((candidate.fingerprint, transition))
                logger.warning("alert %s %s: %s", candidate.alertname, transition,
                               candidate.labels)
        if notified:
            self.on_transition()
        return notified

    async def _refresh_drift(self, now: datetime) -> None:
        """Drift findings at most every `drift.every` per replica (and across replicas: the
        refresh itself checks when they were last computed)."""
        if self._drift_tried is not None and now - self._drift_tried < self.drift.every:
            return
        self._drift_tried = now
        try:
            await drift_findings.refresh(self.sessions, now, self.drift.window,
                                         self.drift.baseline, list(self.drift.watched),
                                         self.drift.every)
        except Exception as exc:  # noqa: BLE001 - keep the previous findings on any failure
            logger.warning("drift findings failed (%s); kept the previous ones",
                           type(exc).__name__)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alert-evaluator")

    @property
    def alive(self) -> bool:
        """Whether its loop runs (started, and neither ended nor cancelled)."""
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.evaluate_once()
            except Exception as exc:  # noqa: BLE001 - the evaluation loop outlives any one pass
                logger.warning("alert evaluation failed (%s); next try in %ss",
                               type(exc).__name__, self.interval_s)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
