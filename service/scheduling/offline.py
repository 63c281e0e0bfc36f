"""Ticks measured while the database is unreachable, held until it is back.

When a claim cannot reach the database, the replica that owns the tick by rendezvous hashing
over the replicas last seen alive (claims.tick_owner) runs it anyway, from the probe and
endpoint it last read. Its samples and final record wait here, bounded like the write buffer
(past the capacity further samples are dropped, counted and recorded on the run). When the
database answers again, each held run is stored through the same unique claim as any tick
(runs.claim_measured): the first measurement of a tick becomes its run, its samples and final
record stored with the claim in one transaction (ingest.store.store_run, as every finished
run is); one that finds the tick already run elsewhere is kept as a sample-free `skipped`
record (trigger `partition`), never as a second run.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime

import asyncpg
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from sustain.probes.measure.sample import Sample
from sustain.service.db import runs as run_queries
from sustain.service.ingest.store import Stored, store_run
from sustain.service.ingest.writer import RefusalCounts
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.rows import sample_tuple
from sustain.service.ticks.locations import DEFAULT_LOCATION

logger = logging.getLogger(__name__)

DATABASE_ERRORS = (OSError, DBAPIError, TimeoutError, SATimeoutError, asyncpg.PostgresError,
                   asyncpg.InterfaceError)


@dataclass(slots=True)
class HeldRun:
    """One tick measured offline: what it measured and how it ended."""

    probe_id: int
    tick: datetime
    started_at: datetime
    samples: list[Sample] = field(default_factory=list)
    dropped: int = 0
    final: RunFinal | None = None


@dataclass(slots=True)
class OfflineSink:
    """What an offline run puts its samples into (RunSink's interface)."""

    store: OfflineRuns
    run: HeldRun

    def put(self, sample: Sample) -> None:
        if self.store.samples >= self.store.capacity:
            self.run.dropped += 1
            return
        self.run.samples.append(sample)
        self.store.samples += 1

    def finish(self, final: RunFinal) -> None:
        self.run.final = final
        self.store.measuring -= 1
        self.store.finished.append(self.run)


class OfflineRuns:
    """The runs this replica measured during a database outage, until they are stored."""

    def __init__(self, capacity: int, replica_id: str,
                 refusals: RefusalCounts | None = None,
                 location: str = DEFAULT_LOCATION) -> None:
        self.capacity = capacity
        self.replica_id = replica_id
        self.location = location
        """Where the held runs were measured (the replica's location)."""
        self.refusals = refusals if refusals is not None else RefusalCounts()
        """Where records the database refuses are counted (the writer's)."""
        self.samples = 0
        """Samples held, over all offline runs."""
        self.finished: deque[HeldRun] = deque()
        self.measuring = 0
        """Offline runs still measuring."""
        self.stored = 0
        self.duplicates = 0
        self._storing = asyncio.Lock()
        """One store at a time (the executor's watcher, its shutdown, a test): two would both
        take the oldest held run, and store its tick twice."""

    def open(self, probe_id: int, tick: datetime, started_at: datetime) -> OfflineSink:
        self.measuring += 1
        return OfflineSink(self, HeldRun(probe_id, tick, started_at))

    @property
    def pending(self) -> int:
        """Offline runs not yet stored: finished, or still measuring."""
        return len(self.finished) + self.measuring

    async def store(self, sessions: async_sessionmaker[AsyncSession]) -> int:
        """Store the finished offline runs, oldest first, while the database answers; how
        many were stored (as runs or as duplicates). Each goes in one transaction, claim,
        samples and final record together: the tick's run is never seen `running` (which
        would make the probe's next tick `skipped`), and a failure stores none of it."""
        async with self._storing:
            return await self._store(sessions)

    async def store_last(self, sessions: async_sessionmaker[AsyncSession],
                         timeout_s: float) -> None:
        """Shutdown: one last try, of at most `timeout_s` seconds, at storing what was
        measured offline; what is still not stored then is lost, and logged as lost."""
        if not self.pending:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self.store(sessions)
        except TimeoutError:
            pass
        if self.pending:
            logger.error("%d ticks measured while the database was unreachable are lost at "
                         "shutdown (%d samples)", self.pending, self.samples)

    async def _store(self, sessions: async_sessionmaker[AsyncSession]) -> int:
        done = 0
        while self.finished:
            held = self.finished[0]
            assert held.final is not None
            run_id = duplicate = None
            stored = Stored()
            try:
                async with sessions.begin() as session:
                    run_id = await run_queries.claim_measured(
                        session, held.probe_id, held.tick, self.replica_id, self.location,
                        held.started_at)
                    if run_id is None:
                        duplicate = await run_queries.record_partition_duplicate(
                            session, held.probe_id, held.tick, self.replica_id,
                            self.location, held.started_at, duplicate_error(self.replica_id,
                                                             len(held.samples) + held.dropped))
                    else:
                        stored = await store_whole(await session.connection(), run_id, held)
            except IntegrityError:
                logger.info("probe %s was deleted during the outage; its tick %s measured "
                            "offline is dropped", held.probe_id, held.tick)
                self._forget(held)
                continue
            except DATABASE_ERRORS as exc:
                logger.debug("offline runs wait for the database (%s)", type(exc).__name__)
                return done
            self._forget(held)
            done += 1
            if stored.refused:
                self.refusals.add(stored, "run measured during the outage")
            if run_id is None:
                self.duplicates += 1
                logger.warning("tick %s of probe %s was measured elsewhere too during the "
                               "outage; kept as skipped run %s", held.tick, held.probe_id,
                               duplicate)
                continue
            self.stored += 1
            logger.info("tick %s of probe %s, measured during the outage, stored as run %s "
                        "(%d samples)", held.tick, held.probe_id, run_id, len(held.samples))
        return done

    def _forget(self, held: HeldRun) -> None:
        self.finished.popleft()
        self.samples -= len(held.samples)


async def store_whole(connection: AsyncConnection, run_id: int, held: HeldRun) -> Stored:
    """A held run's samples and final record, stored as every finished run is
    (ingest.store.store_run): what the database refuses of it is kept in dead_letters and
    fails the run, never holds back the runs after it."""
    assert held.final is not None
    rows = [sample_tuple(run_id, pos, held.probe_id, sample)
            for pos, sample in enumerate(held.samples)]
    return await store_run(connection, run_id, rows,
                           replace(held.final, samples_dropped=held.dropped))


def duplicate_error(replica: str, samples: int) -> str:
    return (f"measured during a database outage by replica {replica} as well; the tick's "
            f"run is another replica's, so these {samples} samples were not kept")
