"""This replica's heartbeat, and abandoning the runs of replicas whose heartbeat went stale.

Every heartbeat interval the replica records its load and reads the other live replicas'
(for claim_delay). A replica whose heartbeat is older than STALE_BEATS intervals is dead: any
live replica marks its pending and running runs `abandoned` (the samples it wrote are kept).
A replica only judges others after it has itself been beating without a gap for that long,
so after a database outage (when every heartbeat went stale together) nobody abandons the
runs of replicas that are merely reconnecting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db import replicas
from sustain.service.ticks.locations import DEFAULT_LOCATION

logger = logging.getLogger(__name__)

STALE_BEATS = 3
DATABASE_ERRORS = (OSError, DBAPIError, TimeoutError, SATimeoutError)


@dataclass(slots=True)
class PeerLoads:
    """Runs in flight of each other live replica, as of the last heartbeat: written by
    Liveness, read by the executor's claim spreading (both are handed the same instance)."""

    others: dict[str, int] = field(default_factory=dict)
    """Of the other replicas of the service in this replica's location (those that share
    its ticks and wait before claiming one). Agents are not among them: they claim over the
    API without waiting, and any number of them must not push a replica back."""
    known: frozenset[str] = frozenset()
    """The other replicas and agents alive at the last heartbeat that reached the database,
    kept through an outage: who may run which tick while the database cannot decide."""


class Liveness:
    def __init__(self, engine: AsyncEngine, replica_id: str, interval_s: float,
                 in_flight: Callable[[], int],
                 own_runs: Callable[[], set[int]] = set,
                 peers: PeerLoads | None = None, *, location: str = DEFAULT_LOCATION) -> None:
        self.engine = engine
        self.replica_id = replica_id
        self.location = location
        self.interval_s = interval_s
        self.stale_s = STALE_BEATS * interval_s
        self.in_flight = in_flight
        self.own_runs = own_runs
        """Runs this replica is executing: its other pending or running runs are lost."""
        self.peers = peers if peers is not None else PeerLoads()
        self.stopping = False
        self.abandoned_total = 0
        self._healthy_since: float | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def others(self) -> dict[str, int]:
        """Runs in flight of each other live replica, as of the last heartbeat."""
        return self.peers.others

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="heartbeat")

    @property
    def alive(self) -> bool:
        """Whether its loop runs (started, and neither ended nor cancelled)."""
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.beat()
            except Exception:
                logger.exception("heartbeat failed unexpectedly; beating on")
                self._healthy_since = None
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    async def beat(self) -> None:
        """One heartbeat, then (when this replica has been healthy long enough) a reap."""
        try:
            async with asyncio.timeout(self.interval_s * 2):
                async with self.engine.begin() as connection:
                    await replicas.heartbeat(connection, self.replica_id, self.location,
                                             self.in_flight(), self.stopping)
                    peers = await replicas.live_peers(
                        connection, self.replica_id, self.location, self.stale_s)
                    self.peers.others = {p.id: p.in_flight for p in peers if not p.agent}
                    self.peers.known = frozenset(p.id for p in peers)
        except DATABASE_ERRORS as exc:
            if self._healthy_since is not None:
                logger.warning("heartbeat failed (%s)", type(exc).__name__)
            self._healthy_since = None
            self.peers.others = {}
            return
        now = time.monotonic()
        if self._healthy_since is None:
            self._healthy_since = now
        if now - self._healthy_since >= self.stale_s:
            await self.reap()

    async def reap(self) -> None:
        """Abandon the runs of dead replicas, and this replica's own runs that it is not
        executing. Time-limited, so a lock wait never delays the next heartbeat for long."""
        try:
            async with asyncio.timeout(self.interval_s * 2):
                async with self.engine.begin() as connection:
                    abandoned = await replicas.abandon_dead(connection, self.replica_id,
                                                            self.stale_s)
                async with self.engine.begin() as connection:
                    abandoned += await replicas.abandon_lost(
                        connection, self.replica_id, self.stale_s, self.own_runs())
        except DATABASE_ERRORS as exc:
            logger.warning("checking for dead replicas failed (%s)", type(exc).__name__)
            return
        self.abandoned_total += len(abandoned)
        for run in abandoned:
            logger.warning("run %s of probe %s abandoned: replica %s %s", run.run_id,
                           run.probe_id, run.claimed_by,
                           "lost track of it" if run.claimed_by == self.replica_id
                           else "stopped heartbeating")

    async def close(self) -> None:
        """Stop beating and remove this replica's row (others need not wait for it to go
        stale)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            async with asyncio.timeout(5):
                async with self.engine.begin() as connection:
                    await replicas.remove(connection, self.replica_id)
        except DATABASE_ERRORS:
            pass
