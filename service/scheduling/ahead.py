"""Claiming ticks ahead of their firing, many in one transaction.

A tick's run starts when it fires (tick + jitter) with no database round trip in between:
every replica knows the next firing of each probe of its location (TickPlan), and claims the
ticks that fire in the next moments a little ahead of time, in one transaction per batch
whatever their number: one statement takes the probes' advisory locks (the same per-probe
lock as every other claim and run-now, taken in key order so batches never deadlock), one
inserts the runs of the ticks whose probe is not busy (ON CONFLICT DO NOTHING on the unique
(probe_id, location, scheduled_for): a tick another replica took is left to it), one reads
the claimed probes with their endpoints. The claimed runs wait in memory until their
firing, which starts them.

The order between the replicas of a location is decided by the lead: the tick's preferred
replica (claims.preferred) claims it `lead_s` before it fires, every other replica sweeps
what is left at half that lead. A tick whose probe is busy when it is claimed ahead (a run
of it is still pending or running in the location) is not claimed ahead: it is claimed when
it fires, as before batching, so that the previous run may still end in time.

Everything here is O(1) database round trips per batch: one batch holds every tick due in a
planner step, whether one probe fires then or ten thousand.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import BigInteger, any_, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import Endpoint, Probe
from sustain.service.scheduling.claims import preferred
from sustain.service.scheduling.trigger import TickTrigger

LEAD_S = 2.0
"""Seconds before its firing that a tick's preferred replica claims it (at most a quarter of
the probe's period, so a short interval does not claim a tick while the previous one runs);
every other replica of the location sweeps what is left at half the lead."""
STEP_S = 0.2
"""How often the planner looks for ticks to claim, in seconds; a batch takes every tick
whose claiming moment comes within the next step."""
MIN_AHEAD_S = 0.1
"""A tick that fires sooner than this is not claimed ahead: a planner that runs this late
is on a busy replica, and the tick goes to whichever replica fires it first."""
PAUSE_AFTER_FAILURE_S = 5.0
"""After a batch the database could not take, ticks are claimed when they fire (where an
outage is handled) for this many seconds before claiming ahead is tried again."""
EXPIRY_MARGIN_S = 1.0
"""A tick claimed ahead that has not started this long past its firing plus its misfire
grace is recorded `missed` (its job never fired: the loop stalled, or the probe changed)."""
PROBE_LOCK_NAMESPACE = 1937012083
"""The first key of every per-probe advisory lock (runs.PROBE_LOCK's, 'sust')."""


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A tick of a probe, the moment its job fires it, and how late it may still start."""

    probe_id: int
    tick: datetime
    fire_at: datetime
    grace_s: float

    @property
    def key(self) -> tuple[int, datetime]:
        return self.probe_id, self.tick


@dataclass(frozen=True, slots=True)
class _Tracked:
    version: int
    trigger: TickTrigger
    grace_s: float
    lead_s: float


def lead_of(period_s: float) -> float:
    """How long before its firing a tick is claimed by its preferred replica, in seconds."""
    return min(LEAD_S, period_s / 4)


class TickPlan:
    """The next firing of each tracked probe, in the order their claims fall due.

    Each probe has one entry at a time: its next tick, keyed by the moment it is to be
    claimed (firing minus the lead; minus half the lead once its preferred replica is
    known to be another). Taking an entry plans the probe's following tick."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int, int, int, bool, Upcoming]] = []
        """(claim at, order, probe id, version, swept, tick)."""
        self._tracked: dict[int, _Tracked] = {}
        self._order = itertools.count()
        self._versions = itertools.count(1)

    def track(self, probe_id: int, trigger: TickTrigger, grace_s: float, period_s: float,
              now: datetime) -> None:
        """Plan the probe's ticks from its next firing after `now` (replacing its plan)."""
        tracked = _Tracked(next(self._versions), trigger, grace_s, lead_of(period_s))
        self._tracked[probe_id] = tracked
        tick = trigger.upcoming_tick(now)
        self._push(probe_id, tracked, tick)

    def forget(self, probe_id: int) -> None:
        self._tracked.pop(probe_id, None)

    def _entry(self, probe_id: int, tracked: _Tracked, upcoming: Upcoming, *, swept: bool
               ) -> tuple[datetime, int, int, int, bool, Upcoming]:
        lead_s = tracked.lead_s / 2 if swept else tracked.lead_s
        return (upcoming.fire_at - timedelta(seconds=lead_s), next(self._order), probe_id,
                tracked.version, swept, upcoming)

    def _push(self, probe_id: int, tracked: _Tracked, tick: datetime) -> None:
        upcoming = Upcoming(probe_id, tick, tracked.trigger.fire_time(tick), tracked.grace_s)
        heapq.heappush(self._heap, self._entry(probe_id, tracked, upcoming, swept=False))

    def due(self, until: datetime, me: str, others: Mapping[str, int],
            in_flight: int) -> list[Upcoming]:
        """The ticks this replica claims now: those whose claiming moment comes by `until`
        (its preferred ticks at the full lead, the others' at half of it). Each probe's
        following tick is planned, to be taken by a later call."""
        taken: list[Upcoming] = []
        later: list[tuple[datetime, int, int, int, bool, Upcoming]] = []
        while self._heap and self._heap[0][0] <= until:
            _, _, probe_id, version, swept, upcoming = heapq.heappop(self._heap)
            tracked = self._tracked.get(probe_id)
            if tracked is None or tracked.version != version:
                continue  # forgotten, or planned again since
            sweep = self._entry(probe_id, tracked, upcoming, swept=True)
            if swept or sweep[0] <= until or preferred(probe_id, upcoming.tick, me, others,
                                                       in_flight):
                taken.append(upcoming)
                following = tracked.trigger.schedule.next_after(upcoming.tick)
                later.append(self._entry(probe_id, tracked, Upcoming(
                    probe_id, following, tracked.trigger.fire_time(following),
                    tracked.grace_s), swept=False))
            else:
                later.append(sweep)
        for entry in later:
            heapq.heappush(self._heap, entry)
        return taken


LOCK_PROBES = text(f"""
    SELECT count(pg_advisory_xact_lock({PROBE_LOCK_NAMESPACE}, k)) FROM (
        SELECT DISTINCT CAST(p % 2147483647 AS integer) AS k
        FROM unnest(CAST(:probe_ids AS bigint[])) AS p ORDER BY k
    ) AS keys
""")
"""The per-probe locks of a batch, in key order (a lone claim or run-now takes one; two
batches take theirs in the same order): one statement whatever the number of probes."""

CLAIM_AHEAD = text("""
    WITH wanted AS (
        SELECT w.probe_id, w.tick, w.start_at, EXISTS (
            SELECT 1 FROM runs r WHERE r.probe_id = w.probe_id AND r.location = :location
            AND r.status IN ('pending', 'running') AND r.id <> ALL(CAST(:ended AS bigint[]))
            AND NOT (r.trigger = 'schedule' AND r.scheduled_for = w.tick)
        ) AS busy
        FROM unnest(CAST(:probe_ids AS bigint[]), CAST(:ticks AS timestamptz[]),
                    CAST(:starts AS timestamptz[])) AS w(probe_id, tick, start_at)
        WHERE EXISTS (SELECT 1 FROM probes p WHERE p.id = w.probe_id)
    ), claimed AS (
        INSERT INTO runs (probe_id, location, trigger, scheduled_for, status, claimed_by,
                          started_at)
        SELECT probe_id, :location, 'schedule', tick, 'running', :replica,
               GREATEST(start_at, now())
        FROM wanted WHERE NOT busy
        ON CONFLICT (probe_id, location, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
        RETURNING id, probe_id, scheduled_for
    )
    SELECT w.probe_id, w.tick, w.busy, c.id FROM wanted w
    LEFT JOIN claimed c ON c.probe_id = w.probe_id AND c.scheduled_for = w.tick
""")
"""Claim each tick of a batch whose probe is not busy in the location (a run of the tick
itself, claimed by another replica, does not make it busy: it makes the tick taken); every
tick's outcome: claimed (its run id), busy, or neither (another replica has it, or the probe
is gone)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What claiming one tick ahead came to."""

    upcoming: Upcoming
    run_id: int | None
    """This replica's run of the tick (None: not claimed here)."""
    busy: bool
    """A run of the probe was pending or running in the location: claimed when it fires."""


async def claim_batch(session: AsyncSession, batch: Sequence[Upcoming], replica: str,
                      location: str, ended: Iterable[int] = ()) -> list[Outcome]:
    """Claim the batch's ticks (at most one per probe) in the session's transaction: two
    statements whatever the batch's size. `ended`: runs the claimer knows have ended though
    their final record is not written yet (they do not make their probe busy)."""
    if not batch:
        return []
    probe_ids = [u.probe_id for u in batch]
    await session.execute(LOCK_PROBES, {"probe_ids": probe_ids})
    rows = await session.execute(CLAIM_AHEAD, {
        "probe_ids": probe_ids, "ticks": [u.tick for u in batch],
        "starts": [u.fire_at for u in batch], "location": location, "replica": replica,
        "ended": sorted(ended)})
    found = {(int(r[0]), r[1]): (None if r[3] is None else int(r[3]), bool(r[2]))
             for r in rows}
    outcomes = []
    for upcoming in batch:
        run_id, busy = found.get(upcoming.key, (None, False))
        outcomes.append(Outcome(upcoming, run_id, busy))
    return outcomes


async def probes_with_endpoints(session: AsyncSession, probe_ids: Iterable[int]
                                ) -> dict[int, tuple[Probe, Endpoint]]:
    """The probes with their endpoints, by id: one statement (and one per RAG endpoint kind
    that any of them uses) whatever their number."""
    ids = sorted(set(probe_ids))
    if not ids:
        return {}
    wanted = bindparam("ids", ids, type_=ARRAY(BigInteger))
    rows = await session.execute(
        select(Probe, Endpoint).join(Endpoint, Probe.endpoint_id == Endpoint.id)
        .where(Probe.id == any_(wanted)))
    return {row[0].id: (row[0], row[1]) for row in rows}


RELEASE = text("""
    DELETE FROM runs WHERE id = ANY(CAST(:ids AS bigint[])) AND claimed_by = :replica
    AND status = 'running' AND trigger = 'schedule'
""")

EXPIRE = text("""
    UPDATE runs SET status = 'missed', started_at = NULL, finished_at = now(), error = :error
    WHERE id = ANY(CAST(:ids AS bigint[])) AND claimed_by = :replica AND status = 'running'
    AND trigger = 'schedule'
""")
NOT_STARTED = "claimed ahead by replica {replica}, which did not start it in time"

SKIP = text("""
    UPDATE runs SET status = 'skipped', started_at = NULL, finished_at = now(),
        error = 'the previous run of the probe was still going'
    WHERE id = ANY(CAST(:ids AS bigint[])) AND claimed_by = :replica AND status = 'running'
    AND trigger = 'schedule'
""")


async def release(session: AsyncSession, run_ids: Sequence[int], replica: str) -> None:
    """Forget this replica's claims of ticks it will not run because their probe no longer
    runs here (disabled, deleted, moved away): as if never claimed."""
    if run_ids:
        await session.execute(RELEASE, {"ids": sorted(run_ids), "replica": replica})


async def skip(session: AsyncSession, run_ids: Sequence[int], replica: str) -> None:
    """Record this replica's claims of ticks that fired while their probe's previous run was
    still going here as `skipped`, as a tick claimed when it fires is (never deleted: a tick
    the other replicas saw taken would then have no record until it was found missed)."""
    if run_ids:
        await session.execute(SKIP, {"ids": sorted(run_ids), "replica": replica})


async def expire(session: AsyncSession, run_ids: Sequence[int], replica: str) -> None:
    """Record this replica's claims of ticks it did not start in time as `missed`."""
    if run_ids:
        await session.execute(EXPIRE, {"ids": sorted(run_ids), "replica": replica,
                                       "error": NOT_STARTED.format(replica=replica)})
