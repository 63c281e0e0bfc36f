"""The delivery worker, run by every replica: dispatches owed notifications into deliveries,
leases the due ones and sends each in its own task, so a slow or failing notifier never holds
back evaluation or the other notifiers. Failures are retried with exponential backoff across
passes (the delivery log keeps every attempt's outcome); Alertmanager notifiers also get every
firing alert re-sent each period, as Prometheus does, so Alertmanager never times them out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.service.alerting import notifiers
from sustain.service.db import deliveries as queries
from sustain.service.db.models import Notifier
from sustain.service.domain.reach import Reach
from sustain.service.evaluation.matchers import SilenceWindow, silenced

logger = logging.getLogger(__name__)

Observe = Callable[[str, str], None]
"""Called with (notifier name, result) for every attempt's result."""

PASS_BACKOFF_MAX_S = 30.0
"""After passes that failed in a row (database down, no file descriptors left), the next
waits poll_s doubled per failure, up to this."""


def retry_delay(attempts: int, base_s: float, max_s: float) -> float:
    """Seconds before attempt `attempts + 1`: base, doubled per attempt made, capped."""
    return float(min(max_s, base_s * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    poll_s: float = 1.0
    lease_s: float = 120.0
    max_attempts: int = 10
    retry_base_s: float = 5.0
    retry_max_s: float = 600.0
    quick_wait_s: float = 0.5
    resend_s: float = 60.0
    max_in_flight: int = 32
    per_notifier: int = 8


def _target(notifier: Notifier, reach: Reach) -> notifiers.Target | notifiers.Outcome:
    return notifiers.resolve(notifier.name, notifier.kind, notifier.url,
                             notifier.url_secret_ref, notifier.signing_secret_ref,
                             notifier.timeout_s, reach)


class DeliveryWorker:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: httpx.AsyncClient,
                 replica_id: str, external_url: str, policy: DeliveryPolicy | None = None,
                 observe: Observe | None = None, reach: Reach | None = None) -> None:
        self.sessions = sessions
        self.client = client
        """Sends through the egress check (egress_connect.egress_client) in the service."""
        self.reach = reach or Reach()
        """Where secret references may point, and which URLs may be reached."""
        self.replica_id = replica_id
        self.external_url = external_url
        self.policy = policy or DeliveryPolicy()
        self.observe = observe or (lambda _notifier, _result: None)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """Start the next pass now (an alert just moved)."""
        self._wake.set()

    async def pass_once(self, now: datetime | None = None) -> list[asyncio.Task[None]]:
        """Dispatch, lease and start sending; the tasks started."""
        moment = now or datetime.now(UTC)
        policy = self.policy
        async with self.sessions.begin() as session:
            await queries.dispatch(session)
        async with self.sessions.begin() as session:
            claimed = await queries.claim(
                session, self.replica_id, policy.lease_s,
                policy.max_in_flight - len(self._tasks), policy.per_notifier)
            silences = await queries.active_silences(session, moment) if claimed else []
        started = [self._spawn(self._deliver(item, silences)) for item in claimed]
        started += await self._resend(moment)
        return started

    async def drain(self, now: datetime | None = None) -> None:
        """One pass, waiting for what it started (tests, shutdown)."""
        await asyncio.gather(*await self.pass_once(now))

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        """Forget a finished send; one that failed unexpectedly is logged (by type only: a
        message may carry a notifier's URL) rather than left for the garbage collector."""
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("a notification task failed unexpectedly (%s)", type(exc).__name__)

    async def _deliver(self, item: queries.Claimed, silences: list[SilenceWindow]) -> None:
        """Send one delivery and record the outcome; any failure of our own becomes a
        retryable outcome naming only the exception type, so no row is left leased."""
        try:
            await self._attempt(item, silences)
        except Exception as exc:  # noqa: BLE001 - any failure is retried, never left leased
            logger.warning("notifier %s: delivery %d failed (%s)", item.notifier.name,
                           item.id, type(exc).__name__)
            try:
                await self._retry_or_fail(item, notifiers.Outcome(
                    False, error=f"internal error ({type(exc).__name__})", retryable=True))
            except Exception as again:  # noqa: BLE001 - a lease that ends retries it
                logger.warning("delivery %d: outcome not recorded (%s); retried when its "
                               "lease ends", item.id, type(again).__name__)

    async def _attempt(self, item: queries.Claimed, silences: list[SilenceWindow]) -> None:
        labels = item.payload.get("labels", {})
        if silenced(silences, labels, datetime.now(UTC)):
            await self._finish(item, "silenced", error="suppressed by a silence")
            return
        if item.transition == "resolved" and not item.earlier_delivered:
            await self._finish(item, "skipped", error="its firing was never delivered here")
            return
        target = _target(item.notifier, self.reach)
        if isinstance(target, notifiers.Outcome):
            outcome = target
        elif item.attempts > self.policy.max_attempts:
            outcome = notifiers.Outcome(False, error="gave up: attempts kept being cut off")
        else:
            url, body, headers = notifiers.request_for(
                target, [item.payload], item.id, self.external_url, datetime.now(UTC),
                self._valid_for())
            try:
                async with asyncio.timeout(self.send_budget_s()):
                    outcome = await notifiers.post(self.client, url, body, headers,
                                                   target.timeout_s, self.policy.quick_wait_s)
            except TimeoutError:
                outcome = notifiers.Outcome(False, error="timed out", retryable=True)
        if outcome.delivered:
            await self._finish(item, "delivered", status=outcome.status)
        else:
            await self._retry_or_fail(item, outcome)

    def send_budget_s(self) -> float:
        """The longest one attempt may take: well inside its lease, so no other replica
        takes the delivery over while it is still being sent."""
        return self.policy.lease_s * 0.75

    async def _retry_or_fail(self, item: queries.Claimed, outcome: notifiers.Outcome) -> None:
        name = item.notifier.name
        if outcome.retryable and item.attempts < self.policy.max_attempts:
            delay = retry_delay(item.attempts, self.policy.retry_base_s, self.policy.retry_max_s)
            logger.warning("notifier %s: %s; attempt %d failed, retrying in %.1fs", name,
                           outcome.error, item.attempts, delay)
            await self._finish(item, "pending", status=outcome.status, error=outcome.error,
                               retry_in_s=delay)
        else:
            logger.error("notifier %s: %s; giving up after %d attempts", name, outcome.error,
                         item.attempts)
            await self._finish(item, "failed", status=outcome.status, error=outcome.error)

    async def _finish(self, item: queries.Claimed, state: str, status: int | None = None,
                      error: str | None = None, retry_in_s: float | None = None) -> None:
        async with self.sessions.begin() as session:
            kept = await queries.finish(session, item.id, self.replica_id, item.attempts,
                                        state, status, error, retry_in_s)
        if kept:
            self.observe(item.notifier.name, "retry" if state == "pending" else state)

    def _valid_for(self) -> timedelta:
        """How long Alertmanager keeps a firing alert that is not re-sent."""
        return timedelta(seconds=4 * self.policy.resend_s)

    async def _resend(self, now: datetime) -> list[asyncio.Task[None]]:
        period = timedelta(seconds=self.policy.resend_s)
        async with self.sessions.begin() as session:
            targets = [n for n in await queries.alertmanagers(session)
                       if await queries.resend_due(session, n.id, now, period)]
            if not targets:
                return []
            firing = await queries.firing_payloads(session)
            silences = await queries.active_silences(session, now)
        firing = [p for p in firing if not silenced(silences, p["labels"], now)]
        return [self._spawn(self._resend_to(n, firing)) for n in targets]

    async def _resend_to(self, notifier: Notifier, firing: list[dict[str, Any]]) -> None:
        """Re-send the firing alerts routed to an Alertmanager; a failure (database or
        network down, no file descriptor left) is logged and counted, and the next period
        re-sends anyway."""
        try:
            await self._resend_once(notifier, firing)
        except Exception as exc:  # noqa: BLE001 - the next period re-sends
            logger.warning("notifier %s: re-sending firing alerts failed (%s); next try in "
                           "%ss", notifier.name, type(exc).__name__, self.policy.resend_s)
            self.observe(notifier.name, "resend_failed")

    async def _resend_once(self, notifier: Notifier, firing: list[dict[str, Any]]) -> None:
        async with self.sessions() as session:  # re-read: one may have resolved meanwhile
            still = await queries.firing_fingerprints(session)
        chosen = [p for p in firing if p["fingerprint"] in still
                  and queries.routes_to(notifier, p["labels"], "firing")]
        target = _target(notifier, self.reach)
        if not chosen or isinstance(target, notifiers.Outcome):
            return
        url, body, headers = notifiers.request_for(target, chosen, 0, self.external_url,
                                                   datetime.now(UTC), self._valid_for())
        outcome = await notifiers.post(self.client, url, body, headers, target.timeout_s,
                                       self.policy.quick_wait_s)
        self.observe(notifier.name, "resent" if outcome.delivered else "resend_failed")

    def start(self) -> None:
        self._loop = asyncio.create_task(self._run(), name="alert-delivery")

    @property
    def alive(self) -> bool:
        """Whether its loop runs (started, and neither ended nor cancelled)."""
        return self._loop is not None and not self._loop.done()

    async def _run(self) -> None:
        started: list[asyncio.Task[None]] = []
        failures = 0
        while True:
            if failures:
                await asyncio.sleep(retry_delay(failures, self.policy.poll_s,
                                                PASS_BACKOFF_MAX_S))
            elif started:
                await asyncio.sleep(0)  # a backlog: claim the next batch straight away
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.policy.poll_s)
                self._wake.clear()
            try:
                started = await self.pass_once()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the delivery loop outlives any one pass
                started = []
                failures += 1
                logger.warning("notification delivery pass failed (%s); next in %.1fs",
                               type(exc).__name__, retry_delay(failures, self.policy.poll_s,
                                                               PASS_BACKOFF_MAX_S))

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop passing; give sends in flight `grace_s` to finish (unfinished ones are
        retried by another replica once their lease ends)."""
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
