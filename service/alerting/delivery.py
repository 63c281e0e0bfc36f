"""The delivery worker, run by every replica: dispatches owed notifications into deliveries,
leases the due ones and sends each in its own task, so a slow or failing notifier never holds
back evaluation or the other notifiers. Failures are retried with exponential backoff across
passes (the delivery log keeps every attempt's outcome); Alertmanager notifiers also get every
firing alert re-sent each period, as Prometheus does, so Alertmanager never times them out.

Silences are read once per pass, and only those active at its moment (SUSTAIN_MAX_SILENCES
bounds how many may be pending or active); the alerts of a pass are matched against them
in a worker thread, so however many there are, the event loop (and /healthz) never waits
on the matching. Each receiver's answer is read raw and bounded (see notifiers.transport).
What is sent, and which notifiers re-send, is up to each one's kind (notifiers.REGISTRY)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sustain.service.alerting import notifiers
from sustain.service.db import deliveries as queries
from sustain.service.db.models import Notifier
from sustain.service.evaluation.matchers import SilenceWindow, silenced
from sustain.service.policy.reach import Reach

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
    max_response_bytes: int = 64 * 1024
    """Raw bytes of a receiver's answer read before the connection is closed
    (SUSTAIN_NOTIFY_MAX_RESPONSE_BYTES)."""
    max_silences: int = 1000
    """Active silences a pass matches alerts against, the newest first (SUSTAIN_MAX_SILENCES:
    creates beyond it are refused, so more are active only when it was lowered)."""


def muted(silences: Sequence[SilenceWindow], labels: Sequence[Mapping[str, str]],
          now: datetime) -> list[bool]:
    """Whether each alert (by its labels) is silenced at `now`: at most len(silences) x
    (distinct label sets) matches, each of RE2 patterns (linear time); an alert sent to
    several notifiers is matched once. Pure; run off the event loop."""
    known: dict[tuple[tuple[str, str], ...], bool] = {}
    flags = []
    for one in labels:
        key = tuple(sorted(one.items()))
        if key not in known:
            known[key] = silenced(silences, one, now)
        flags.append(known[key])
    return flags


async def muted_off_loop(silences: Sequence[SilenceWindow],
                         labels: Sequence[Mapping[str, str]], now: datetime) -> list[bool]:
    """`muted`, in a worker thread unless there is nothing to match."""
    if not silences or not labels:
        return [False] * len(labels)
    return await asyncio.to_thread(muted, silences, labels, now)


def _target(notifier: Notifier, reach: Reach) -> notifiers.Target | notifiers.Outcome:
    """Where to send, or why not: the outcome of a kind this build does not know (a notifier
    stored by a newer one) is final."""
    if notifier.kind not in notifiers.REGISTRY:
        return notifiers.Outcome(False, error=f"unknown notifier kind {notifier.kind!r}")
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
        self._too_many_silences = False

    def wake(self) -> None:
        """Start the next pass now (an alert just moved)."""
        self._wake.set()

    async def pass_once(self, now: datetime | None = None) -> list[asyncio.Task[None]]:
        """Dispatch, lease and start sending; the tasks started. The silences active at
        the pass's moment are read once (when anything is to be sent), in the transaction
        that leases (so a failure to read them leaves nothing leased), and matched off the
        event loop."""
        moment = now or datetime.now(UTC)
        policy = self.policy
        async with self.sessions.begin() as session:
            await queries.dispatch(session)
        targets, firing = await self._resend_due(moment)
        async with self.sessions.begin() as session:
            claimed = await queries.claim(
                session, self.replica_id, policy.lease_s,
                policy.max_in_flight - len(self._tasks), policy.per_notifier)
            silences = await self._active_silences(session, moment) \
                if claimed or targets else []
        flags = await muted_off_loop(
            silences, [item.payload.get("labels", {}) for item in claimed]
            + [p["labels"] for p in firing], moment)
        started = [self._spawn(self._deliver(item, flag))
                   for item, flag in zip(claimed, flags[:len(claimed)], strict=True)]
        audible = [p for p, flag in zip(firing, flags[len(claimed):], strict=True) if not flag]
        started += [self._spawn(self._resend_to(n, audible)) for n in targets]
        return started

    async def _active_silences(self, session: AsyncSession, now: datetime
                               ) -> list[SilenceWindow]:
        """The newest SUSTAIN_MAX_SILENCES silences active at `now`; a warning (once, until
        it no longer holds) when more are active, stored before the limit was lowered: the
        older ones then silence nothing, so their alerts are sent rather than lost."""
        limit = self.policy.max_silences
        silences = await queries.active_silences(session, now, limit)
        over = len(silences) > limit
        if over and not self._too_many_silences:
            logger.warning("more than %d silences are active; only the newest %d silence "
                           "alerts (SUSTAIN_MAX_SILENCES)", limit, limit)
        self._too_many_silences = over
        return silences[:limit]

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

    async def _deliver(self, item: queries.Claimed, hushed: bool) -> None:
        """Send one delivery (or record it silenced, when `hushed`) and record the outcome;
        any failure of our own becomes a retryable outcome naming only the exception type, so
        no row is left leased."""
        try:
            await self._attempt(item, hushed)
        except Exception as exc:  # noqa: BLE001 - any failure is retried, never left leased
            logger.warning("notifier %s: delivery %d failed (%s)", item.notifier.name,
                           item.id, type(exc).__name__)
            try:
                await self._retry_or_fail(item, notifiers.Outcome(
                    False, error=f"internal error ({type(exc).__name__})", retryable=True))
            except Exception as again:  # noqa: BLE001 - a lease that ends retries it
                logger.warning("delivery %d: outcome not recorded (%s); retried when its "
                               "lease ends", item.id, type(again).__name__)

    async def _attempt(self, item: queries.Claimed, hushed: bool) -> None:
        if hushed:
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
                    outcome = await notifiers.post(
                        self.client, url, body, headers, target.timeout_s,
                        self.policy.quick_wait_s, self.policy.max_response_bytes)
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

    async def _resend_due(self, now: datetime
                          ) -> tuple[list[Notifier], list[dict[str, Any]]]:
        """The notifiers of re-sending kinds (Alertmanager) whose re-send this replica took
        for this period, and the firing alerts (silences not yet applied); nothing when none
        is due."""
        period = timedelta(seconds=self.policy.resend_s)
        async with self.sessions.begin() as session:
            targets = [n for n in await queries.resenders(session,
                                                          notifiers.REGISTRY.resending())
                       if await queries.resend_due(session, n.id, now, period)]
            if not targets:
                return [], []
            return targets, await queries.firing_payloads(session)

    async def _resend_to(self, notifier: Notifier, firing: list[dict[str, Any]]) -> None:
        """Re-send the firing alerts routed to a re-sending notifier; a failure (database or
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
        try:
            async with asyncio.timeout(self.send_budget_s()):
                outcome = await notifiers.post(self.client, url, body, headers,
                                               target.timeout_s, self.policy.quick_wait_s,
                                               self.policy.max_response_bytes)
        except TimeoutError:
            outcome = notifiers.Outcome(False, error="timed out", retryable=True)
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
